"""Which exporter wrote the graph a model was read from (no TVM, no onnx import here).

One PyTorch model gives different graphs by route: ``torch.onnx.export(..., dynamo=True)`` with
its optimizer on (the default) folds each BatchNorm into the Conv before it and names nodes
``node_Conv_838``; ``load_model(module)`` exports with the optimizer off, so that nodes keep
their module paths and every BatchNorm stays an op (RegNetY-400MF: 249 ops against 356);
TVM's Relax importer of a ``torch.export`` program writes yet another. A plan says which one it
partitioned: :func:`exporter_of` describes an ONNX model's writer, the frontends record it on
``main`` (the function attribute :data:`EXPORTER_ATTR`, which survives the preparation passes
where module attributes do not), the graph readers copy it to ``OpGraph.exporter``, and the plan
shows it (``"exporter"`` in the plan JSON, ``graph from ...`` in the summary line).
"""

from __future__ import annotations

import re
from typing import Any

#: ``main``'s attribute that holds the description (no dot: Relay's text parser reads
#: function attributes as identifiers).
EXPORTER_ATTR = "partition_lab_exporter"
#: The ONNX model's ``metadata_props`` key partition_lab writes when it exports a module
#: itself (:func:`partition_lab.relay.frontends._torch.exported_program_to_onnx`).
ONNX_METADATA_KEY = "partition_lab.exporter"
#: Node metadata only torch.onnx's dynamo (torch.export-based) exporter writes.
_DYNAMO_KEYS = ("pkg.torch.onnx.name_scopes", "pkg.torch.onnx.fx_node")
_LONGEST = 160


def torch_onnx_exporter(opset: int, torch_version: str, optimized: bool) -> str:
    """How partition_lab's own export of a module is described: ``torch.onnx (dynamo, opset
    18, optimizer off; torch 2.5.1)``."""
    return (f"torch.onnx (dynamo, opset {opset}, optimizer {'on' if optimized else 'off'}; "
            f"torch {torch_version})")


def exporter_of(model: Any) -> str:
    """What wrote an ``onnx.ModelProto``, in a few words, or "" when the file does not say.

    partition_lab's own export says so in the model's metadata (:data:`ONNX_METADATA_KEY`);
    otherwise the file's ``producer_name``/``producer_version`` and default-domain opset, and
    "dynamo" where the nodes carry the metadata only torch.onnx's dynamo exporter writes:
    ``ONNX file by pytorch 2.5.1 (torch.onnx dynamo, opset 18)``.
    """
    for prop in getattr(model, "metadata_props", ()):
        if prop.key == ONNX_METADATA_KEY and prop.value:
            return printable(prop.value)
    producer = " ".join(p for p in (getattr(model, "producer_name", ""),
                                    getattr(model, "producer_version", "")) if p)
    if not producer:
        return ""
    opset = next((o.version for o in getattr(model, "opset_import", ())
                  if o.domain in ("", "ai.onnx")), None)
    dynamo = any(prop.key in _DYNAMO_KEYS for node in getattr(model.graph, "node", ())[:20]
                 for prop in getattr(node, "metadata_props", ()))
    details = ", ".join(filter(None, ["torch.onnx dynamo" if dynamo else "",
                                      f"opset {opset}" if opset is not None else ""]))
    return printable(f"ONNX file by {producer}" + (f" ({details})" if details else ""))


def printable(text: str) -> str:
    """``text`` as it may go into a function attribute that Relay prints and parses back: no
    quotes or comment markers, one line, at most a few dozen words."""
    text = re.sub(r"[^A-Za-z0-9 .,:;()+_/@=#-]", "?", " ".join(str(text).split()))
    return text if len(text) <= _LONGEST else text[:_LONGEST - 3] + "..."


def recorded_exporter(func: Any) -> str:
    """The exporter recorded on a Relay or Relax function (``mod["main"]``), or ""."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or EXPORTER_ATTR not in attrs.keys():
        return ""
    return str(attrs[EXPORTER_ATTR])
