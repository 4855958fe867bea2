"""Bench: drawing graphs whose support alternates, and the render budget that guards it.

On a graph whose support alternates, every other op is an accelerator region (a graphviz
cluster) and ``dot``'s cluster layout grows far faster than linearly (160 ops: 100 s, 400 ops:
over 10 minutes, 5,000 ops: killed by the OOM killer at 23.7 GB). So a drawing with more than
``MAX_CLUSTERS`` accelerator regions is refused before ``dot`` starts (its DOT text can still be
written), and every graphviz call has a timeout.

Measured here, each in a fresh process (wall time and peak memory of the process and its
children):

* ``dot`` alone on drawings of random DAGs with alternating support, by cluster count, to show
  where the budget sits (each capped at ``--dot-timeout`` seconds);
* ``partition-lab viz`` end to end on a 5,000-op ONNX chain whose support alternates
  (Relu on the accelerator, Sign not): to ``.svg`` (refused) and to ``.dot`` (written).

Run: ``python -m bench run viz [--full]``, or ``PYTHONPATH=src python bench/bench_render_budget.py
[--ops N] [--dot-sizes 160,240] [--out docs/evidence/results/render_budget.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOT_SIZES = (160, 240, 320, 400)
"""Random-DAG sizes for the ``dot``-alone rows (about 0.27 clusters per op)."""


def dot_alone(n_ops: int, timeout: float) -> dict:
    """Lay out the collapsed drawing of an ``n_ops`` random DAG with ``dot``, capped."""
    from partition_lab import Verdict, synthetic
    from partition_lab.render.dot import draw
    from partition_lab.synthetic import random_dag

    graph = random_dag(n_ops, seed=0)
    verdicts = [Verdict(i % 2 == 0, "alternating", "bench") for i in range(n_ops)]
    plan = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "greedy",
                             [i for i in range(n_ops) if i % 2 == 0])
    source = draw(plan, collapse=True).source.encode()
    start = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, timeout=timeout,
                       check=True)
        seconds: float | None = time.perf_counter() - start
    except subprocess.TimeoutExpired:
        seconds = None
    return {"ops": n_ops, "clusters": len(plan.accelerator_regions),
            "dot_s": None if seconds is None else round(seconds, 2),
            "finished": seconds is not None, "timeout_s": timeout}


def alternating_onnx(path: Path, n_ops: int) -> Path:
    """conv + (Relu, Sign) pairs up to ``n_ops`` ops on a 1x8x4x4 tensor."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((8, 8, 1, 1), "float32"), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv0")]
    for i in range(1, n_ops):
        op = "Relu" if i % 2 else "Sign"
        nodes.append(helper.make_node(op, [f"t{i - 1}"], [f"t{i}"], name=f"{op.lower()}{i}"))
    graph = helper.make_graph(
        nodes, "alternating", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
        [helper.make_tensor_value_info(f"t{n_ops - 1}", TensorProto.FLOAT, [1, 8, 4, 4])],
        initializer=[weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def cli_viz(model: Path, target: Path, output: Path) -> dict:
    """``partition-lab viz`` in a fresh process: exit status, wall time, peak memory."""
    with tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "partition_lab.cli", "viz", str(model),
                                 "-t", str(target), "-o", str(output)],
                                stdout=subprocess.DEVNULL, stderr=stderr,
                                env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        # wait4: this child's own peak memory (its dot, if any, included), not the bench's
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        stderr.seek(0)
        last = stderr.read().strip().splitlines()[-1:]
    return {"output": output.suffix, "exit": os.waitstatus_to_exitcode(status),
            "wall_s": round(wall, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024),
            "written": output.exists(), "stderr": last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--dot-timeout", type=float, default=60.0)
    parser.add_argument("--dot-sizes", default=",".join(map(str, DOT_SIZES)),
                        help="random-DAG sizes for the dot-alone rows (comma-separated)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from partition_lab.render.graphviz import MAX_CLUSTERS, TIMEOUT_S

    rows = [dot_alone(int(n), args.dot_timeout) for n in args.dot_sizes.split(",")]
    print(f"{'dot alone':12s} {'ops':>6s} {'clusters':>9s} {'seconds':>9s}   "
          f"(viz refuses more than {MAX_CLUSTERS} clusters)")
    for row in rows:
        took = row["dot_s"] if row["finished"] else f"> {row['timeout_s']:g}"
        print(f"{'':12s} {row['ops']:6d} {row['clusters']:9d} {took:>9}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        model = alternating_onnx(work / "alternating.onnx", args.ops)
        target = work / "npu.toml"
        target.write_text('name = "npu"\ndefault_profile = "t4"\n'
                          'supported = ["nn.conv2d", "nn.relu"]\n')
        runs = [cli_viz(model, target, work / "alternating.svg"),
                cli_viz(model, target, work / "alternating.dot")]
    for run in runs:
        print(f"viz {args.ops} ops -> {run['output']}: exit {run['exit']}, {run['wall_s']} s, "
              f"peak {run['peak_rss_mb']} MB, written {run['written']} {run['stderr']}")
    if args.out:
        args.out.write_text(json.dumps({"max_clusters": MAX_CLUSTERS, "timeout_s": TIMEOUT_S,
                                        "ops": args.ops, "dot_alone": rows, "viz": runs},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
