"""EngineRun with real subprocesses: the run directory from the first line, a process-group stop
that ends grandchildren, a clear error when the command never starts a run, garbage lines
counted and never fatal; and the detached launcher's handshake."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.events import RunFinished, RunStarted, RunWarning, TrialStarted
from aorta_tui.relay.engine_run import EngineRun, EngineRunError
from tests.engine_support import process_alive

PROBE_RECIPE = """\
schema_version: 1
mode: probe
ticket: ENGINE-RUN
trials: 1
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def _line(event: object) -> str:
    return json.dumps(event.to_dict())  # type: ignore[attr-defined]


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(body)
    return [sys.executable, str(path)]



def test_a_real_sweep_names_its_run_directory_in_its_first_line(tmp_path: Path) -> None:
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE_RECIPE)
    out = tmp_path / "out"
    with EngineRun(["sweep", "run", "--json", "--recipe", str(recipe), "--output", str(out),
                    "--", "true"], cwd=tmp_path, stderr_path=tmp_path / "engine.log") as run:
        started = run.wait_started(timeout=60)
        assert run.run_dir == Path(started.run_dir)
        assert run.run_dir.parent.parent == out and (run.run_dir / "journal.jsonl").is_file()
        events = list(run.events())
        assert run.wait(30) == 0
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    assert events[-1].status == "completed" and run.malformed == 0


def test_the_run_dir_is_known_while_the_command_still_runs(tmp_path: Path) -> None:
    started = RunStarted("r1", source="sweep", run_dir=str(tmp_path / "r1"), total=1)
    argv = _script(tmp_path, f"import sys, time\nprint({_line(started)!r}, flush=True)\ntime.sleep(60)\n")
    run = EngineRun([], argv=argv, stderr_path=tmp_path / "engine.log").start()
    try:
        assert run.wait_started(timeout=60).run_dir == str(tmp_path / "r1")
        assert run.running and run.run_dir == tmp_path / "r1"
    finally:
        code = run.stop(grace_s=30)  # a loaded box may take seconds to print the traceback
    assert code == -signal.SIGINT or code == 1  # KeyboardInterrupt in the sleeping child


