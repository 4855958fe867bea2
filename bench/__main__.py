"""The benchmark suite: one entry point for the named benchmarks.

    python -m bench list                 # the benchmarks, CPU or GPU, and what each measures
    python -m bench run NAME [--full]    # one benchmark (quick size unless --full)
    python -m bench cpu [--full]         # every CPU benchmark in turn (what `make bench` runs)

Run from the repository root with the Relay venv (``TOPHUB_LOCATION=NONE`` is set here). Each
step is a script of this folder run in its own process; it prints its table, and the suite
prints the command that reproduces it. A GPU benchmark spans two machines (TVM here, a CUDA
GPU there): ``run`` prints its steps in order instead of running them (``bench/gpu/README.md``).
Raw output goes to ``bench/results/`` (not tracked); the summaries quoted in the docs are in
``docs/evidence/``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Step:
    """One script run: its path from the repository root and its arguments at each size
    (None: the step does not run at that size)."""

    script: str
    quick: tuple[str, ...] | None = None
    full: tuple[str, ...] | None = None
    where: str = "here"  #: GPU steps: "here" (TVM, no GPU) or "GPU" (torch + CUDA, no TVM)

    def arguments(self, full: bool) -> tuple[str, ...] | None:
        return self.full if full else self.quick

    def command(self, full: bool) -> list[str]:
        runner = "bash" if self.script.endswith(".sh") else "python"
        return [runner, self.script, *(self.arguments(full) or ())]


@dataclass(frozen=True)
class Benchmark:
    """A named benchmark: steps run in order, and the page its figures are quoted on."""

    name: str
    summary: str
    steps: tuple[Step, ...]
    evidence: str
    gpu: bool = False


BUNDLES = ".gpu_bundle"
BENCHMARKS = (
    Benchmark(
        "partition", "whole partition (annotate, merge, outline) vs TVM's three-pass chain",
        (Step("bench/bench_partition.py",
              ("--models", "resnet50_v1,mobilenetv2_1.0", "--repeat", "1",
               "--out", "bench/results/partition_vs_tvm_quick.json"),
              ("--repeat", "3")),
         Step("bench/bench_partition.py", None,
              ("--repeat", "3", "--predicate", "random-70%"))),
        "docs/evidence/performance.md"),
    Benchmark(
        "strategies", "every strategy's partition time on layered DAGs, 1k to 100k ops",
        (Step("bench/bench_strategies.py", (),  # 100k ops is the point, even when quick
              ("--repeat", "3", "--json", "bench/results/strategies_2devices.json")),
         Step("bench/bench_strategies.py", None,
              ("--repeat", "3", "--devices", "3",
               "--json", "bench/results/strategies_3devices.json"))),
        "docs/evidence/performance.md"),
    Benchmark(
        "load", "model load times (both frontends, cold and warm) and the converted cache",
        (Step("bench/load_times.py", ("resnet50_v1", "mobilenetv2_1.0"), ()),
         Step("bench/load_times.py", None,
              ("--viz-twice", "tv:simple_pose_resnet152", "--target", "tensorcore"))),
        "docs/evidence/performance.md"),
    Benchmark(
        "viz", "drawing: the render budget on alternating support, and the HTML view",
        (Step("bench/bench_render_budget.py",
              ("--ops", "1000", "--dot-sizes", "80,160", "--dot-timeout", "20"),
              ("--out", "bench/results/render_budget.json")),
         Step("bench/html_view.py", ("--skip-bert",), ("--browser",))),
        "docs/guide/reliability.md, docs/guide/html-view.md"),
    Benchmark(
        "families", "model families, tuned and held-out, on every platform: islands, false ones",
        (Step("bench/model_families.py",
              ("--group", "tuned", "--out", "bench/results/families_quick.json"),
              ("--label", "after")),),
        "docs/evidence/families.md"),
    Benchmark(
        "decoders", "Llama, Phi, Gemma: regions, host islands, predicted time, patterns vs op by op",
        (Step("bench/decoder_patterns.py",
              ("--sizes", "small", "--out", "bench/results/decoder_patterns_quick.json"),
              ("--sizes", "small,medium")),),
        "docs/guide/platforms-and-patterns.md"),
    Benchmark(
        "gpu-decoders", "decoders on the GPU: patterns vs op-by-op plans timed in turns",
        (Step("bench/decoder_patterns.py", None,
              ("--sizes", "small,medium", "--platforms", "neuron,tensorcore",
               "--bundles", f"{BUNDLES}/decoders",
               "--out", "bench/results/decoder_patterns.json")),
         Step("bench/gpu/evidence.py", None,
              ("--bundles", f"{BUNDLES}/decoders", "--out", f"{BUNDLES}/decoders_run1.json",
               "--interleave", "greedy", "cost", "unpartitioned_gpu", "--budget", "900"),
              where="GPU"),
         Step("bench/decoder_patterns.py", None,
              ("--measured", f"{BUNDLES}/decoders_run1.json"))),
        "docs/guide/platforms-and-patterns.md", gpu=True),
    Benchmark(
        "gpu", "plan quality on the GPU: profile, plan, time every plan in turns, report",
        (Step("bench/gpu/export_bundles.py", None,
              ("--out", f"{BUNDLES}/base_tensorcore", "--platform", "tensorcore",
               "--strategies", "greedy")),
         Step("bench/gpu/profiled_pipeline.sh", None,
              ("profile", f"{BUNDLES}/base_tensorcore"), where="GPU"),
         Step("bench/gpu/profiled_pipeline.sh", None, ("run", "run1"), where="GPU"),
         Step("bench/gpu/profiled_report.py", None,
              ("--bundles", f"{BUNDLES}/work/planned", "--runs", f"{BUNDLES}/work/run1.json",
               "--labels", "run1", "--spread", "--out", "bench/results/gpu_profiled"))),
        "docs/evidence/gpu.md", gpu=True),
)
BY_NAME = {b.name: b for b in BENCHMARKS}


def reproduce(bench: Benchmark, full: bool) -> str:
    """The suite command that runs ``bench`` again at this size."""
    return f"python -m bench run {bench.name}" + (" --full" if full else "")


def console():  # noqa: ANN201
    """A rich console as wide as the terminal, or 120 columns into a file or pipe."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=120)


