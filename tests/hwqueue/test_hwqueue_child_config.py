"""The fresh-process queue run (`python -m aorta_tui.hwqueue.child CONFIG RESULT`) reads its
config as an input file: a damaged one is a located exit 2, never a traceback (it was
``QueueRunConfig(**json.load(fh))``: exit 70 on a missing field, an array or a cut file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(("body", "needle"), [
    ("", "the queue run config file is empty"),
    ("[1]", "expected an object, found an array"),
    ('{"workload": "hetero_kernels"}', "streams: missing"),
    ('{"workload": "hetero_kernels", "streams": 2, "nope": 1}', "'nope': not a queue run option"),
    ('{"workload": "hetero_kernels", "streams": "2"}', "streams: expected an integer, found a string '2'"),
    ('{"workload":', "not valid JSON"),
    ("\xff", "UTF-8"),
])
def test_a_damaged_config_is_a_located_exit_2(tmp_path: Path, body: str, needle: str) -> None:
    config = tmp_path / "cfg.json"
    config.write_bytes(body.encode("latin-1"))
    proc = subprocess.run([sys.executable, "-m", "aorta_tui.hwqueue.child", str(config), str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and str(config) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists()