def test_stop_ends_the_whole_process_group_grandchildren_included(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    started = RunStarted("r1", source="sweep", run_dir="", total=0)
    # Child and grandchild both ignore SIGINT: only the group's SIGKILL ends them.
    argv = _script(tmp_path, (
        "import signal, subprocess, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        f"subprocess.Popen(['bash', '-c', 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300'])\n"
        "from pathlib import Path\n"
        f"while not Path({str(pidfile)!r}).exists():\n    time.sleep(0.01)\n"
        f"print({_line(started)!r}, flush=True)\n"
        "time.sleep(300)\n"))
    run = EngineRun([], argv=argv, stderr_path=tmp_path / "engine.log").start()
    run.wait_started(timeout=20)
    grandchild = int(pidfile.read_text())
    assert process_alive(grandchild)
    t0 = time.monotonic()
    run.stop(grace_s=0.5)
    assert time.monotonic() - t0 < 10
    assert run.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while process_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process_alive(grandchild), "the grandchild outlived the stop"


def test_a_refused_engine_command_ends_its_stream_typed(tmp_path: Path) -> None:
    """A policy sweep refused before it ran printed nothing and exited 2 (an EngineRunError
    here); its --json stream now ends typed (cli/stream_end.py): the refusal is the stream's
    warning and its failed run_finished, the exit code the command's."""
    run = EngineRun(["policy", "sweep", "tiny_kernel_stress", "--policies", "no_such_policy_xyz", "--json",
                     "--output", str(tmp_path / "p")], cwd=tmp_path, stderr_path=tmp_path / "engine.log").start()
    events = list(run.events())
    assert [type(e) for e in events] == [RunStarted, RunWarning, RunFinished]
    assert run.run_dir is None  # the run_started names no directory: none was made
    warning, finished = events[1], events[2]
    assert isinstance(warning, RunWarning) and warning.code == "error"
    assert "no_such_policy_xyz" in warning.message
    assert isinstance(finished, RunFinished) and (finished.status, finished.exit_code) == ("failed", 2)
    assert run.wait(30) == 2 and not (tmp_path / "p").exists()


def test_a_command_that_exits_before_run_started_is_a_clear_error(tmp_path: Path) -> None:
    """A command that dies before any line (a bug, an interpreter that cannot start): its
    status and its own stderr, named."""
    argv = _script(tmp_path, "import sys\nsys.stderr.write('no_such_policy_xyz\\n')\nsys.exit(2)\n")
    run = EngineRun(["policy", "sweep"], argv=argv, cwd=tmp_path,
                    stderr_path=tmp_path / "engine.log").start()
    with pytest.raises(EngineRunError) as info:
        list(run.events())
    message = info.value.render()
    assert "exited with status 2 before it started a run" in message
    assert "no_such_policy_xyz" in message  # the engine's own error, from its stderr
    assert str(run.stderr_path) in message
    assert info.value.exit_code == 2


def test_garbage_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    started = RunStarted("r1", source="trace", run_dir="", total=0)
    lines = [_line(started), "not json", "[1, 2]", '{"event": "no_such_event"}', "",
             _line(RunWarning("r1", message="hello")), '{"event": "progress", "done": "x"}',
             # a policy sweep's trial id (not a sweep's): an event of its stream all the same
             _line(TrialStarted("r1", trial_id="001-baseline-t1", cell="baseline", trial=1)),
             _line(RunFinished("r1", status="completed", exit_code=0))]
    argv = _script(tmp_path, "import sys\nsys.stdout.write(" + repr("\n".join(lines) + "\n") + ")\n")
    with EngineRun([], argv=argv, stderr_path=tmp_path / "engine.log") as run:
        events = list(run.events())
    assert [e.kind for e in events] == ["run_started", "warning", "trial_started", "run_finished"]
    assert run.malformed == 4
    assert [d.line for d in run.damaged] == [2, 3, 4, 7]


def test_a_silent_command_times_out_with_its_log_named(tmp_path: Path) -> None:
    run = EngineRun([], argv=_script(tmp_path, "import time\ntime.sleep(60)\n"), stderr_path=tmp_path / "engine.log").start()
    try:
        with pytest.raises(EngineRunError, match="printed no event line within 0.3s"):
            run.wait_started(timeout=0.3)
    finally:
        run.stop(grace_s=2)


_GARBAGE = st.one_of(
    st.text(min_size=1, max_size=40).filter(lambda s: "\n" not in s and "\r" not in s and s.strip()),
    st.just("{"), st.just("null"), st.just('{"event": 3}'), st.just('{"event": "warning"}'),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(_GARBAGE, st.builds(lambda m: _line(RunWarning("r", message=m)), st.text(max_size=30))),
                max_size=12))
def test_any_mix_of_lines_yields_exactly_the_events(tmp_path: Path, attack_tally, body: list[str]) -> None:
    data = tmp_path / "stream.jsonl"
    data.write_text("\n".join([_line(RunStarted("r", source="x", run_dir="", total=0)), *body]) + "\n")
    with EngineRun([], argv=["cat", str(data)], stderr_path=tmp_path / "engine.log") as run:
        got = list(run.events())
    expect = [json.loads(x)["message"] for x in body if x.startswith('{"event": "warning", "run_id"')]
    assert [e.message for e in got[1:]] == expect  # type: ignore[attr-defined]
    assert run.malformed == len(body) - len(expect)
    attack_tally.record("engine-run line fuzzer", cases=1, failures=0,
                        promise="every event line yielded, every other line counted, never fatal")


def test_launch_detached_reads_the_run_dir_from_the_handshake(tmp_path: Path) -> None:
    from aorta_tui.relay.launch import launch_detached

    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE_RECIPE)
    out = tmp_path / "out"
    run_dir = launch_detached(recipe, out, command=["true"])
    assert run_dir.parent.parent == out and (run_dir / "journal.jsonl").is_file()
    logs = list(out.glob(".launch-*.log"))
    assert len(logs) == 1

    def kinds() -> list[str]:
        return [json.loads(x)["event"] for x in logs[0].read_text().splitlines() if x.startswith("{")]

    deadline = time.monotonic() + 60
    while "run_finished" not in kinds() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kinds()[0] == "run_started" and kinds()[-1] == "run_finished"  # the relay kept copying
    assert (run_dir / "matrix.json").exists()
    assert os.path.getsize(logs[0]) > 0


def test_launch_detached_names_the_error_of_a_sweep_that_does_not_start(tmp_path: Path) -> None:
    from aorta_tui.core.errors import UsageError
    from aorta_tui.relay.launch import launch_detached

    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nmode: probe\nnope: 1\n")
    with pytest.raises(UsageError, match=r"the sweep did not start \(exit 2\)"):
        launch_detached(bad, tmp_path / "out", command=["true"])


# --- the stderr log a run makes itself (no stderr_path): gone with the run, unless cited ------


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where mkstemp puts a run's own log: a directory of the test's, listed afterwards."""
    import tempfile

    made = tmp_path / "tmp"
    made.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(made))
    return made


def test_a_log_the_run_made_goes_when_it_is_closed(tmp_path: Path, own_tmp: Path) -> None:
    started = RunStarted("r1", source="trace", run_dir="", total=0)
    argv = _script(tmp_path, f"import sys\nsys.stderr.write('noise\\n')\nprint({_line(started)!r})\n")
    with EngineRun([], argv=argv) as run:
        assert [e.kind for e in run.events()] == ["run_started"]
        assert run.wait(10) == 0
        assert run.stderr_path is not None and run.stderr_path.parent == own_tmp
        assert "noise" in run.stderr_tail()  # there while the run is open
    assert list(own_tmp.iterdir()) == []


def test_a_log_the_run_made_goes_when_it_is_stopped(tmp_path: Path, own_tmp: Path) -> None:
    # the TUI's screens end their runs with stop(), never close()
    run = EngineRun([], argv=_script(tmp_path, "import time\ntime.sleep(60)\n")).start()
    try:
        assert run.stderr_path is not None and run.stderr_path.exists()
    finally:
        run.stop(grace_s=2)
    assert list(own_tmp.iterdir()) == []
    run.close()  # once more: nothing left to remove, no error


def test_a_log_a_message_named_is_kept(tmp_path: Path, own_tmp: Path) -> None:
    argv = _script(tmp_path, "import sys\nsys.stderr.write('it went wrong\\n')\nsys.exit(3)\n")
    with EngineRun([], argv=argv) as run, pytest.raises(EngineRunError) as info:
        run.wait_started(timeout=30)
    assert run.stderr_path is not None and f"its stderr is in {run.stderr_path}" in info.value.render()
    assert run.stderr_path.read_text() == "it went wrong\n"  # closed: still there to read

    silent = EngineRun([], argv=_script(tmp_path, "import time\ntime.sleep(60)\n")).start()
    try:
        with pytest.raises(EngineRunError, match="printed no event line") as timed_out:
            silent.wait_started(timeout=0.3)
    finally:
        silent.stop(grace_s=2)
    assert silent.stderr_path is not None and f"see {silent.stderr_path}" in timed_out.value.render()
    assert sorted(own_tmp.iterdir()) == sorted([run.stderr_path, silent.stderr_path])


def test_a_log_the_caller_named_is_never_removed(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    started = RunStarted("r1", source="trace", run_dir="", total=0)
    with EngineRun([], argv=_script(tmp_path, f"print({_line(started)!r})\n"), stderr_path=log) as run:
        list(run.events())
    run.stop()
    assert log.exists()


def test_a_run_that_cannot_start_leaves_no_log(tmp_path: Path, own_tmp: Path) -> None:
    with pytest.raises(OSError):
        EngineRun([], argv=[str(tmp_path / "no-such-program")]).start()
    assert list(own_tmp.iterdir()) == []
