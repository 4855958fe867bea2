"""Hostile conditions around the process, not its inputs: signals while ``dot``
runs or outputs are renamed, staging files that a killed run left, a full disk, threads that
share stderr, and graphs too large to draw.

Each case asserts the exit status, the one stderr line, and that the working directory holds
exactly what it should: no file changed, left behind or created outside the output paths.
Timeouts here only guard against hangs; no case passes or fails on how long it took.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from partition_lab.cli import main

HANG_GUARD_S = 300  # only so that a hang fails the test instead of the whole run

RELAY_TEXT = """#[version = "0.0.5"]
def @main(%data: Tensor[(1, 8), float32]) {
  %0 = nn.relu(%data);
  sign(%0)
}
"""

# Stands in for graphviz's dot: records its pid, then waits as a huge layout would.
SLOW_DOT = """#!/bin/sh
echo $$ > "{pidfile}.part" && mv "{pidfile}.part" "{pidfile}"
exec sleep 600
"""


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below ``folder`` (hidden ones included) with its bytes and mode."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def cli_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **extra)


def wait_for(condition, what: str, proc: subprocess.Popen | None = None) -> None:
    """Poll ``condition`` (a hang guard, not a time limit on the code under test)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the command ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.02)


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting for its reaper counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


# ---------------------------------------------------------------------------- dot and signals
@pytest.mark.parametrize("sig, code, line", [
    (signal.SIGTERM, 143, "partition-lab: terminated"),
    (signal.SIGINT, 130, "partition-lab: interrupted"),
], ids=["sigterm", "sigint"])
def test_a_signal_while_dot_runs_stops_dot_too(tmp_path, sig, code, line):
    """SIGTERM or SIGINT sent to partition-lab alone (not its process group, as ``kill``
    does) while ``dot`` lays out: dot ends with it, and the old drawing stays."""
    work, bin_dir = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    pidfile = tmp_path / "dot.pid"
    dot = bin_dir / "dot"
    dot.write_text(SLOW_DOT.format(pidfile=pidfile))
    dot.chmod(0o755)
    (work / "net.relay").write_text(RELAY_TEXT)
    (work / "net.svg").write_text("old drawing\n")
    before = snapshot(work)
    env = cli_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.Popen([sys.executable, "-m", "partition_lab.cli", "viz", "net.relay",
                             "-o", "net.svg"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(pidfile.exists, "dot start", proc)
        dot_pid = int(pidfile.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
        assert (proc.returncode, err.splitlines()) == (code, [line]), out
        wait_for(lambda: gone(dot_pid), "dot end")
    finally:
        proc.kill()
        if pidfile.exists() and not gone(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the fake dot this test started
    assert snapshot(work) == before


# ---------------------------------------------------------------------------- staging files
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_staging_files_a_killed_run_left_are_removed_by_the_next(tmp_path, capsys):
    """SIGKILL between writing and renaming leaves ``.plan.json.<pid>.<random>.tmp`` (0600
    when mkstemp had just made it): the next run removes those of dead processes, and only
    files of our naming for its own outputs."""
    model = tmp_path / "net.relay"
    model.write_text(RELAY_TEXT)
    dead = _dead_pid()
    abandoned = [tmp_path / f".plan.json.{dead}.k3x_9abc.tmp",
                 tmp_path / f".plan.relay.{dead}.0123abcd.tmp",
                 tmp_path / f".plan.json.{dead}.0badc0de.old"]
    for path in abandoned:
        path.write_text("half a plan")
        path.chmod(0o600)
    kept = {  # a live writer's file, someone else's files, a file of another output
        f".plan.json.{os.getpid()}.abcdefgh.tmp": "a live run is writing this",
        ".plan.json.notes.tmp": "not ours", ".plan.json.swp": "an editor's",
        f".other.json.{dead}.abcdefgh.tmp": "not an output of this run"}
    for name, text in kept.items():
        (tmp_path / name).write_text(text)
    before = snapshot(tmp_path)
    assert main(["partition", str(model), "-o", str(tmp_path / "plan.json")]) == 0
    assert capsys.readouterr().err == ""
    after = snapshot(tmp_path)
    assert sorted(set(after) - set(before)) == ["plan.json", "plan.relay"]
    assert sorted(set(before) - set(after)) == sorted(p.name for p in abandoned)
    assert all(after[name] == before[name] for name in kept)


def test_an_old_staging_file_without_a_pid_is_removed(tmp_path, capsys):
    """Names from before pids were recorded (``.plan.json.<random>.tmp``) go once they are
    an hour old; a recent one may be a live writer's of an older version, and stays."""
    model = tmp_path / "net.relay"
    model.write_text(RELAY_TEXT)
    old, recent = tmp_path / ".plan.json.a1b2c3d4.tmp", tmp_path / ".plan.json.e5f6g7h8.tmp"
    for path in (old, recent):
        path.write_text("half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert main(["partition", str(model), "-o", str(tmp_path / "plan.json")]) == 0
    assert capsys.readouterr().err == ""
    assert not old.exists() and recent.read_text() == "half"


def _old_outputs(tmp_path: Path) -> Path:
    model = tmp_path / "net.relay"
    model.write_text(RELAY_TEXT)
    (tmp_path / "plan.json").write_text("old plan\n")
    (tmp_path / "plan.relay").write_text("old relay\n")
    return model


@pytest.mark.parametrize("when", ["before", "after"])
def test_sigint_during_the_renames_reports_what_was_replaced(tmp_path, monkeypatch, capsys,
                                                             when):
    """Ctrl-C held back while the outputs are renamed: the renames all happen, and the
    message says that the outputs are this run's (not the old files the README promises for an
    interrupt before them)."""
    from partition_lab import _outputs

    real = _outputs._commit

    def commit_with_interrupt(staged):
        if when == "before":
            os.kill(os.getpid(), signal.SIGINT)  # held back: the renames still happen
        real(staged)
        if when == "after":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(_outputs, "_commit", commit_with_interrupt)
    model = _old_outputs(tmp_path)
    code = main(["partition", str(model), "-o", str(tmp_path / "plan.json")])
    err = capsys.readouterr().err.splitlines()
    plan, relay = tmp_path / "plan.json", tmp_path / "plan.relay"
    assert (code, err) == (130, [f"partition-lab: interrupted after {plan} and {relay} had "
                                 "been replaced by this run's results"])
    assert plan.read_text().startswith("{") and "nn.relu" in relay.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.relay", "plan.json",
                                                          "plan.relay"]


@pytest.mark.parametrize("sig, code, line", [
    (signal.SIGINT, 130, "partition-lab: interrupted"),
    (signal.SIGTERM, 143, "partition-lab: terminated"),
], ids=["sigint", "sigterm"])
def test_a_signal_before_the_renames_keeps_the_old_files(tmp_path, monkeypatch, capsys, sig,
                                                         code, line):
    """Both outputs staged, none renamed: the old files stay and no staging file is left
    (SIGTERM as Ctrl-C, which must not leave ``.plan.json.*.tmp`` behind either)."""
    from partition_lab import _io

    real = _io._write_all
    calls = []

    def interrupted_write(handle, data):
        real(handle, data)
        calls.append(1)
        if len(calls) == 2:  # both outputs staged, none renamed yet
            os.kill(os.getpid(), sig)

    monkeypatch.setattr(_io, "_write_all", interrupted_write)
    model = _old_outputs(tmp_path)
    before = snapshot(tmp_path)
    status = main(["partition", str(model), "-o", str(tmp_path / "plan.json")])
    assert (status, capsys.readouterr().err) == (code, f"{line}\n")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EDQUOT], ids=["disk-full", "quota"])
def test_a_full_disk_is_one_line_and_the_old_outputs_stay(tmp_path, monkeypatch, capsys,
                                                          error):
    from partition_lab import _io

    real = _io._write_all
    calls = []

    def full_disk(handle, data):
        calls.append(1)
        if len(calls) == 2:  # the first output is staged, the second finds the disk full
            handle.write(data[:10])
            raise OSError(error, os.strerror(error))
        real(handle, data)

    monkeypatch.setattr(_io, "_write_all", full_disk)
    model = _old_outputs(tmp_path)
    before = snapshot(tmp_path)
    code = main(["partition", str(model), "-o", str(tmp_path / "plan.json")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"partition-lab: error: cannot write {tmp_path / 'plan.relay'}: "
                             "no space left on its device"), err
    assert "free some space" in err[0] and "Errno" not in err[0]
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- stderr, threads
def test_interleaved_captures_from_threads_lose_no_stderr(capfd):
    """Thread A starts capturing, B starts, A ends, B ends (what six concurrent load_model
    calls do): before, B put back A's capture file as descriptor 2, and every later stderr
    line went into a deleted file."""
    from partition_lab._tvm_logs import quiet_tvm_logs

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with quiet_tvm_logs():
            os.write(2, b"from a\n")
            a_in.set()
            b_in.wait(HANG_GUARD_S)
        a_out.set()

    def b():
        a_in.wait(HANG_GUARD_S)
        with quiet_tvm_logs():
            os.write(2, b"from b\n[12:00:00] /tvm/src/x.cc:1: Warning: dropped\n")
            b_in.set()
            a_out.wait(HANG_GUARD_S)
            os.write(2, b"b after a left\n")

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_S)
    os.write(2, b"after both\n")
    err = capfd.readouterr().err
    assert sorted(err.splitlines()) == ["after both", "b after a left", "from a", "from b"]
    assert err.endswith("after both\n")


LOAD_IN_THREADS = """
import os, sys, threading
import partition_lab
text = sys.argv[1]
errors = []
def load():
    try:
        partition_lab.load_model(text)
        os.write(2, b"loaded\\n")
    except Exception as exc:
        errors.append(exc)
threads = [threading.Thread(target=load) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
print("stderr after the threads", file=sys.stderr, flush=True)
os.write(2, b"descriptor 2 after the threads\\n")
sys.exit(len(errors))
"""


def test_load_model_from_six_threads_keeps_stderr(tmp_path):
    model = tmp_path / "net.relay"
    model.write_text(RELAY_TEXT)
    proc = subprocess.run([sys.executable, "-c", LOAD_IN_THREADS, str(model)], cwd=tmp_path,
                          env=cli_env(), capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["loaded"] * 6 + [
        "stderr after the threads", "descriptor 2 after the threads"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.relay"]


def test_a_failed_load_in_one_thread_drops_only_its_own_report(capfd):
    """A conversion that fails drops TVM's report (its error says it in one line); lines
    another thread writes meanwhile are kept."""
    from partition_lab._tvm_logs import stderr_captured

    inside, other_done = threading.Event(), threading.Event()

    def other():
        inside.wait(HANG_GUARD_S)
        with stderr_captured():
            os.write(2, b"other thread\n")
        other_done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with stderr_captured() as block:
        os.write(2, b"a report line\n")
        inside.set()
        other_done.wait(HANG_GUARD_S)
        block.discard()
    thread.join(HANG_GUARD_S)
    with stderr_captured() as block:  # alone now: its report goes
        os.write(2, b"a second report\n")
        block.discard()
    assert capfd.readouterr().err.splitlines() == ["a report line", "other thread"]


# ---------------------------------------------------------------------------- big graphs
def _relu_chain(path: Path, n: int) -> Path:
    lines = ['#[version = "0.0.5"]', "def @main(%x: Tensor[(1, 4), float32]) {"]
    lines += [f"  %{i} = nn.relu({'%x' if i == 0 else f'%{i - 1}'});" for i in range(n)]
    path.write_text("\n".join([*lines, f"  %{n - 1}", "}", ""]))
    return path


def test_an_expanded_drawing_over_the_node_budget_is_refused_before_dot(tmp_path, capsys,
                                                                        monkeypatch):
    """One region of 2,001 ops: the region budget lets it through, and ``dot`` runs out of
    memory on such drawings, so it is refused before any graphviz program runs."""
    from partition_lab.render import graphviz as render_graphviz

    def no_graphviz(*args, **kwargs):
        raise AssertionError("graphviz ran")

    monkeypatch.setattr(render_graphviz, "_run_graphviz", no_graphviz)
    model = _relu_chain(tmp_path / "chain.relay", render_graphviz.MAX_NODES + 1)
    before = snapshot(tmp_path)
    code = main(["viz", str(model), "--expand", "-o", str(tmp_path / "chain.svg")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and err == [
        f"partition-lab: error: cannot draw {tmp_path / 'chain.svg'}: the drawing has 2001 ops "
        "(one node each when expanded) and graphviz needs minutes to hours or runs out of "
        "memory laying out more than 2000; draw it collapsed (without --expand), explore it "
        f"in the interactive view instead (-o {tmp_path / 'chain.html'}) or write the DOT "
        f"text (-o {tmp_path / 'chain.dot'})"]
    assert snapshot(tmp_path) == before


def test_the_render_budget_counts_drawn_nodes():
    """Collapsed, a long chain in one region is one node; expanded, one node per op."""
    from partition_lab import Verdict, synthetic
    from partition_lab.render.graphviz import MAX_NODES, RenderBudgetError, check_render_budget

    n = MAX_NODES + 1
    graph = synthetic.chain(["nn.relu"] * n)
    plan = synthetic.plan_on(graph, synthetic.one_accelerator([Verdict(True, "")] * n),
                             "greedy", range(n))
    check_render_budget(plan, "chain.svg")  # collapsed by default at this size
    check_render_budget(plan, "chain.svg", collapse=True)
    with pytest.raises(RenderBudgetError, match="2001 ops"):
        check_render_budget(plan, "chain.svg", collapse=False)


# ---------------------------------------------------------------------------- environment
@pytest.mark.parametrize("value", ["", "  "], ids=["empty", "blank"])
def test_an_empty_cache_variable_means_unset_everywhere(monkeypatch, tmp_path, value):
    """``PARTITION_LAB_CACHE=""`` means unset for zoo builds and profiles alike: the home
    cache for both, not the current folder for profiles."""
    from partition_lab import zoo
    from partition_lab.profiling.cache import default_cache_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PARTITION_LAB_CACHE", value)
    home_cache = tmp_path / ".cache" / "partition_lab"
    assert default_cache_path() == home_cache / "profile_cache.json"
    assert zoo.cache_dir().parent == home_cache / "zoo"
    monkeypatch.setenv("PARTITION_LAB_CACHE", "~/elsewhere")
    assert default_cache_path() == tmp_path / "elsewhere" / "profile_cache.json"
    assert zoo.cache_dir().parent == tmp_path / "elsewhere"
