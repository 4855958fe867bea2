"""Write the Relay-side plans of the Relax tests' models to ``relay_plans.json``.

Run with the Relay stack (TVM 0.19, the main venv), from the repository root:

    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python tests/relax/relay_plans.py

apache-tvm 0.27 and TVM 0.19 cannot share an environment, so the Relax tests compare against
this file: for each model and built-in platform, the ops each ONNX node became under the greedy
strategy, each as :func:`route_diff.op_record` keeps it (op, output type, device, reason code,
deciding device and rule, every device's verdict): ``{model: {platform: {node: [ops]}}}``.
``tests/relax/test_routes.py`` compares the Relax plans with them per node, and
``tests/relay/test_relay_routes.py`` (Relay venv) that this file is what the Relay stack plans now.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import onnx

HERE = Path(__file__).resolve().parent
PLANS_FILE = HERE / "relay_plans.json"
sys.path.insert(0, str(HERE))

import models  # noqa: E402
from route_diff import PLATFORMS, node_records  # noqa: E402,F401  (PLATFORMS: one definition)


def devices_by_source(result) -> dict[str, list[str]]:
    """``{ONNX node name: sorted devices of its ops}`` of a partition result."""
    found: dict[str, set[str]] = {}
    for node in result.graph:
        if node.source_name:
            found.setdefault(node.source_name, set()).add(result.plan.decisions[node.id].device)
    return {name: sorted(devices) for name, devices in sorted(found.items())}


def relay_plans() -> dict[str, dict[str, dict[str, list[dict[str, Any]]]]]:
    """Every test model's greedy plan on every platform through this venv's Relay stack, as
    ``{model: {platform: node_records(plan)}}``."""
    import partition_lab

    plans: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, build in models.MODELS.items():
            path = Path(folder) / f"{name}.onnx"
            onnx.save(build(), str(path))
            mod, params = partition_lab.load_model(str(path))
            plans[name] = {platform: node_records(
                partition_lab.partition(mod, platform, params=params, strategy="greedy")
                .to_dict()) for platform in PLATFORMS}
    return plans


def dumps(plans: dict[str, Any]) -> str:
    """The file's text: one line per model and platform (small, and a diff shows which)."""
    lines = []
    for name, per_platform in sorted(plans.items()):
        inner = [f"  {json.dumps(platform)}: {json.dumps(nodes, sort_keys=True)}"
                 for platform, nodes in sorted(per_platform.items())]
        lines.append(f" {json.dumps(name)}: {{\n" + ",\n".join(inner) + "\n }")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> None:
    PLANS_FILE.write_text(dumps(relay_plans()))


if __name__ == "__main__":
    main()