def list_benchmarks() -> int:
    from rich.table import Table

    table = Table(title="benchmarks (python -m bench run NAME [--full])")
    for column in ("name", "kind", "measures", "steps", "figures in"):
        table.add_column(column)
    for bench in BENCHMARKS:
        table.add_row(bench.name, "GPU" if bench.gpu else "CPU", bench.summary,
                      ", ".join(dict.fromkeys(Path(s.script).name for s in bench.steps)),
                      bench.evidence)
    console().print(table)
    return 0


def print_gpu_steps(bench: Benchmark) -> int:
    """A GPU benchmark's steps, in order, with the machine each runs on."""
    print(f"{bench.name}: {bench.summary}\nGPU-only, over two machines; run these in order "
          f"from the repository root (bench/gpu/README.md has the other GPU sets):")
    for number, step in enumerate(bench.steps, 1):
        print(f"  {number}. [{step.where:4s}] {shlex.join(step.command(full=True))}")
    print(f"figures: {bench.evidence}")
    return 0


def run_benchmark(bench: Benchmark, full: bool) -> tuple[int, float]:
    """Run a CPU benchmark's steps (those with arguments at this size): exit status, seconds."""
    env = {**os.environ, "TOPHUB_LOCATION": os.environ.get("TOPHUB_LOCATION", "NONE"),
           "PYTHONUNBUFFERED": "1"}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    start = time.perf_counter()
    for step in bench.steps:
        if step.arguments(full) is None:
            continue  # a step of the other size only
        command = step.command(full)
        print(f"\n=== {bench.name}: {shlex.join(command)}", flush=True)
        runner = sys.executable if command[0] == "python" else command[0]  # this venv's
        status = subprocess.run([runner, *command[1:]], cwd=ROOT, env=env, check=False).returncode
        if status:
            return status, time.perf_counter() - start
    seconds = time.perf_counter() - start
    print(f"--- {bench.name}: {seconds:.0f} s; reproduce: {reproduce(bench, full)}", flush=True)
    return 0, seconds


def run_all_cpu(full: bool) -> int:
    from rich.table import Table

    done = [(bench, *run_benchmark(bench, full)) for bench in BENCHMARKS if not bench.gpu]
    table = Table(title=f"CPU benchmarks ({'full' if full else 'quick'} size)")
    for column in ("benchmark", "status", "wall s", "reproduce"):
        table.add_column(column)
    for bench, status, seconds in done:
        table.add_row(bench.name, "ok" if status == 0 else f"exit {status}", f"{seconds:.0f}",
                      reproduce(bench, full))
    print()
    console().print(table)
    return max(status for _, status, _ in done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the benchmarks")
    run = commands.add_parser("run", help="one benchmark")
    run.add_argument("name", choices=sorted(BY_NAME))
    run.add_argument("--full", action="store_true", help="full sizes (default: quick)")
    cpu = commands.add_parser("cpu", help="every CPU benchmark")
    cpu.add_argument("--full", action="store_true", help="full sizes (default: quick)")
    args = parser.parse_args(argv)
    if args.command == "list":
        return list_benchmarks()
    if args.command == "cpu":
        return run_all_cpu(args.full)
    bench = BY_NAME[args.name]
    if bench.gpu:
        return print_gpu_steps(bench)
    return run_benchmark(bench, args.full)[0]


if __name__ == "__main__":
    sys.exit(main())
