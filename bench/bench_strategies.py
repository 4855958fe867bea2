"""Partition time of every strategy on synthetic layered DAGs (and, with --zoo, the zoo models).

    .venv/bin/python bench/bench_strategies.py            # 1k, 10k, 100k ops (optimal to 10k)
    .venv/bin/python bench/bench_strategies.py --quick    # 1k and 10k only
    .venv/bin/python bench/bench_strategies.py --zoo      # also every zoo model (builds them: TVM)
    .venv/bin/python bench/bench_strategies.py --devices 3  # the tensorcore platform's 3 devices

Graphs: ``synthetic.layered_dag(n, seed=1, channels=256)`` (conv/BN/ReLU/add on 256x28x28
tensors, 8 ops per layer), 5% of the ops unsupported at random (seed 2), priced by the default
neuron cost model (inferentia1 + xeon_gold_6130): big enough convs that the accelerator pays.
With ``--devices 3`` the platform is ``tensorcore`` (Tensor Cores, CUDA cores, host): 20% of the
ops rejected by the Tensor Core device at random (MAC ops anchor its regions), 2% by the CUDA
cores, priced by the tensorcore roofline (t4 + xeon_gold_6130, host in fp32). Each cell is the wall time of ``strategy.run`` (best of ``--repeat``), with its
CPU time (``time.process_time``) beside it: on a machine shared with other jobs the wall time
can be twice the CPU time. Building the graph is not timed. The growth ratio is
time(100k) / time(10k): 10 means linear; the goal is <= 12.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from partition_lab import synthetic
from partition_lab.core.support import Support, host_verdict
from partition_lab.cost_models import evaluate, get_cost_model
from partition_lab.strategies import NotApplicableError, available_strategies, get_strategy
from partition_lab.targets import get_platform

OPTIMAL_MAX_OPS = 10_000
UNSUPPORTED = 0.05
CHANNELS = 256


def time_run(name: str, graph, support: Support, model, repeat: int) -> dict:
    """Best wall and CPU seconds of one strategy, and its predicted total (None: n/a)."""
    best_wall = best_cpu = float("inf")
    total = None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            plan = get_strategy(name).run(graph, support, cost_model=model)
        except NotApplicableError:
            plan = None
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        total = None if plan is None else evaluate(plan, model).total
    return {"strategy": name, "wall_s": best_wall, "cpu_s": best_cpu,
            "predicted_ms": None if total is None else total * 1e3}


def three_device_support(graph) -> Support:
    """The tensorcore platform with random verdicts (see the module docstring)."""
    platform = get_platform("tensorcore")
    fast = synthetic.random_verdicts(graph, seed=2, unsupported=0.2, anchored=True)
    general = synthetic.random_verdicts(graph, seed=3, unsupported=0.02)
    return Support(platform, {"tensorcore": fast, "cuda": general,
                              "cpu": [host_verdict() for _ in graph]})


def synthetic_rows(sizes: list[int], repeat: int, devices: int = 2) -> list[dict]:
    model = get_cost_model(get_platform("neuron@2020" if devices == 2 else "tensorcore"))
    rows = []
    for n in sizes:
        start = time.perf_counter()
        graph = synthetic.layered_dag(n, seed=1, channels=CHANNELS)
        if devices == 2:
            support = synthetic.one_accelerator(
                synthetic.random_verdicts(graph, seed=2, unsupported=UNSUPPORTED), "neuron@2020")
        else:
            support = three_device_support(graph)
        print(f"# layered_dag({n}) built in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        for name in available_strategies():
            if name == "optimal" and n > OPTIMAL_MAX_OPS:
                continue
            row = time_run(name, graph, support, model, repeat)
            rows.append({"graph": f"layered_{n}", "ops": n, **row})
            print(f"#   {name:10s} {row['wall_s']:8.3f} s wall {row['cpu_s']:8.3f} s cpu",
                  file=sys.stderr)
    return rows


def zoo_rows(repeat: int) -> list[dict]:
    from partition_lab import zoo
    from partition_lab.api import analyze

    rows = []
    for model_name in zoo.names():
        mod, params = zoo.load(model_name)
        for target in ("neuron@2020", "tensorcore"):
            analysis = analyze(mod, target, params=params)
            graph = analysis.relay.graph
            for name in available_strategies():
                row = time_run(name, graph, analysis.support, analysis.cost_model, repeat)
                rows.append({"graph": model_name, "target": target, "ops": len(graph), **row})
            print(f"# {model_name} on {target}: done", file=sys.stderr)
    return rows


def print_table(rows: list[dict]) -> None:
    names = available_strategies()
    cell = {(r["graph"], r["strategy"]): r for r in rows if "target" not in r}
    graphs = list(dict.fromkeys(r["graph"] for r in rows if "target" not in r))
    print("partition time per strategy: wall s (cpu s)")
    print(f"{'graph':16s} " + " ".join(f"{n:>17s}" for n in names))
    for g in graphs:
        print(f"{g:16s} " + " ".join(
            f"{cell[g, n]['wall_s']:8.3f} ({cell[g, n]['cpu_s']:6.3f})" if (g, n) in cell
            else f"{'-':>17s}" for n in names))
    small, large = "layered_10000", "layered_100000"
    if any((large, n) in cell for n in names):
        ratios = []
        for n in names:
            if (large, n) in cell and (small, n) in cell:
                wall = cell[large, n]["wall_s"] / cell[small, n]["wall_s"]
                cpu = cell[large, n]["cpu_s"] / max(cell[small, n]["cpu_s"], 1e-9)
                ratios.append(f"{wall:8.1f} ({cpu:6.1f})")
            else:
                ratios.append(f"{'-':>17s}")
        print(f"{'growth 10k->100k':16s} " + " ".join(ratios))
    print("predicted time (ms) per strategy")
    for g in graphs:
        print(f"{g:16s} " + " ".join(
            f"{cell[g, n]['predicted_ms']:17.1f}" if (g, n) in cell and cell[g, n][
                "predicted_ms"] is not None else f"{'-':>17s}" for n in names))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k ops only")
    parser.add_argument("--zoo", action="store_true", help="also time every zoo model (TVM)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (best kept)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--devices", type=int, choices=(2, 3), default=2,
                        help="2: neuron@2020 + host; 3: the tensorcore platform")
    args = parser.parse_args(argv)
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    rows = synthetic_rows(sizes, args.repeat, args.devices)
    print_table(rows)
    if args.zoo:
        rows += zoo_rows(args.repeat)
        print("\nzoo models: partition time, wall s (cpu s)")
        for r in rows:
            if "target" in r:
                print(f"  {r['graph']:28s} {r['target']:12s} {r['ops']:5d} ops "
                      f"{r['strategy']:10s} {r['wall_s']:7.3f} ({r['cpu_s']:6.3f})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
