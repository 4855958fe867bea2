"""Write the Relay-side plans of the Relax tests' models to ``relay_plans.json``.

Run with the Relay stack (TVM 0.19, the main venv), from the repository root:

    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python tests/relax/relay_plans.py

apache-tvm 0.27 and TVM 0.19 cannot share an environment, so the Relax tests compare against
this file: for each model and built-in platform, the devices each ONNX node's ops run on under
the greedy strategy (``{node name: [devices]}``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import onnx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402

PLATFORMS = ("tensorcore", "neuron", "neuron@2020", "cpu")


def devices_by_source(result) -> dict[str, list[str]]:
    """``{ONNX node name: sorted devices of its ops}`` of a partition result."""
    found: dict[str, set[str]] = {}
    for node in result.graph:
        if node.source_name:
            found.setdefault(node.source_name, set()).add(result.plan.decisions[node.id].device)
    return {name: sorted(devices) for name, devices in sorted(found.items())}


def main() -> None:
    import partition_lab

    plans: dict[str, dict[str, dict[str, list[str]]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, build in models.MODELS.items():
            path = Path(folder) / f"{name}.onnx"
            onnx.save(build(), str(path))
            mod, params = partition_lab.load_model(str(path))
            plans[name] = {platform: devices_by_source(
                partition_lab.partition(mod, platform, params=params, strategy="greedy"))
                for platform in PLATFORMS}
            print(name, "done", file=sys.stderr)
    (HERE / "relay_plans.json").write_text(json.dumps(plans, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
