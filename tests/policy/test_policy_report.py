"""Known answers end to end: a small real child reads the policy's variable and reports
figures shifted by it; the report must call exactly the shifts that exist.

The child stands in for `queue run` only to make the figures known in advance (the real
harness is exercised in test_policy_evaluator.py); everything else is the real evaluator:
processes, environment at creation, files, report.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.policy import comparison
from aorta_tui.policy.evaluator import PolicySweepRequest, run_policy_sweep
from aorta_tui.policy.presets import Policy
from aorta_tui.policy.report import build_report, render_markdown
from aorta_tui.policy.report_doc import PolicyReport

CHILD = textwrap.dedent("""
    import json, os, random, sys
    out = sys.argv[sys.argv.index("-o") + 1]
    shift = float(os.environ.get("FAKE_SHIFT", "0"))
    rng = random.Random(os.path.basename(os.path.dirname(out)))  # "NNN-policy-tK": reproducible
    result = {
        "schema_version": 1, "kind": "aorta-tui/queue-result", "emulated": False,
        "workload": {"name": "fake"}, "config": {"streams": 4},
        "platform": {"backend": os.environ.get("FAKE_BACKEND", "rocm"), "device_name": "fake"},
        "summary": {"throughput": 100.0 + shift + rng.gauss(0, 1.0),
                    "latency_p50_ms": 10.0 + rng.gauss(0, 0.1),
                    "launch_delay_mean_us": None},
        "summary_units": {"throughput": "items/s", "latency_p50_ms": "ms",
                          "launch_delay_mean_us": "us"},
        "summary_better": {"throughput": "higher", "latency_p50_ms": "lower",
                           "launch_delay_mean_us": "lower"},
        "unavailable": {"launch_delay_us": "streams were idle at submit"},
    }
    if os.environ.get("FAKE_DROP"):  # a build that does not report this figure at all
        del result["summary"]["latency_p50_ms"]
    json.dump(result, open(out, "w"))
