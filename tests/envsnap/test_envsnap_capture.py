"""Capture on this machine: shape, schema, values against the OS, the hash, and the torch
child process under a hanging, a broken and a missing torch (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from envsnap_helpers import FIXTURES, REPO

from aorta_tui.envsnap import (
    capture_snapshot,
    diff_snapshots,
    load_snapshot,
    snapshot_hash,
    validate,
)
from aorta_tui.envsnap.capture.env_vars import KNOBS, capture_env_vars
from aorta_tui.envsnap.capture.gpus import detect_vendors
from aorta_tui.envsnap.capture.torch_probe import TORCH_KEYS
from aorta_tui.envsnap.schema import iter_leaves

SCHEMA = json.loads((REPO / "aorta_tui" / "envsnap" / "schema.json").read_text())


@pytest.fixture(scope="module")
def live() -> dict:
    """A capture on this machine, as the file holds it (``to_json``: what is written)."""
    return capture_snapshot(include_torch=False, timeout_s=20).to_json()


def probe_cli(tmp: Path, *extra: str, env: dict | None = None, timeout: float = 60) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp / f"snap-{time.monotonic_ns()}.json"
    proc = subprocess.run([sys.executable, "-m", "aorta_tui.envsnap", "--output", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, **(env or {})})
    return proc, out


def test_live_snapshot_matches_schema(live: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validate(live)
    jsonschema.validate(live, SCHEMA)
    for name in ("h200.json", "cpu-box.json"):
        jsonschema.validate(json.loads((FIXTURES / name).read_text()), SCHEMA)


def test_schema_rejects_a_leaf_without_state(live: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    broken = json.loads(json.dumps(live))
    del broken["host"]["kernel_release"]["state"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_every_leaf_has_a_state_and_a_reason_when_not_ok(live: dict) -> None:
    leaves = list(iter_leaves(live))
    assert len(leaves) > 400
    for path, leaf in leaves:
        assert leaf["state"] in ("ok", "not_applicable", "unknown", "error"), path
        if leaf["state"] != "ok":
            assert leaf["value"] is None and leaf["reason"], path


def test_keys_are_sorted_at_every_level(live: dict) -> None:
    assert json.dumps(live) == json.dumps(live, sort_keys=True)
    assert list(live) == sorted(live)
    assert list(live["env_vars"]) == sorted(live["env_vars"])


def test_host_values_are_the_machines(live: dict) -> None:
    host = live["host"]
    assert host["kernel_release"]["value"] == os.uname().release
    assert host["cpu_logical_cores"]["value"] == os.cpu_count()
    assert host["cpu_affinity_cores"]["value"] == len(os.sched_getaffinity(0))
    with open("/proc/meminfo") as fh:
        kib = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    assert host["memory_total_bytes"]["value"] == kib * 1024
    assert host["glibc"]["value"] == os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    assert live["python"]["version"]["value"] == ".".join(map(str, sys.version_info[:3]))


@pytest.mark.skipif(bool(detect_vendors()), reason="this machine has a GPU driver")
def test_a_cpu_box_says_why_there_are_no_gpus(live: dict) -> None:
    assert live["gpus"] == []
    count = live["driver"]["gpu_count"]
    assert count["state"] == "not_applicable" and "/proc/driver/nvidia" in count["reason"]
    assert live["driver"]["nvidia_version"]["state"] == "not_applicable"
    assert live["rocm"]["gfx_targets"]["state"] == "not_applicable"
    assert live["torch"]["version"]["state"] == "not_applicable"  # include_torch=False
    assert "skipped" in live["torch"]["version"]["reason"]


def test_env_vars_record_unset_ones_and_categories() -> None:
    empty = capture_env_vars({})
    assert set(empty) == set(KNOBS) and all(v["value"] is None and v["set"] is False for v in empty.values())
    one = capture_env_vars({"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "UNRELATED": "x"})
    assert one["CUBLAS_WORKSPACE_CONFIG"] == {
        "value": ":4096:8", "state": "ok", "source": "env:CUBLAS_WORKSPACE_CONFIG", "set": True,
        "category": "determinism"}
    assert "UNRELATED" not in one


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_hash_is_stable_and_sees_the_environment_the_process_ran_in(tmp_path: Path) -> None:
    # The sweep's path: a process started with an environment's variables writes the snapshot.
    first, a = probe_cli(tmp_path, "--no-torch")
    second, b = probe_cli(tmp_path, "--no-torch")
    third, c = probe_cli(tmp_path, "--no-torch", env={"NVIDIA_TF32_OVERRIDE": "0"})
    assert first.returncode == second.returncode == third.returncode == 0, first.stderr
    snaps = [load_snapshot(p) for p in (a, b, c)]
    assert snapshot_hash(snaps[0]) == snapshot_hash(snaps[1])
    assert first.stdout.split()[-1] == snapshot_hash(snaps[0])
    assert snapshot_hash(snaps[2]) != snapshot_hash(snaps[0])
    assert snaps[2].env_vars["NVIDIA_TF32_OVERRIDE"].value == "0"
    report = diff_snapshots(snaps[0], snaps[2])
    assert [(e.path, e.rank) for e in report.entries] == [("env_vars.NVIDIA_TF32_OVERRIDE", "numerics")]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temp file


def _fake_torch(tmp: Path, body: str) -> dict:
    pkg = tmp / "faketorch" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return {"PYTHONPATH": f"{pkg.parent}{os.pathsep}{REPO}"}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_hanging_torch_import_is_killed_at_the_deadline(tmp_path: Path) -> None:
    pidfile = tmp_path / "torch.pid"
    env = _fake_torch(tmp_path, f"""
        import os, time
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """)
    t0 = time.monotonic()
    proc, out = probe_cli(tmp_path, "--timeout", "3", env=env)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 30  # generous: the point is that it returned instead of hanging
    torch = load_snapshot(out).torch
    assert set(TORCH_KEYS) <= set(torch)
    assert torch["version"].state == "error" and "did not finish" in torch["version"].reason
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_broken_torch_is_an_error_with_its_message(tmp_path: Path) -> None:
    env = _fake_torch(tmp_path, 'raise RuntimeError("CUDA driver version is insufficient")\n')
    proc, out = probe_cli(tmp_path, env=env)
    assert proc.returncode == 0
    torch = load_snapshot(out).torch
    for key in TORCH_KEYS:
        assert torch[key].state == "error", key
    assert "RuntimeError: CUDA driver version is insufficient" in torch["version"].reason


def test_a_missing_torch_is_not_applicable(tmp_path: Path) -> None:
    env = _fake_torch(tmp_path, 'raise ModuleNotFoundError("No module named \'torch\'")\n')
    proc, out = probe_cli(tmp_path, env=env)
    assert proc.returncode == 0
    version = load_snapshot(out).torch["version"]
    assert version.state == "not_applicable" and "No module named" in version.reason


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_real_torch_is_captured_in_a_child_process(tmp_path: Path) -> None:
    from importlib import metadata

    try:
        expected = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed in this environment")
    code = ("import sys, json; from aorta_tui.envsnap import capture_snapshot; "
            "s = capture_snapshot(include_torch=True).to_json(); "
            "print(json.dumps({'version': s['torch']['version'], 'torch_loaded': 'torch' in sys.modules, "
            "'threads': s['torch']['num_threads']['value']}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    data = json.loads(proc.stdout)
    assert data["version"]["state"] == "ok" and data["version"]["value"] == expected
    assert data["torch_loaded"] is False  # imported in the child, never in the probe
    assert isinstance(data["threads"], int) and data["threads"] >= 1


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_section_that_blocks_forever_costs_only_its_own_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import aorta_tui.envsnap.capture as capture_mod

    release = threading.Event()
    monkeypatch.setattr(capture_mod.host, "capture_host", lambda _t: release.wait(60))
    t0 = time.monotonic()
    snap = capture_mod.capture_snapshot(include_torch=False, timeout_s=2)
    elapsed = time.monotonic() - t0
    release.set()
    assert elapsed < 10
    assert snap.host["kernel_release"].state == "error"
    assert "did not finish before the deadline" in snap.host["kernel_release"].reason
    assert snap.python["version"].state == "ok"  # the other sections are intact


def test_capture_never_raises_even_when_a_section_breaks(monkeypatch: pytest.MonkeyPatch) -> None:
    import aorta_tui.envsnap.capture as capture_mod

    def broken(*_a, **_k):
        raise OSError("simulated failure inside a section")

    monkeypatch.setattr(capture_mod.libraries, "ldconfig_dirs", broken)
    snap = capture_mod.capture_snapshot(include_torch=False)
    assert snap.probe["internal_error"].state == "error"
    assert "simulated failure" in snap.probe["internal_error"].reason
    assert snap.host is None and snap.gpus is None  # only the probe section, saying why
