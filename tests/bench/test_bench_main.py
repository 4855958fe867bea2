"""The benchmark suite's entry point (``python -m bench``): every step names a script of the
repository, the CPU benchmarks run at both sizes, and a GPU benchmark prints its steps in order
instead of running them."""

from __future__ import annotations

import importlib.util
import sys

from repo_paths import REPO_ROOT

ROOT = REPO_ROOT


def _suite():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("bench_suite", ROOT / "bench" / "__main__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


suite = _suite()


def test_every_step_is_a_script_of_the_repository() -> None:
    steps = [step for bench in suite.BENCHMARKS for step in bench.steps]
    missing = [step.script for step in steps if not (ROOT / step.script).is_file()]
    assert steps and not missing, missing
    for bench in suite.BENCHMARKS:
        for page in bench.evidence.split(", "):
            assert (ROOT / page).is_file(), f"{bench.name}: {page}"


def test_the_cpu_benchmarks_run_something_at_each_size() -> None:
    cpu = [bench for bench in suite.BENCHMARKS if not bench.gpu]
    assert {b.name for b in cpu} >= {"partition", "strategies", "load", "viz"}
    for bench in cpu:
        for full in (False, True):
            assert any(step.arguments(full) is not None for step in bench.steps), (bench.name, full)


def test_a_step_runs_only_at_the_sizes_it_has_arguments_for() -> None:
    step = suite.Step("bench/x.py", None, ("--all",))
    assert step.arguments(False) is None and step.command(True) == ["python", "bench/x.py", "--all"]
    assert suite.Step("bench/p.sh", (), None).command(False) == ["bash", "bench/p.sh"]


def test_the_gpu_benchmark_prints_its_steps_in_order(capsys) -> None:
    assert suite.main(["run", "gpu"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.lstrip()[:2] in {"1.", "2.", "3.", "4."}]
    assert [line.split("]")[0].split("[")[1].strip() for line in lines] == \
        ["here", "GPU", "GPU", "here"]
    assert "export_bundles.py" in lines[0] and "profiled_report.py" in lines[-1]
    assert "run run1" in lines[2]


def test_list_names_every_benchmark(capsys) -> None:
    assert suite.main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(bench.name in out for bench in suite.BENCHMARKS)
