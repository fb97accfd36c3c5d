"""Issue 27 item 15: a trial timeout that is not a finite number of seconds above 0 is bad input.

``policy sweep --timeout-s nan`` (also -1, 0, inf, 1e309) ran (exit 70 on a real run, accepted
with --dry-run) and wrote the non-JSON ``Infinity`` into ``sweep.json``; ``policy resume`` of that
directory exited 70. The real CLI, from a fresh working directory with the default output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.cli.common import seconds
from tests.engine_support import aorta

BAD = ["nan", "-1", "0", "inf", "1e309", "-inf", "NaN", "abc", ""]
QUICK = ["hetero_kernels", "--policies", "baseline", "--trials", "1", "--streams", "2",
         "--iterations", "3", "--warmup", "1", "--device", "cpu", "--size", "tiny"]


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_policy_sweep_refuses_a_timeout_that_is_not_finite_and_positive(
        tmp_path: Path, value: str, dry_run: bool) -> None:
    proc = aorta("policy", "sweep", *QUICK, "--timeout-s", value,
                 *(["--dry-run"] if dry_run else []), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--timeout-s" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "aorta-policy").exists()  # nothing written


def test_policy_resume_of_a_sweep_json_holding_infinity_is_a_located_exit_2(tmp_path: Path) -> None:
    """A directory an older aorta-tui wrote with ``--timeout-s inf``: refused, never exit 70."""
    pytest.importorskip("torch")
    proc = aorta("policy", "sweep", *QUICK, "--timeout-s", "30", "-o", "pol", cwd=tmp_path,
                 timeout=300)
    assert proc.returncode == 0, proc.stderr
    manifest = tmp_path / "pol" / "sweep.json"
    text = manifest.read_text()
    assert '"timeout_s": 30.0' in text
    for bad in ("Infinity", "NaN", "-1", "0"):
        manifest.write_text(text.replace('"timeout_s": 30.0', f'"timeout_s": {bad}'))
        for cmd in (("policy", "resume", "pol"), ("policy", "report", "pol")):
            res = aorta(*cmd, cwd=tmp_path)
            assert res.returncode == 2, (bad, cmd, res.stderr)
            assert "sweep.json" in res.stderr and "request.timeout_s" in res.stderr, res.stderr
            assert "Traceback" not in res.stderr and "internal error" not in res.stderr


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=30), st.floats(allow_nan=True, allow_infinity=True),
                 st.integers(min_value=-10**400, max_value=10**400)))
def test_the_seconds_parser_gives_a_finite_number_in_range_or_a_usage_error(
        attack_tally, value: object) -> None:
    parse = seconds()
    try:
        got = parse(value)
    except typer.BadParameter:
        ok = True
    except Exception:  # OverflowError (an int too large for a float) escaped once
        ok = False
    else:
        ok = math.isfinite(got) and 0 < got <= 366 * 86400 and json.loads(json.dumps(got)) == got
    attack_tally.record("CLI seconds parser (hypothesis)", cases=1, failures=int(not ok),
                        promise="a finite number in range (strict JSON) or a usage error")
    assert ok, value


@pytest.mark.parametrize("value", ["nan", "inf", "1e309"])
def test_env_probe_refuses_a_timeout_that_is_not_finite(tmp_path: Path, value: str) -> None:
    """``env probe --timeout nan`` wrote an empty snapshot (min=1.0 let nan through)."""
    proc = aorta("env", "probe", "--no-torch", "--timeout", value, "-o", "env.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--timeout" in proc.stderr and not (tmp_path / "env.json").exists()
