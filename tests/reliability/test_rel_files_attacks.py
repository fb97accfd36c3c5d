"""Issue 12 item 6, one test per reproduced attack on an input file: each was an internal error
(exit 70) or a hang through the real CLI; each must now be a located message with exit 2 (a
bad file) or exit 3 (the machine: a root-only tracefs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"
H200 = FIX / "envsnap" / "h200.json"
RUN = FIX / "hwqueue" / "run-cpu.json"
SWEEP = FIX / "hwqueue" / "sweep-cpu.json"


def cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], cwd=cwd, timeout=timeout,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)


def assert_located(proc: subprocess.CompletedProcess[str], *needles: str, code: int = 2) -> None:
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def damaged(tmp: Path, source: Path, edit: object) -> Path:
    doc = json.loads(source.read_text())
    edit(doc)  # type: ignore[operator]
    out = tmp / f"damaged-{source.name}"
    out.write_text(json.dumps(doc))
    return out


def test_queue_compare_of_a_non_utf8_file(tmp_path: Path) -> None:
    bad = tmp_path / "ff.json"
    bad.write_bytes(b"\xff{}")
    assert_located(cli("queue", "compare", str(bad), str(RUN), cwd=tmp_path),
                   f"{bad}:1:1", "not UTF-8", "0xff")


def test_queue_result_without_workload(tmp_path: Path) -> None:
    bad = damaged(tmp_path, RUN, lambda d: d.pop("workload"))
    assert_located(cli("queue", "compare", str(RUN), str(bad), cwd=tmp_path),
                   str(bad), "workload: missing")


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("summary", [], "summary: expected an object, found an array"),
    ("config", {"streams": "8"}, "config.streams: expected an integer, found a string"),
    ("samples", {"iteration_period_ms": [1.0, "x"]},
     "samples.iteration_period_ms[1]: expected a finite number"),
    ("summary_better", {"throughput": "up"}, "summary_better.throughput: expected higher"),
    ("repeats", {"count": 3, "summaries": [1, 2, 3]}, "repeats.summaries[0]: expected an object"),
])
def test_queue_result_fields_of_the_wrong_type(tmp_path: Path, field: str, value: object,
                                               needle: str) -> None:
    bad = damaged(tmp_path, RUN, lambda d: d.__setitem__(field, value))
    assert_located(cli("queue", "compare", str(bad), str(RUN), cwd=tmp_path), str(bad), needle)


def test_queue_sweep_with_a_damaged_point(tmp_path: Path) -> None:
    bad = damaged(tmp_path, SWEEP, lambda d: d["points"][1]["summary"].__setitem__("wall_s", "1"))
    assert_located(cli("queue", "compare", str(SWEEP), str(bad), cwd=tmp_path),
                   str(bad), "points[1].summary.wall_s: expected a finite number")
    bad = damaged(tmp_path, SWEEP, lambda d: d.__setitem__("points", {"1": {}}))
    assert_located(cli("queue", "compare", str(bad), str(SWEEP), cwd=tmp_path),
                   "points: expected an array")


def test_env_summary_of_a_snapshot_whose_host_is_a_list(tmp_path: Path) -> None:
    bad = damaged(tmp_path, H200, lambda d: d.__setitem__("host", [1, 2]))
    assert_located(cli("env", "summary", str(bad), cwd=tmp_path),
                   str(bad), "host: expected an object of fields, found an array")
    bad = damaged(tmp_path, H200, lambda d: d["gpus"].__setitem__(0, "gpu"))
    assert_located(cli("env", "summary", str(bad), cwd=tmp_path), "gpus[0]: expected a GPU object")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("kind", ["snapshot", "queue result", "policy file"])
def test_200k_nested_brackets(tmp_path: Path, kind: str) -> None:
    deep = tmp_path / ("deep.yaml" if kind == "policy file" else "deep.json")
    deep.write_text("[" * 200_000)
    args = {"snapshot": ["env", "diff", str(deep), str(H200)],
            "queue result": ["queue", "compare", str(deep), str(RUN)],
            "policy file": ["policy", "list", "--policy-file", str(deep)]}[kind]
    assert_located(cli(*args, cwd=tmp_path), str(deep), "nest")


@pytest.mark.parametrize("args", [
    ["env", "diff", "/dev/zero", str(H200)],
    ["policy", "list", "--policy-file", "/dev/zero"],
    ["policy", "sweep", "tiny_kernel_stress", "--policy-file", "/dev/zero", "--dry-run"],
    ["queue", "compare", "/dev/zero", str(RUN)],
])
def test_dev_zero_is_refused_not_read(tmp_path: Path, args: list[str]) -> None:
    assert_located(cli(*args, cwd=tmp_path, timeout=30), "/dev/zero is a character device")


@pytest.mark.parametrize("which", ["snapshot", "policy file", "queue result"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, which: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # no writer ever opens it: an open() for reading would wait forever
    args = {"snapshot": ["env", "summary", str(fifo)],
            "policy file": ["policy", "list", "--policy-file", str(fifo)],
            "queue result": ["queue", "compare", str(fifo), str(RUN)]}[which]
    assert_located(cli(*args, cwd=tmp_path, timeout=30), str(fifo), "FIFO")


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    from aorta_tui.core.inputs import INPUT_LIMITS

    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(INPUT_LIMITS["snapshot"] + 1)  # sparse
    assert_located(cli("env", "summary", str(big), cwd=tmp_path), str(big), "over the 16.0 MiB limit")


def test_a_5000_digit_integer_and_an_infinite_number(tmp_path: Path) -> None:
    bad = tmp_path / "long.json"
    bad.write_text('{"kind": "aorta-tui/queue-result", "schema_version": ' + "9" * 5000 + "}")
    assert_located(cli("queue", "compare", str(bad), str(RUN), cwd=tmp_path), "4300 digits")
    inf = damaged(tmp_path, RUN, lambda d: d["summary"].__setitem__("throughput", 123456789))
    inf.write_text(inf.read_text().replace("123456789", "1e400", 1))
    assert_located(cli("queue", "compare", str(inf), str(RUN), cwd=tmp_path),
                   "summary.throughput: expected a finite number")


def test_policy_report_screen_refuses_a_damaged_report(tmp_path: Path) -> None:
    from aorta_tui.core.errors import UsageError
    from aorta_tui.tui.screens.policy import check_report_shape

    with pytest.raises(UsageError, match=r"policies\[0\]\.metrics: expected an object"):
        check_report_shape({"kind": "aorta-tui/policy-report", "policies": [
            {"name": "baseline", "metrics": []}]}, "policy.json")


def test_profiler_trace_of_the_wrong_shape(tmp_path: Path) -> None:
    from aorta_tui.core.errors import UsageError
    from aorta_tui.trace.cupti_join import load_profiler_trace

    bad = tmp_path / "trace.json"
    bad.write_text(json.dumps({"traceEvents": [{"cat": "kernel", "name": "k", "ts": "soon"}]}))
    with pytest.raises(UsageError, match=r"traceEvents\[0\]\.ts: expected a finite number"):
        load_profiler_trace(bad)


# -- non-root `trace info` / `trace queue`: a root-only tracefs is exit 3, not a traceback ---

NOBODY = "65534"
TRACEFS = Path("/sys/kernel/tracing")


def _tracefs_is_root_only() -> bool:
    try:
        return TRACEFS.is_dir() and not TRACEFS.stat().st_mode & 0o005
    except OSError:
        return False


def _as_nobody(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The venv's interpreter lives under /root (0700): nobody runs the system python3 with the
    # venv's site-packages (same 3.11 ABI) and the checkout on its path; both are world-readable.
    site = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
    os.chmod(tmp, 0o777)
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "env", f"PYTHONPATH={site}:{REPO}", f"HOME={tmp}", SYSTEM_PYTHON,
         "-m", "aorta_tui", *args],
        cwd=tmp, capture_output=True, text=True, timeout=120)


SYSTEM_PYTHON = "/usr/bin/python3"


def _system_python_matches() -> bool:
    if not os.path.exists(SYSTEM_PYTHON):
        return False
    out = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() == str(tuple(sys.version_info[:2]))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None
                    or not _system_python_matches() or not _tracefs_is_root_only(),
                    reason="needs root, setpriv, a system python of this version and a "
                           "root-only tracefs to run the CLI as a real non-root user")
@pytest.mark.parametrize("args", [["trace", "info"], ["trace", "info", "--json"],
                                  ["trace", "queue", "--", "true"]])
def test_nonroot_trace_says_what_needs_root(tmp_path: Path, args: list[str]) -> None:
    proc = _as_nobody(tmp_path, *args)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout and "internal error" not in proc.stderr
    assert "needs root" in proc.stderr or "need root" in proc.stderr, proc.stderr
    assert "sudo" in proc.stderr


def test_a_sample_list_too_long_to_bootstrap_is_refused_not_a_hang(tmp_path: Path) -> None:
    from aorta_tui.hwqueue.compare import MAX_BOOTSTRAP_SAMPLES

    many = [1.0 + i % 7 for i in range(MAX_BOOTSTRAP_SAMPLES + 1)]
    bad = damaged(tmp_path, RUN, lambda d: d["samples"].__setitem__("iteration_period_ms", many))
    proc = cli("queue", "compare", str(RUN), str(bad), cwd=tmp_path, timeout=60)
    assert_located(proc, "TEST: samples.iteration_period_ms holds 100001 samples")
