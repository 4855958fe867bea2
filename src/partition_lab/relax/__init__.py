"""The TVM Relax adapter (apache-tvm >= 0.20, which has no Relay), beside :mod:`partition_lab.relay`.

* :mod:`.frontends`: ONNX (node names kept on spans) and ``torch.export`` -> Relax modules;
* :mod:`.op_map`: the one table of Relax op -> Relay op names the targets use;
* :mod:`.graph`: a Relax module -> the core :class:`~partition_lab.core.graph.OpGraph`;
* :mod:`.prepare`: weights bound, layout and precision steps (Relax passes);
* :mod:`.outline`: plan -> partitioned Relax module (``Codegen`` functions of ``Composite``
  functions, the form ``relax.transform.RunCodegen`` consumes);
* :mod:`.adapter`: the :class:`~partition_lab.pipeline.adapters.IRAdapter` for Relax, which
  ``partition_lab.partition`` / ``analyze`` / ``compare`` use for a Relax module (the pipeline
  itself is the one :mod:`partition_lab.pipeline` runs for Relay too).

Importing it without apache-tvm >= 0.20 raises :class:`~partition_lab._optional.MissingDependencyError`.
"""

from __future__ import annotations

from ._tvm import require_relax

require_relax()

from .frontends import from_onnx, load_model  # noqa: E402
from .graph import RelaxGraph, graph_from_relax, relax_graph  # noqa: E402

__all__ = ["RelaxGraph", "from_onnx", "graph_from_relax", "load_model", "relax_graph"]
