"""Unit tests of the pieces behind the safety guarantees: outputs written as one unit, the
Ctrl-C handler, the zoo cache's content hashes, restricted message templates, plan checks on
load and the render budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from partition_lab import PartitionPlan, Verdict, _outputs, _signals, synthetic, zoo
from partition_lab.errors import PlanError, TargetSpecError
from partition_lab.render import graphviz as render_graphviz
from partition_lab.synthetic import chain, random_dag
from partition_lab.targets.templates import MessageTemplate, check_template
from partition_lab.zoo import _build


# ---------------------------------------------------------------------------------- outputs
def test_outputs_are_written_together(tmp_path):
    files = {tmp_path / "a.json": b"A", tmp_path / "a.relay": b"R"}
    _outputs.write_together(files)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {"a.json": b"A",
                                                                   "a.relay": b"R"}


def test_a_failed_second_rename_restores_the_first_file(tmp_path, monkeypatch):
    plan, relay = tmp_path / "plan.json", tmp_path / "plan.relay"
    plan.write_text("old plan")
    relay.write_text("old relay")
    real = os.replace

    def failing(src, dst):
        if Path(dst) == relay:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(_outputs.os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        _outputs.write_together({plan: b"new plan", relay: b"new relay"})
    monkeypatch.undo()
    assert plan.read_text() == "old plan" and relay.read_text() == "old relay"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "plan.relay"]


def test_a_failed_second_rename_removes_a_first_file_that_was_new(tmp_path, monkeypatch):
    plan, relay = tmp_path / "plan.json", tmp_path / "plan.relay"
    real = os.replace
    monkeypatch.setattr(_outputs.os, "replace", lambda s, d: (
        (_ for _ in ()).throw(OSError("no space")) if Path(d) == relay else real(s, d)))
    with pytest.raises(OSError):
        _outputs.write_together({plan: b"P", relay: b"R"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make, expected", [
    (lambda d: (d / "m.onnx", [d / "m.onnx"]), "it is the input"),
    (lambda d: (d / "x" / "m.json", []), "does not exist"),
    (lambda d: (d, []), "it is a directory"),
])
def test_check_outputs(tmp_path, make, expected):
    (tmp_path / "m.onnx").write_bytes(b"x")
    output, inputs = make(tmp_path)
    with pytest.raises(_outputs.OutputError, match=expected):
        _outputs.check_outputs([output], inputs)


def test_two_outputs_that_are_one_file(tmp_path):
    with pytest.raises(_outputs.OutputError, match="also the output"):
        _outputs.check_outputs([tmp_path / "a", tmp_path / "." / "a"])


def test_input_files_of_a_symbol_include_its_params(tmp_path):
    (tmp_path / "m-symbol.json").write_text("{}")
    (tmp_path / "m-0003.params").write_bytes(b"")
    (tmp_path / "other.params").write_bytes(b"")
    files = _outputs.input_files(str(tmp_path / "m-symbol.json"), "t.toml", "cache.json")
    assert [p.name for p in files] == ["m-symbol.json", "m-0003.params", "t.toml", "cache.json"]
    assert _outputs.input_files(None, "neuron") == []


# ---------------------------------------------------------------------------------- SIGINT
def test_the_handler_raises_and_remembers(monkeypatch):
    previous = signal.getsignal(signal.SIGINT)
    try:
        _signals.install()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert _signals.interrupted()
        with pytest.raises(KeyboardInterrupt):
            _signals.check()
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interrupt_during_a_commit_waits_for_it():
    previous = signal.getsignal(signal.SIGINT)
    try:
        _signals.install()
        with _signals.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the handler ran, and raised nothing
            finished = True
        assert finished and _signals.interrupted()
        with pytest.raises(KeyboardInterrupt), _signals.deferred():
            pass  # an interrupt that came before a commit stops it from starting
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_console_entry_point_imports_nothing_before_its_handler():
    """The entry module must install its SIGINT handler before any slow import: loading it
    adds only itself to what the interpreter has loaded at start."""
    code = ("import sys; before = set(sys.modules); import _partition_lab_entry; "
            "print(sorted(set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.stdout.strip() == "['_partition_lab_entry']"


@pytest.mark.parametrize("argv, status", [(["--version"], 0), (["no-such-command"], 2)])
def test_the_console_entry_point_returns_the_status_and_leaves_sigint_default(
        monkeypatch, capsys, argv, status):
    import _partition_lab_entry

    previous = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(sys, "argv", ["partition-lab", *argv])
    try:
        assert _partition_lab_entry.main() == status
        # Python's shutdown comes next: a Ctrl-C there ends the process, with no traceback
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "interrupted" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------- zoo cache
def test_hash_sidecar_detects_truncation_and_same_size_corruption(tmp_path):
    path = tmp_path / "m.params"
    _build.write_atomically(path, b"0123456789" * 100)
    assert _build.is_intact(path)
    path.write_bytes(b"0123456789" * 50)  # cut short
    assert not _build.is_intact(path)
    _build.write_atomically(path, b"0123456789" * 100)
    path.write_bytes(b"x" * 1000)  # same size, other bytes
    assert not _build.is_intact(path)
    _build.discard(path)
    assert list(tmp_path.iterdir()) == []


def test_a_file_without_hash_is_not_intact(tmp_path):
    (tmp_path / "m.json").write_text("{}")  # left by a build killed before its hash
    assert not _build.is_intact(tmp_path / "m.json")


def test_stale_part_files_are_removed_and_live_ones_kept(tmp_path):
    dead = tmp_path / f".m.params.{_dead_pid()}.abc.part"
    live = tmp_path / f".m.params.{os.getpid()}.def.part"
    old = tmp_path / ".m.params.xyz.part"  # no pid in the name, an hour old
    for path in (dead, live, old):
        path.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * _build.STALE_PART_S,) * 2)
    _build.remove_stale_parts(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_cache_files_are_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        _build.write_atomically(tmp_path / "m.onnx", b"x")
    finally:
        os.umask(old)
    for path in tmp_path.iterdir():
        assert path.stat().st_mode & 0o777 == 0o644, path


def test_a_corrupted_zoo_file_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path))
    symbol, params = zoo.mxnet_paths("resnet50_v1", small=True)
    good = params.read_bytes()
    params.write_bytes(bytes(len(good)))  # same size, zeros
    (params.parent / f".{params.name}.{_dead_pid()}.q.part").write_bytes(b"half")  # SIGTERM
    assert zoo.mxnet_paths("resnet50_v1", small=True) == (symbol, params)
    assert params.read_bytes() == good
    assert not [p for p in params.parent.iterdir() if p.name.endswith(".part")]


# ---------------------------------------------------------------------------------- templates
@pytest.mark.parametrize("template, shown", [
    ("{op} is {value:<10}, not {expected}", "relu is 3         , not 4"),
    ("{{literal}} {op}", "{literal} relu"), ("no fields", "no fields"),
    ("{op:^80}", " " * 38 + "relu" + " " * 38)])
def test_safe_templates_pass(template, shown):
    fields = ("op", "value", "expected")
    check_template(template, fields, "t")  # raises TargetSpecError on a template it refuses
    assert MessageTemplate(template, fields, "t").format(op="relu", value=3, expected=4) == shown


def test_a_template_formats_only_its_fields_as_text():
    template = MessageTemplate("{op:>5}|{value}", ("op", "value"), "t")

    class Loud:
        def __format__(self, spec):
            raise AssertionError("an object's __format__ must not run")

        def __str__(self):
            return "v"

    assert template.format(op="ab", value=Loud(), other="ignored") == "   ab|v"


@pytest.mark.parametrize("template", ["{op.__class__}", "{op[0]}", "{op:>81}", "{op!s}",
                                      "{op:>{value}}", "{op:,}", "{x}", "}{"])
def test_unsafe_templates_fail(template):
    with pytest.raises(TargetSpecError):
        check_template(template, ("op", "value"), "t")


# ---------------------------------------------------------------------------------- plans
def test_a_plan_with_a_flipped_verdict_fails_against_the_rules():
    from partition_lab.relay.passes.annotate import support_table
    from partition_lab.strategies import get_strategy
    from partition_lab.targets import accelerator_platform
    from partition_lab.targets.base import TargetSpec

    graph = chain(["nn.conv2d", "tanh", "nn.conv2d"])
    platform = accelerator_platform(TargetSpec("acc", supported={"nn.conv2d": ""}))
    plan = get_strategy("greedy").run(graph, support_table(graph, platform))
    data = plan.to_dict()
    node = data["nodes"][1]
    node["support"]["acc"]["supported"] = True
    node["device"] = data["regions"][node["region"]]["device"] = "acc"
    PartitionPlan.from_dict(graph, data)  # without rules, only the invariants are checked
    with pytest.raises(PlanError, match="the plan says acc supports node .* acc rejects it"):
        PartitionPlan.from_dict(graph, data, platform=platform)


def test_a_plan_for_another_graph_is_refused():
    graph = chain(["nn.conv2d", "nn.relu"])
    verdicts = [Verdict(True, "ok", "r")] * 2
    data = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "greedy", [0, 1]).to_dict()
    with pytest.raises(PlanError, match="another graph"):
        PartitionPlan.from_dict(chain(["nn.conv2d", "tanh"]), data)


# ---------------------------------------------------------------------------------- render
def _alternating_plan(n: int) -> PartitionPlan:
    graph = random_dag(n, seed=0)
    verdicts = [Verdict(i % 2 == 0, "alternating", "r") for i in range(n)]
    return synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "greedy", [i for i in range(n) if i % 2 == 0])


def test_a_drawing_over_the_budget_is_refused_before_dot_runs(tmp_path, monkeypatch):
    plan = _alternating_plan(400)
    assert len(plan.accelerator_regions) > render_graphviz.MAX_CLUSTERS
    monkeypatch.setattr(render_graphviz.subprocess, "run", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(render_graphviz.RenderBudgetError, match="accelerator regions"):
        render_graphviz.write(plan, tmp_path / "p.svg")
    assert list(tmp_path.iterdir()) == []


def test_every_graphviz_call_has_a_timeout(monkeypatch):
    monkeypatch.setattr(render_graphviz, "TIMEOUT_S", 0.2)
    with pytest.raises(render_graphviz.RenderBudgetError, match="did not finish within"):
        render_graphviz._run_graphviz(["sleep", "5"], b"", "dot")


# ---------------------------------------------------------------------------------- audience
EXCLUSIONS = [  # (excl_node_names, exclude_ops) -> Python wording, command-line wording
    (["relu_9"], [], "^excl_node_names: no node named 'relu_9'",
     "^--exclude-node: no node named 'relu_9'"),
    ([], ["nn.relux"], r"^exclude_ops: 'nn.relux' \(did you mean nn.relu\?\) not in chain",
     r"^--exclude-op: 'nn.relux' \(did you mean nn.relu\?\) not in chain"),
]


@pytest.mark.parametrize("names, ops, python, command_line", EXCLUSIONS,
                         ids=["node", "op"])
def test_an_exclusion_error_names_the_option_as_its_reader_wrote_it(names, ops, python,
                                                                    command_line):
    from partition_lab._audience import command_line as for_the_command_line
    from partition_lab.errors import ExclusionError
    from partition_lab.relay.passes.annotate import support_table
    from partition_lab.targets import get_platform

    graph, platform = chain(["nn.conv2d", "nn.relu"]), get_platform("neuron")
    with pytest.raises(ExclusionError, match=python):
        support_table(graph, platform, names, ops)
    with for_the_command_line(), pytest.raises(ExclusionError, match=command_line):
        support_table(graph, platform, names, ops)


@pytest.mark.parametrize("cli, hint", [(False, "use frontend='mxnet'"),
                                       (True, "use --frontend mxnet")])
def test_a_zoo_model_without_a_frontend_names_the_other_in_the_readers_terms(
        monkeypatch, cli, hint):
    import dataclasses
    from contextlib import nullcontext

    from partition_lab._audience import command_line
    from partition_lab.errors import UnsupportedOperatorError

    real = zoo.entry("resnet50_v1")
    mxnet_only = dataclasses.replace(real, frontends=("mxnet",), frontend_note="no ONNX export")
    monkeypatch.setattr(zoo, "entry", lambda name: mxnet_only)
    with command_line() if cli else nullcontext(), \
            pytest.raises(UnsupportedOperatorError, match=f"{hint}$"):
        zoo.load("resnet50_v1", frontend="onnx")


def test_excluding_a_module_name_excludes_each_of_its_calls():
    # The PyTorch frontend names a module's later calls layer1.0.relu#2, #3 (ONNX wants unique
    # node names); the module's own name excludes every call, a suffixed name that call alone.
    from partition_lab.core.graph import OpGraphBuilder, TensorType
    from partition_lab.errors import ExclusionError
    from partition_lab.relay.passes.annotate import support_verdicts
    from partition_lab.targets import get_target

    b = OpGraphBuilder("calls")
    t = TensorType((1, 8, 4, 4), "float32")
    x = b.input("x", t)
    for source in ("layer1.0.conv1", "layer1.0.relu", "layer1.0.conv2", "layer1.0.relu#2",
                   "layer1.0.relu#3", "layer1.1.relu"):
        op = "nn.conv2d" if "conv" in source else "nn.relu"
        x = b.op(op, [x], outputs=[t], source_name=source)
    graph = b.build([x])
    target = get_target("neuron")

    def excluded(names):
        return [n.source_name for n, v in zip(graph, support_verdicts(graph, target, names),
                                              strict=True) if v.rule == "excluded-by-name"]

    assert excluded(["layer1.0.relu"]) == ["layer1.0.relu", "layer1.0.relu#2", "layer1.0.relu#3"]
    assert excluded(["layer1.0.relu#2"]) == ["layer1.0.relu#2"]
    assert excluded(["layer1.1.relu"]) == ["layer1.1.relu"]
    with pytest.raises(ExclusionError, match="no node named 'layer1.0.relu#9'"):
        excluded(["layer1.0.relu#9"])
