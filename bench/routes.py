"""Routes explained: one ONNX file through Relay and through Relax, node by node.

The same ONNX model partitioned through the Relay stack (TVM 0.19, ``.venv``) and through Relax
(apache-tvm 0.27, ``.venv-relax``) gives two plans. Both importers put the ONNX node's name on
every op they build for it (the ops' ``source_name``), so the plans can be set side by side per
ONNX node: the devices its ops run on, and the reason code, rule and deciding device of each.
This script writes both sides' plan JSON and a report of every ONNX node whose device or reason
differs, each difference classified by cause.

The two TVMs cannot share an environment, so it runs in steps (``all`` runs them in turn, each
in its own venv through a subprocess), from the repository root::

    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python bench/routes.py all

    # or one step at a time:
    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python bench/routes.py export   # ONNX files
    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python bench/routes.py relay    # Relay plans
    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv-relax/bin/python bench/routes.py relax  # Relax
    .venv/bin/python bench/routes.py report --markdown docs/evidence/routes.md               # the diff

Everything generated goes under ``--out`` (default ``out/routes``, ignored by git): the ONNX
files (``onnx/``), one plan JSON per model, platform and side (``relay/``, ``relax/``), and
``report.json``; only the Markdown report (``docs/evidence/routes.md``) is kept in the repository.

Models: ``tests/relax/models.py``'s small ONNX models, the zoo's small torchvision builds
(``tv:resnet50``, ``tv:mobilenet_v2``) and torchvision's ResNet-18, MobileNetV3-Small and
RegNetY-400MF at batch 1, 64x64, exported here as the zoo exports (``module_to_onnx``: torch.onnx
from torch.export, opset 18, the exporter's optimizer off, node names by module path), and
RegNetY-400MF once more as ``torch.onnx.export(..., dynamo=True)`` writes it with its defaults
(optimizer on), as a user's ONNX file is. Strategy: greedy (TVM's own rule, the
same on both sides: a difference is the graph's or a rule's, never the cost model's); ``--strategy
cost`` compares the cost strategy's plans instead.

Differences are classified (see :func:`classify`) and each class is explained in
``docs/evidence/routes.md``; the ones the project accepts are listed with their class in
``tests/relax/route_differences.json``, which ``tests/relax/test_routes.py`` checks the test
models against, so a new difference fails a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS_RELAX = ROOT / "tests" / "relax"
sys.path.insert(0, str(TESTS_RELAX))

from route_diff import (  # noqa: E402  (one definition for the bench and the tests)
    CLASSES,
    PLATFORMS,
    compare_model,
    known_differences,
    node_records,
    unexplained,
    unseen,
)

DEFAULT_OUT = ROOT / "out" / "routes"
RELAY_PYTHON = ROOT / ".venv" / "bin" / "python"
RELAX_PYTHON = ROOT / ".venv-relax" / "bin" / "python"

#: Zoo models (small variants) whose ONNX file the zoo builds with torch.onnx, by file stem.
ZOO_MODELS = {"tv_resnet50": "tv:resnet50", "tv_mobilenet_v2": "tv:mobilenet_v2"}
#: torchvision models exported here (batch 1, 64x64), as ``load_model(module)`` would.
TORCHVISION_MODELS = {"tv_resnet18": "resnet18", "tv_mobilenet_v3_small": "mobilenet_v3_small",
                      "tv_regnet_y_400mf": "regnet_y_400mf"}
#: The same models written by ``torch.onnx.export(module, args, dynamo=True)`` with its defaults
#: (the exporter's optimizer on: BatchNorms folded, nodes named ``node_Conv_838``), as a user's
#: ONNX file is: their nodes are not the module route's, so each is compared with itself across
#: the IRs, and the summary says which exporter wrote it.
TORCH_ONNX_DEFAULTS = {"tv_regnet_y_400mf_torch_onnx": "regnet_y_400mf"}
TORCHVISION_SHAPE = (1, 3, 64, 64)


def command_line(step: str, out: Path, extra: Iterable[str] = ()) -> str:
    """The command that runs ``step`` (what the report prints at its top)."""
    python = ".venv-relax/bin/python" if step == "relax" else ".venv/bin/python"
    env = "" if step == "report" else "TOPHUB_LOCATION=NONE PYTHONPATH=src "
    where = "" if out == DEFAULT_OUT else f" --out {shlex.quote(_shown(out))}"
    return f"{env}{python} bench/routes.py {step}{where}{''.join(' ' + e for e in extra)}"


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------- export
def export(out: Path, models: list[str] | None) -> None:
    """Write every model's ONNX file to ``out/onnx`` (Relay venv: torch and torchvision)."""
    import models as test_models
    import onnx

    folder = out / "onnx"
    folder.mkdir(parents=True, exist_ok=True)
    for name in model_names():
        if models and name not in models:
            continue
        start = time.perf_counter()
        path = folder / f"{name}.onnx"
        if name in test_models.MODELS:
            onnx.save(test_models.MODELS[name](), str(path))
        elif name in ZOO_MODELS:
            from partition_lab import zoo

            shutil.copyfile(zoo.onnx_path(ZOO_MODELS[name], small=True), path)
        elif name in TORCHVISION_MODELS:
            onnx.save(_torchvision_onnx(TORCHVISION_MODELS[name]), str(path))
        else:
            onnx.save(_torchvision_onnx(TORCH_ONNX_DEFAULTS[name], defaults=True), str(path))
        print(f"export {name}: {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)


def model_names() -> list[str]:
    """Every model's name (its ONNX file's stem), in report order."""
    import models as test_models

    return [*test_models.MODELS, *ZOO_MODELS, *TORCHVISION_MODELS, *TORCH_ONNX_DEFAULTS]


def _torchvision_onnx(name: str, defaults: bool = False) -> Any:
    """torchvision's ``name`` (seeded, 10 classes) exported at 1x3x64x64 as ``load_model`` would
    export the module (module-path node names), or, with ``defaults``, by ``torch.onnx.export``
    with its defaults (the exporter's optimizer on)."""
    from partition_lab._torch_onnx import module_to_onnx, quiet_torch, require_torch

    torch = require_torch("exporting torchvision models")
    import torchvision

    torch.manual_seed(0)
    module = getattr(torchvision.models, name)(weights=None, num_classes=10).eval()
    example = torch.zeros(TORCHVISION_SHAPE)
    if not defaults:
        return module_to_onnx(module, example, ["x"])
    with quiet_torch():
        return torch.onnx.export(module, (example,), dynamo=True, opset_version=18,
                                 input_names=["x"]).model_proto


# ---------------------------------------------------------------------------------- plans
def plan_folder(out: Path, side: str, strategy: str) -> Path:
    """Where one side's plans of one strategy go: ``out/relay``, ``out/relax-cost``..."""
    return out / (side if strategy == "greedy" else f"{side}-{strategy}")


def plans(side: str, out: Path, models: list[str] | None, strategy: str) -> None:
    """Partition every ONNX file of ``out/onnx`` on every platform through this venv's IR and
    write each plan's JSON to ``out/<side>/<model>@<platform>.json`` (``strategy`` "default":
    the one ``partition`` takes when given none)."""
    import partition_lab

    folder = plan_folder(out, side, strategy)
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted((out / "onnx").glob("*.onnx")):
        model = path.stem
        if models and model not in models:
            continue
        start = time.perf_counter()
        try:
            mod, params = partition_lab.load_model(str(path))
        except Exception as exc:  # noqa: BLE001  (a model that fails is a result, not a stop)
            _write(folder / f"{model}@load.json", {"error": _error_text(exc)})
            traceback.print_exc()
            continue
        for platform in PLATFORMS:
            began = time.perf_counter()
            try:
                result = partition_lab.partition(
                    mod, platform, params=params,
                    strategy=None if strategy == "default" else strategy)
                data = result.to_dict()
            except Exception as exc:  # noqa: BLE001
                data = {"error": _error_text(exc)}
                traceback.print_exc()
            data["route"] = {"side": side, "model": model, "platform": platform,
                             "seconds": round(time.perf_counter() - began, 2)}
            _write(folder / f"{model}@{platform}.json", data)
        print(f"{side} {model}: {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)


def _write(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def _error_text(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


# ---------------------------------------------------------------------------------- report
SIDES = ("relay", "relax")


def report(out: Path, markdown: Path | None, commands: list[str],
           strategy: str = "greedy") -> dict[str, Any]:
    """Compare the two sides' plans per ONNX node; print the table, write ``report.json`` and
    (with ``markdown``) the Markdown report."""
    import onnx

    known = known_differences()
    rows: list[dict[str, Any]] = []
    for model in model_names():
        path = out / "onnx" / f"{model}.onnx"
        if not path.exists():
            continue
        nodes = [(n.name, n.op_type)
                 for n in onnx.load(str(path), load_external_data=False).graph.node]
        found = {(side, platform): _plan(out, side, strategy, model, platform)
                 for side in SIDES for platform in PLATFORMS}
        records = {key: node_records(data) for key, data in found.items()
                   if data is not None and "error" not in data}
        named = {name for plan in records.values() for name in plan}
        for platform in PLATFORMS:
            row: dict[str, Any] = {"model": model, "platform": platform}
            sides = [found[side, platform] for side in SIDES]
            errors = [f"{side}: {data['error']}" for side, data in zip(SIDES, sides, strict=True)
                      if data is not None and "error" in data]
            if None in sides or errors:
                row["error"] = "; ".join(errors) or "plan missing (run the relay/relax steps)"
                rows.append(row)
                continue
            row.update(compare_model(model, platform, nodes, records["relay", platform],
                                     records["relax", platform], strategy, named))
            row["ops"] = {side: len(data["nodes"]) for side, data in zip(SIDES, sides,
                                                                         strict=True)}
            row["accelerator_ops"] = {side: sum(1 for n in data["nodes"] if n["device"] != "cpu")
                                      for side, data in zip(SIDES, sides, strict=True)}
            row["unnamed_ops"] = {side: sum(1 for n in data["nodes"] if not n["source_name"])
                                  for side, data in zip(SIDES, sides, strict=True)}
            row["op_counts"] = _op_count_differences(*sides)
            rows.append(row)
    found = [d for row in rows for d in row.get("differences", [])]
    summary = {"commands": commands, "strategy": strategy, "rows": rows,
               "unexplained": unexplained(found, known),
               "unseen": unseen(known, found, sorted({row["model"] for row in rows}))}
    (out / f"report{'' if strategy == 'greedy' else '-' + strategy}.json").write_text(
        json.dumps(summary, indent=1) + "\n")
    text = markdown_report(summary)
    print(text)
    if markdown is not None:
        _replace_generated(markdown, text, strategy)
    return summary


def _plan(out: Path, side: str, strategy: str, model: str,
          platform: str) -> dict[str, Any] | None:
    folder = plan_folder(out, side, strategy)
    for name in (f"{model}@{platform}.json", f"{model}@load.json"):
        if (folder / name).exists():
            return json.loads((folder / name).read_text())
    return None


def _op_count_differences(relay: Mapping[str, Any], relax: Mapping[str, Any]
                          ) -> dict[str, list[int]]:
    """``{op: [Relay count, Relax count]}`` for the ops the two plans hold in other numbers."""
    counts = [Counter(n["op"] for n in data["nodes"]) for data in (relay, relax)]
    return {op: [counts[0][op], counts[1][op]] for op in sorted(set(counts[0]) | set(counts[1]))
            if counts[0][op] != counts[1][op]}


BEGIN = "<!-- routes.py report{}: generated, do not edit by hand -->"
END = "<!-- end of the generated report{} -->"


def _replace_generated(path: Path, text: str, strategy: str) -> None:
    """Write ``text`` between the markers of ``path`` for this strategy (the prose around it is
    kept); a file without them gets the report appended."""
    tag = "" if strategy == "greedy" else f" ({strategy})"
    begin, end = BEGIN.format(tag), END.format(tag)
    block = f"{begin}\n\n{text}\n{end}"
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        head, _, rest = old.partition(begin)
        _, _, tail = rest.partition(end)
        path.write_text(head + block + tail)
    else:
        path.write_text(old + ("\n" if old else "") + block + "\n")


def markdown_report(summary: Mapping[str, Any]) -> str:
    """The table (per model and platform: ONNX nodes, agreeing, differing by class) and every
    difference, grouped by class and detail."""
    rows = summary["rows"]
    lines = ["```", *summary["commands"], "```", ""]
    short = {"missing": "miss.", "importer": "imp.", "preparation": "prep.", "pattern": "pat.",
             "rule": "rule", "region": "reg.", "cost": "cost"}
    header = " | ".join(short[c] for c in CLASSES)
    lines += [f"| model | platform | ops | on accel. | unnamed | nodes | agree | other ops "
              f"| {header} |", "|---|---|---|---|---|---|---|---|" + "---|" * len(CLASSES)]
    totals: Counter[str] = Counter()
    for row in rows:
        if "error" in row:
            lines.append(f"| `{row['model']}` | {row['platform']} | {row['error'][:120]} |"
                         + " |" * (6 + len(CLASSES)))
            continue
        counts = Counter(d["class"] for d in row["differences"])
        totals.update(nodes=row["nodes"], agree=row["agree"], other_ops=row["other_ops"],
                      same_devices=row["same_devices"])
        totals.update(counts)
        ops, accel, unnamed = row["ops"], row["accelerator_ops"], row["unnamed_ops"]
        lines.append(
            f"| `{row['model']}` | {row['platform']} | {ops['relay']} / {ops['relax']} | "
            f"{accel['relay']} / {accel['relax']} | {unnamed['relay']} / {unnamed['relax']} | "
            f"{row['nodes']} | {row['agree']} | {row['other_ops'] or ''} | "
            + " | ".join(str(counts.get(c, "")) for c in CLASSES) + " |")
    share = f" ({100 * totals['agree'] / totals['nodes']:.1f} %)" if totals["nodes"] else ""
    lines += ["", f"In all: {totals['nodes']} ONNX node plans, {totals['agree']} agree{share} "
              f"({totals['other_ops']} of them with other ops or types), "
              f"{totals['same_devices']} on the same devices; differences: "
              + (", ".join(f"{totals[c]} {c}" for c in CLASSES if totals[c]) or "none") + ".",
              "", "Columns: ops, on an accelerator and without a source name (Relay / Relax); "
              "nodes: the ONNX nodes some plan of the model names; agree: same devices and "
              "reasons (code, deciding device, rule) for the node's ops; other ops: agreeing "
              "nodes whose ops or types differ; then the differing nodes by class ("
              + ", ".join(f"{short[c]} {c}" for c in CLASSES) + ").", ""]
    by_class: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        for d in row.get("differences", []):
            by_class.setdefault(d["class"], []).append(d)
    for cls in CLASSES:
        found = by_class.get(cls)
        if not found:
            continue
        lines += [f"#### {cls} ({len(found)})", ""]
        for text, count, where in _grouped(found):
            lines.append(f"- {text} ({count}x: {where})")
        lines.append("")
    lines += ["#### Op counts that differ (tensorcore)", ""]
    for row in rows:
        if row["platform"] == "tensorcore" and row.get("op_counts"):
            shown = ", ".join(f"{op} {a}/{b}" for op, (a, b) in
                              sorted(row["op_counts"].items(), key=lambda kv: -abs(
                                  kv[1][0] - kv[1][1]))[:6])
            lines.append(f"- `{row['model']}` (Relay/Relax): {shown}")
    missing = summary["unexplained"]
    lines += ["", f"Differences that tests/relax/route_differences.json does not list: "
              f"{len(missing)}."]
    for d in missing[:20]:
        lines.append(f"- `{d['model']}` {d['platform']} `{d['node']}` ({d['class']}): "
                     f"{_clipped(d['detail'])}")
    gone = summary["unseen"]
    lines.append(f"Listed differences of these models no longer seen: "
                 f"{', '.join(f'`{g}`' for g in gone) or 'none'}.")
    return "\n".join(lines) + "\n"


def _clipped(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _grouped(found: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    """Differences of one ONNX op type with the same detail shape, once each, with where."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in found:
        groups.setdefault((d["onnx_op"], _shape_free(d["detail"])), []).append(d)
    shown = []
    for (onnx_op, _), ds in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        places = sorted({f"`{d['model']}` {d['platform']}" for d in ds})
        where = ", ".join(places[:4]) + (f" and {len(places) - 4} more" if len(places) > 4 else "")
        first = ds[0]
        shown.append((f"{onnx_op} `{first['node']}`: {_clipped(first['detail'])}", len(ds),
                      where))
    return shown


def _shape_free(detail: str) -> str:
    """A difference's detail without shapes and device names, to group like ones."""
    import re

    text = re.sub(r"\[[0-9,]*\]", "", detail)
    return re.sub(r"(neuron@2020|neuron|tensorcore|cuda)", "dev", text)


# ---------------------------------------------------------------------------------- driver
def commands(out: Path, models: list[str] | None, strategy: str,
             markdown: Path | None) -> list[str]:
    """The commands of the four steps, as the report prints them."""
    chosen = [f"--models {','.join(models)}"] if models else []
    picked = [f"--strategy {strategy}"] if strategy != "greedy" else []
    written = [f"--markdown {_shown(markdown)}"] if markdown is not None else []
    return [command_line("export", out, chosen),
            command_line("relay", out, chosen + picked),
            command_line("relax", out, chosen + picked),
            command_line("report", out, picked + written)]


def run_all(out: Path, models: list[str] | None, strategy: str, markdown: Path | None,
            relay_python: Path, relax_python: Path) -> None:
    """Every step, each in its venv through a subprocess, then the report."""
    env = {**os.environ, "TOPHUB_LOCATION": "NONE", "PYTHONPATH": str(ROOT / "src")}
    for step, python in (("export", relay_python), ("relay", relay_python),
                         ("relax", relax_python)):
        args = [str(python), str(Path(__file__).resolve()), step, "--out", str(out)]
        if models:
            args += ["--models", ",".join(models)]
        if step != "export":
            args += ["--strategy", strategy]
        print("+", " ".join(args), file=sys.stderr, flush=True)
        subprocess.run(args, check=True, env=env, cwd=ROOT)
    report(out, markdown, commands(out, models, strategy, markdown), strategy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("export", "relay", "relax", "report", "all"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="folder of the generated files (default: out/routes)")
    parser.add_argument("--models", default="",
                        help="comma-separated model names, as the ONNX files are named "
                             "(convnet, tv_resnet18; default: all)")
    parser.add_argument("--strategy", default="greedy",
                        help="strategy of both sides' plans (default: greedy; 'default': the "
                             "one partition() takes when given none)")
    parser.add_argument("--markdown", type=Path,
                        help="report and all: write the report into this Markdown file, "
                             "between its markers")
    parser.add_argument("--relay-python", type=Path, default=RELAY_PYTHON,
                        help="all: the Relay venv's python (default: .venv/bin/python)")
    parser.add_argument("--relax-python", type=Path, default=RELAX_PYTHON,
                        help="all: the Relax venv's python (default: .venv-relax/bin/python)")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m] or None
    out = args.out.resolve()
    if args.step == "export":
        export(out, models)
    elif args.step in ("relay", "relax"):
        plans(args.step, out, models, args.strategy)
    elif args.step == "report":
        report(out, args.markdown, commands(out, models, args.strategy, args.markdown),
               args.strategy)
    else:
        run_all(out, models, args.strategy, args.markdown, args.relay_python, args.relax_python)


if __name__ == "__main__":
    main()
