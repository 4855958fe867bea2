"""Zoo and evaluation models through both IRs: do Relax and Relay put every ONNX node on the
same device? (the goal: "where the same ONNX imports through both IRs, the plans put every op
on the same device").

apache-tvm 0.27 (Relax) and TVM 0.19 (Relay) cannot share an environment, so this runs in two
halves, from the repository root:

    # 1. Relay venv: build (or find) each model's ONNX file in the zoo cache, partition it with
    #    the Relay stack (greedy) on every built-in platform, write the per-node devices
    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python experiments/relax_models.py relay
    # 2. Relax venv: import the same files with TVM 0.27's ONNX importer, partition them on every
    #    built-in platform (greedy), compare per ONNX node name with half 1
    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv-relax/bin/python experiments/relax_models.py relax

Half 1 writes ``bench/results/relax_models_relay.json`` (per model: the ONNX file, its SHA-256,
and per platform ``{ONNX node name: [devices]}``); half 2 reads it and writes
``bench/results/relax_models.{json,md}``. ``--models a,b`` picks models (zoo names, ``tv:``,
``hf:``); the defaults are the small variants (``zoo.onnx_path(name, small=True)``: 64x64
images, short sequences), which keep what makes each model what it is at a fraction of the
cost. Models whose ONNX file cannot be built or imported are recorded with their error.

Agreement is counted per ONNX node name that both sides' graphs carry (a node's name sits on
every op it became; Relax loses BatchNormalization's names, and ops that one importer folds
away have no name on that side): a node agrees when its ops are on the same sorted set of
devices in both plans.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RELAY_JSON = RESULTS / "relax_models_relay.json"
OUT_JSON = RESULTS / "relax_models.json"
OUT_MD = RESULTS / "relax_models.md"

sys.path.insert(0, str(ROOT / "tests" / "relax"))
from relay_plans import PLATFORMS, devices_by_source  # noqa: E402  (one definition for both)

#: Small variants of zoo models (field reports), evaluation models, torchvision and Hugging Face
#: builds that have an ONNX form. SSD and YOLOv3 have none (mxnet.onnx's box_nms export does
#: not convert, docs/evidence/eval-models.md), so they are not here.
DEFAULT_MODELS = (
    "resnet50_v1", "mobilenetv2_1.0", "tiny_yolo_v2", "densenet201", "bert_encoder",
    "matmul_fp16_x100", "fcn_resnet101_ade", "simple_pose_resnet152_v1b",
    "center_net_resnet18_v1b_voc", "deeplab_resnet50_ade", "alpha_pose_resnet101_v1b_coco",
    "danet_resnet50_citys",
    "tv:resnet50", "tv:mobilenet_v2", "tv:efficientnet_b0", "tv:vit_b_16", "hf:distilbert",
)
#: How many disagreeing nodes each model and platform lists as examples.
EXAMPLES = 5


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def error_text(exc: BaseException) -> str:
    """One line: the exception's type and the last line of its message (TVM's are long)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def relay_half(models: list[str]) -> None:
    """Build each ONNX file (zoo cache) and record the Relay stack's greedy plans per node."""
    import partition_lab
    from partition_lab import zoo

    found = json.loads(RELAY_JSON.read_text()) if RELAY_JSON.exists() else {}
    for name in models:
        record: dict = {"small": True}
        start = time.perf_counter()
        try:
            path = zoo.onnx_path(name, small=True)
            record.update(onnx=str(path), sha256=sha256(path),
                          build_s=round(time.perf_counter() - start, 1))
            mod, params = partition_lab.load_model(str(path))
            record["plans"], record["ops"], record["seconds"] = {}, {}, {}
            for platform in PLATFORMS:
                began = time.perf_counter()
                result = partition_lab.partition(mod, platform, params=params, strategy="greedy")
                record["seconds"][platform] = round(time.perf_counter() - began, 2)
                record["ops"][platform] = len(result.graph)
                record["plans"][platform] = devices_by_source(result)
        except Exception as exc:  # noqa: BLE001  (a model that fails is a result, not a stop)
            record["error"] = error_text(exc)
            traceback.print_exc()
        found[name] = record
        print(f"relay {name}: {record.get('error') or 'done'} "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
        # Written after every model, so a long run that is stopped keeps what it did.
        RELAY_JSON.write_text(_compact_json(found))


def _compact_json(data: dict) -> str:
    """JSON with one line per model (its plans are long: one line keeps the file small)."""
    lines = [f" {json.dumps(name)}: {json.dumps(record, sort_keys=True)}"
             for name, record in sorted(data.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def agreement(relay: dict[str, list[str]], relax: dict[str, list[str]]) -> dict:
    """Per-node agreement of two ``{ONNX node name: [devices]}`` plans of one model."""
    shared = sorted(set(relay) & set(relax))
    differ = [n for n in shared if relay[n] != relax[n]]
    return {
        "named_relay": len(relay), "named_relax": len(relax), "shared": len(shared),
        "agree": len(shared) - len(differ), "disagree": len(differ),
        "only_relay": sorted(set(relay) - set(relax))[:EXAMPLES],
        "only_relax": sorted(set(relax) - set(relay))[:EXAMPLES],
        "examples": {n: {"relay": relay[n], "relax": relax[n]} for n in differ[:EXAMPLES]},
    }


def relax_half(models: list[str]) -> None:
    """Import each recorded ONNX file through Relax, partition it on every platform, compare."""
    import partition_lab
    from partition_lab.relax import op_map

    relay_side = json.loads(RELAY_JSON.read_text())
    rows: dict[str, dict] = {}
    for name in models:
        theirs = relay_side.get(name)
        row: dict = {"onnx": theirs and theirs.get("onnx"), "platforms": {}}
        rows[name] = row
        if theirs is None or "onnx" not in theirs:
            row["error"] = (theirs or {}).get("error", "not in the Relay half's output")
            continue
        path = Path(theirs["onnx"])
        if not path.exists() or sha256(path) != theirs["sha256"]:
            row["error"] = "the ONNX file is missing or differs from the Relay half's"
            continue
        if "error" in theirs:
            row["relay_error"] = theirs["error"]
        start = time.perf_counter()
        try:
            mod, _ = partition_lab.load_model(str(path))
        except Exception as exc:  # noqa: BLE001
            row["error"] = error_text(exc)
            traceback.print_exc()
            continue
        row["load_s"] = round(time.perf_counter() - start, 2)
        unmapped: set[str] = set()
        for platform in PLATFORMS:
            cell: dict = {}
            row["platforms"][platform] = cell
            began = time.perf_counter()
            try:
                result = partition_lab.partition(mod, platform, strategy="greedy")
            except Exception as exc:  # noqa: BLE001
                cell["error"] = error_text(exc)
                traceback.print_exc()
                continue
            cell["seconds"] = round(time.perf_counter() - began, 2)
            cell["ops"] = len(result.graph)
            cell["relay_ops"] = theirs.get("ops", {}).get(platform)
            cell["regions"] = len(result.plan.regions)
            cell["accelerator_regions"] = len(result.plan.accelerator_regions)
            unmapped |= {op for op in result.relax.relax_ops
                         if not op_map.is_mapped(op) and op not in op_map.HOST_ONLY}
            if platform in theirs.get("plans", {}):
                cell["agreement"] = agreement(theirs["plans"][platform], devices_by_source(result))
        row["unmapped_ops"] = sorted(unmapped)
        print(f"relax {name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    OUT_JSON.write_text(json.dumps({"commands": COMMANDS, "platforms": list(PLATFORMS),
                                    "models": rows}, indent=1, sort_keys=True) + "\n")
    OUT_MD.write_text(markdown(rows))


COMMANDS = [
    "TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python experiments/relax_models.py relay",
    "TOPHUB_LOCATION=NONE PYTHONPATH=src .venv-relax/bin/python experiments/relax_models.py relax",
]


def markdown(rows: dict[str, dict]) -> str:
    """The table: one line per model and platform, then the disagreements' examples."""
    lines = [
        "# Zoo models through Relax and Relay: the same devices per ONNX node?",
        "",
        "Written by `experiments/relax_models.py` (small variants, greedy strategy):",
        "",
        "```",
        *COMMANDS,
        "```",
        "",
        "Ops: the OpGraph's ops (Relax / Relay). Nodes: ONNX node names both plans carry; agree:",
        "the node's ops are on the same devices in both.",
        "",
        "| model | platform | ops relax / relay | regions (accel.) | partition s | nodes | agree "
        "| disagree | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    totals = {"shared": 0, "agree": 0, "disagree": 0}
    for name, row in rows.items():
        if "error" in row:
            lines.append(f"| `{name}` | all | | | | | | | {row['error']} |")
            continue
        for platform, cell in row["platforms"].items():
            if "error" in cell:
                lines.append(f"| `{name}` | {platform} | | | | | | | {cell['error']} |")
                continue
            agreed = cell.get("agreement") or {}
            for key in totals:
                totals[key] += agreed.get(key, 0)
            lines.append(
                f"| `{name}` | {platform} | {cell['ops']} / {cell['relay_ops']} | "
                f"{cell['regions']} ({cell['accelerator_regions']}) | {cell['seconds']} | "
                f"{agreed.get('shared', '')} | {agreed.get('agree', '')} | "
                f"{agreed.get('disagree', '')} | |")
            if agreed.get("examples"):
                shown = "; ".join(f"`{n}` relay {d['relay']} relax {d['relax']}"
                                  for n, d in agreed["examples"].items())
                notes.append(f"- `{name}` on {platform}: {shown}")
        if row.get("unmapped_ops"):
            notes.append(f"- `{name}`: Relax ops not in op_map.py: {row['unmapped_ops']}")
    lines += ["", f"Total over the table: {totals['shared']} node plans compared, "
              f"{totals['agree']} agree, {totals['disagree']} disagree.", ""]
    if notes:
        lines += ["## Disagreements (up to five per model and platform) and unmapped ops", "",
                  *notes, ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("half", choices=("relay", "relax"))
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated zoo names (default: %(default)s)")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (relay_half if args.half == "relay" else relax_half)(models)


if __name__ == "__main__":
    main()