""")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("report")
    child = tmp / "child.py"
    child.write_text(CHILD)

    def command(req: PolicySweepRequest, policy: Policy, result: Path) -> list[str]:
        return [sys.executable, str(child), "-o", str(result)]

    policies = (
        Policy(name="same", env={"FAKE_SHIFT": "0"}),
        Policy(name="faster", env={"FAKE_SHIFT": "25"}),
        Policy(name="slower", env={"FAKE_SHIFT": "-25"}),
        Policy(name="cuda_only", vendor="cuda", env={"FAKE_SHIFT": "0"}),
        Policy(name="no_latency", env={"FAKE_DROP": "1"}),
    )
    req = PolicySweepRequest(workload="fake", policies=policies, streams=4, output_dir=tmp / "run",
                       trials=6, seed=11, python=sys.executable)
    outcome = run_policy_sweep(req, trial_command=command)
    return {"report": outcome.report.to_json(), "run_dir": tmp / "run"}


def _policy(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["policies"] if p["name"] == name)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_shifts_are_called_with_sign_and_direction(report: dict[str, Any]) -> None:
    r = report["report"]
    faster = _policy(r, "faster")["vs_reference"]["throughput"]
    slower = _policy(r, "slower")["vs_reference"]["throughput"]
    assert faster["verdict"] == comparison.HIGHER and faster["assessment"] == "better"
    assert faster["change_pct"] == pytest.approx(25.0, abs=3.0)
    assert slower["verdict"] == comparison.LOWER and slower["assessment"] == "worse"
    called = {(d["policy"], d["metric"]) for d in r["differences"]}
    assert called == {("faster", "throughput"), ("slower", "throughput")}


def test_no_shift_is_unchanged(report: dict[str, Any]) -> None:
    r = report["report"]
    for name in ("same", "cuda_only"):
        for metric in ("throughput", "latency_p50_ms"):
            assert _policy(r, name)["vs_reference"][metric]["verdict"] == comparison.UNCHANGED


def test_intervals_medians_and_missing_figures(report: dict[str, Any]) -> None:
    base = _policy(report["report"], "baseline")["metrics"]
    tp = base["throughput"]
    assert tp["n"] == 6 and len(tp["values"]) == 6
    assert tp["ci_low"] <= tp["median"] <= tp["ci_high"]
    assert 95.0 < tp["median"] < 105.0
    delay = base["launch_delay_mean_us"]
    assert delay["median"] is None and delay["reason"] == "streams were idle at submit"
    verdict = _policy(report["report"], "faster")["vs_reference"]["launch_delay_mean_us"]
    assert verdict["verdict"] == comparison.NOT_AVAILABLE


def test_notes_and_markdown(report: dict[str, Any]) -> None:
    r = report["report"]
    assert any("not applicable on this platform" in n for n in _policy(r, "cuda_only")["notes"])
    assert not _policy(r, "same")["notes"]
    md = render_markdown(PolicyReport.from_dict(r))
    assert "| faster | throughput | higher | +" in md
    assert "not available (streams were idle at submit)" in md
    # a figure none of a policy's trials reported says so, never an empty reason
    row = next(ln for ln in md.splitlines() if ln.startswith("| no_latency | 0 |"))
    assert row.count("not available (no successful trial measured it)") == 3
    assert "not available ()" not in md
    assert "`FAKE_SHIFT=25`" in md
    # policy.md words an unchanged policy as the policy screen does (issue 16 item 6)
    rows = [ln for ln in md.splitlines() if ln.startswith("| same | 6 |")]  # one per metric
    assert sum("| unchanged (within noise) |" in ln for ln in rows) >= 2  # throughput, latency
    assert not [ln for ln in rows if "not applied" in ln]


def test_rerender_is_identical_and_deterministic(report: dict[str, Any]) -> None:
    again = build_report(report["run_dir"]).to_json()
    for key in ("policies", "differences", "trials", "metrics", "status", "platform"):
        assert again[key] == report["report"][key]
    written = json.loads((report["run_dir"] / "policy.json").read_text())
    assert written["policies"] == report["report"]["policies"]


def _cheap_sweep(tmp: Path, trials: int = 4, **kw: Any) -> tuple[PolicySweepRequest, Any]:
    child = tmp / "child.py"
    child.write_text(CHILD)

    def command(req: PolicySweepRequest, policy: Policy, result: Path) -> list[str]:
        return [sys.executable, str(child), "-o", str(result)]

    req = PolicySweepRequest(workload="fake", policies=(Policy(name="faster", env={"FAKE_SHIFT": "25"}),),
                       streams=2, output_dir=tmp / "run", trials=trials, seed=2,
                       python=sys.executable, **kw)
    return req, command


def test_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    import threading

    from aorta_tui.policy.evaluator import resume_policy_sweep

    req, command = _cheap_sweep(tmp_path)
    cancel = threading.Event()
    seen: list[str] = []

    def stop_after_three(event: Any) -> None:
        if event.kind == "measurement":
            seen.append(event.name)
            if len(seen) == 3:
                cancel.set()

    first = run_policy_sweep(req, on_event=stop_after_three, cancel=cancel,
                             trial_command=command)
    assert first.status == "interrupted"
    done_before = {t["dir"]: (tmp_path / "run" / "trials" / t["dir"] / "outcome.json").read_text()
                   for t in first.report.to_json()["trials"] if t["status"] == "ok"}
    assert len(done_before) == 3

    events: list[Any] = []
    second = resume_policy_sweep(tmp_path / "run", on_event=events.append, trial_command=command)
    assert second.status == "completed" and second.exit_code == 0
    assert [t["status"] for t in second.report.to_json()["trials"]] == ["ok"] * 8
    for d, text in done_before.items():  # finished trials were kept, not re-run
        assert (tmp_path / "run" / "trials" / d / "outcome.json").read_text() == text
    started = events[0]
    assert started.kind == "run_started" and started.resumed and started.already_done == 3
    assert sum(e.kind == "trial_started" for e in events) == 5
    assert second.report.to_json()["run_id"] == first.report.to_json()["run_id"]
    assert second.report.to_json()["differences"]  # the 25-unit shift is found once all trials exist
    journal = (tmp_path / "run" / "journal.jsonl").read_text().splitlines()
    assert sum('"run_started"' in line for line in journal) == 2


def test_resume_refuses_gpu_control_without_the_flag_and_a_second_runner(tmp_path: Path) -> None:
    from aorta_tui.core.errors import RunDirError, UsageError
    from aorta_tui.policy.evaluator import resume_policy_sweep
    from aorta_tui.store.lock import RunLock

    req, command = _cheap_sweep(tmp_path)
    run_policy_sweep(req, trial_command=command)
    manifest_path = tmp_path / "run" / "sweep.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["request"]["allow_gpu_control"] = True
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match="GPU control"):
        resume_policy_sweep(tmp_path / "run", trial_command=command)
    manifest["request"]["allow_gpu_control"] = False
    manifest_path.write_text(json.dumps(manifest))
    held = RunLock(tmp_path / "run")  # the lock every run directory takes (store/run_store.py)
    held.acquire()
    try:
        with pytest.raises(RunDirError, match="another process"):
            resume_policy_sweep(tmp_path / "run", trial_command=command)
    finally:
        held.release()
    again = resume_policy_sweep(tmp_path / "run", trial_command=command)  # nothing left to run
    assert again.status == "completed"


# -- a damaged run directory is a RunDirError or a report, never a crash -------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False,
                                                                      allow_infinity=False),
              st.text(max_size=6)),
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids,
                                                                         max_size=3)),
    max_leaves=8)


def _set_path(doc: Any, path: list[Any], value: Any) -> Any:
    node = doc
    for key in path[:-1]:
        if isinstance(node, dict) and node:
            node = node[sorted(node)[key % len(node)]]
        elif isinstance(node, list) and node:
            node = node[key % len(node)]
        else:
            return doc
    if isinstance(node, dict) and node:
        node[sorted(node)[path[-1] % len(node)]] = value
    elif isinstance(node, list) and node:
        node[path[-1] % len(node)] = value
    return doc


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(which=st.sampled_from(["sweep", "outcome"]),
       path=st.lists(st.integers(0, 50), min_size=1, max_size=4), value=json_values)
def test_damaged_files_never_crash_the_report(report: dict[str, Any], tmp_path_factory: Any,
                                              which: str, path: list[int], value: Any) -> None:
    import shutil

    from aorta_tui.core.errors import RunDirError

    run = tmp_path_factory.mktemp("damaged") / "run"
    shutil.copytree(report["run_dir"], run)
    target = run / "sweep.json" if which == "sweep" else next(run.glob("trials/*/outcome.json"))
    doc = _set_path(json.loads(target.read_text()), path, value)
    target.write_text(json.dumps(doc))
    try:
        r = build_report(run)
    except RunDirError as exc:
        assert exc.render()
        return
    assert isinstance(render_markdown(r), str)


@pytest.mark.parametrize("trials", [2, 4])
def test_too_few_trials_for_an_interval_are_announced_at_the_start(tmp_path: Path, trials: int) -> None:
    req, command = _cheap_sweep(tmp_path, trials=trials)
    events: list[Any] = []
    outcome = run_policy_sweep(req, on_event=events.append, trial_command=command)
    warned = [e for e in events if e.kind == "warning" and e.code == "too_few_trials"]
    assert len(warned) == (1 if trials < comparison.MIN_SAMPLES else 0)
    if warned:
        assert events.index(warned[0]) < next(i for i, e in enumerate(events) if e.kind == "trial_started")
        assert outcome.report.to_json()["differences"] == []  # the 25-unit shift cannot be called from 2
