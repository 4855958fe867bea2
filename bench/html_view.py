"""Bench: the interactive HTML view (``viz -o plan.html``): time to write it and its size, for
BERT-base on ``tensorcore`` (zoo ``hf:bert_base``, full size) and a 5,000-op synthetic graph;
with ``--browser``, the time headless Chromium takes to load and draw each page.

Run: ``PYTHONPATH=src python bench/html_view.py [--skip-bert] [--browser] [--out DIR]``
(``--browser`` needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package,
the ``[test]`` extra). Prints one line per plan.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

SYNTHETIC_OPS = 5000


def synthetic_plan(n_ops: int = SYNTHETIC_OPS, seed: int = 0):
    """A layered random CNN-like DAG of ``n_ops`` ops on neuron@2020, a fifth of its ops
    rejected at random, partitioned greedily, with the roofline cost: (plan, cost)."""
    from partition_lab import synthetic
    from partition_lab.core.support import Support
    from partition_lab.cost_models import evaluate, get_cost_model
    from partition_lab.strategies import get_strategy
    from partition_lab.targets import get_platform

    graph = synthetic.layered_dag(n_ops, seed=seed)
    platform = get_platform("neuron@2020")
    verdicts = synthetic.random_verdicts(graph, seed=seed, unsupported=0.2)
    support = Support.with_host(platform, {platform.primary.name: verdicts})
    plan = get_strategy("greedy").run(graph, support)
    return plan, evaluate(plan, get_cost_model(platform))


def bert_plan():
    """BERT-base (random weights, built from its config) partitioned for tensorcore."""
    from partition_lab import partition, zoo
    from partition_lab.targets import get_platform

    mod, params = zoo.load("hf:bert_base")
    result = partition(mod, get_platform("tensorcore"), params=params, name="bert_base")
    return result.plan, result.cost


def write_timed(plan, cost, path: Path) -> tuple[float, int]:
    """Seconds to write the view and its size in bytes."""
    from partition_lab.render.html import write_html

    start = time.perf_counter()
    write_html(plan, path, cost)
    return time.perf_counter() - start, path.stat().st_size


def browser_load_s(path: Path) -> tuple[float, int]:
    """Seconds from navigation until the page says it is drawn, and the page's own drawing
    time in milliseconds, in headless Chromium."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from browser import chromium_driver, wait_ready

    with chromium_driver() as driver:
        start = time.perf_counter()
        driver.get(path.resolve().as_uri())
        wait_ready(driver, timeout=120)
        seconds = time.perf_counter() - start
        render_ms = int(driver.find_element("tag name", "body").get_attribute("data-render-ms"))
    return seconds, render_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-bert", action="store_true", help="only the synthetic graph")
    parser.add_argument("--browser", action="store_true", help="also time loading in Chromium")
    parser.add_argument("--out", type=Path, help="keep the pages in this folder")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="html_view_"))
    folder.mkdir(parents=True, exist_ok=True)
    cases = [(f"synthetic {SYNTHETIC_OPS} ops", "synthetic5000.html", synthetic_plan)]
    if not args.skip_bert:
        cases.append(("BERT-base on tensorcore", "bert_base.tensorcore.html", bert_plan))
    for label, name, make in cases:
        start = time.perf_counter()
        plan, cost = make()
        planned = time.perf_counter() - start
        seconds, size = write_timed(plan, cost, folder / name)
        line = (f"{label}: {len(plan.graph)} ops, {len(plan.regions)} regions; plan "
                f"{planned:.1f} s; HTML written in {seconds:.2f} s, {size / 1e6:.2f} MB")
        if args.browser:
            load, render_ms = browser_load_s(folder / name)
            line += f"; Chromium load {load:.2f} s (drawing {render_ms} ms)"
        print(line + f"  [{folder / name}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
