"""The matrix's device line names the host snapshot's GPUs, read through the snapshot's type
(envsnap/doc.py): the H200's and a CPU box's snapshots, and a damaged one ("unknown", never a
failed report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aorta_tui.sweep.matrix_report import _device_line, device_summary

FIXTURES = Path(__file__).parents[1] / "fixtures" / "envsnap"


def _run_with(tmp_path: Path, snapshot: bytes | None) -> Path:
    (tmp_path / "env").mkdir()
    if snapshot is not None:
        (tmp_path / "env" / "host_env.json").write_bytes(snapshot)
    return tmp_path


@pytest.mark.parametrize(("fixture", "says"), [
    ("h200.json", "host snapshot: 1 GPU(s), NVIDIA H200"),
    ("cpu-box.json", "host snapshot: no GPU"),
])
def test_the_host_snapshots_gpus_are_named(tmp_path: Path, fixture: str, says: str) -> None:
    run = _run_with(tmp_path, (FIXTURES / fixture).read_bytes())
    assert says in _device_line(device_summary(run, []), 0)


@pytest.mark.parametrize("damage", [b"{", b"[]", b'{"gpus": [1]}', None])
def test_no_or_a_damaged_snapshot_is_unknown(tmp_path: Path, damage: bytes | None) -> None:
    run = _run_with(tmp_path, damage)
    assert device_summary(run, []).host_gpus is None
    assert "host snapshot: unknown" in _device_line(device_summary(run, []), 0)


def test_a_gpu_without_a_name_is_an_unnamed_gpu(tmp_path: Path) -> None:
    text = (FIXTURES / "h200.json").read_text()
    assert text.count('"name": {') == 1  # the one GPU's name field, renamed below
    run = _run_with(tmp_path, text.replace('"name": {', '"gpu_name": {').encode())
    assert device_summary(run, []).host_gpus == ("unnamed GPU",)
