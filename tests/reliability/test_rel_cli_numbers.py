"""Issue 27 item 15: a trial timeout that is not a finite number of seconds above 0 is bad input.

``policy sweep --timeout-s nan`` (also -1, 0, inf, 1e309) ran (exit 70 on a real run, accepted
with --dry-run) and wrote the non-JSON ``Infinity`` into ``sweep.json``; ``policy resume`` of that
directory exited 70. The real CLI, from a fresh working directory with the default output.
"""

from __future__ import annotations

import ast
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


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
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


# -- issue 37 items 2, 4, 6: one number parser for every numeric option ----------------------

PROBE = ("schema_version: 1\nmode: probe\nticket: NUM\ntrials: 1\nmitigation_axis: [none]\n"
         "diagnostic_axis: [none]\n")
HUGE = "99999999999999999999999999"

# (what, argv before the value, the option, values refused). Each is the real CLI, in a fresh
# directory; a refusal must be exit 2 naming the option, with nothing written.
REFUSED: list[tuple[str, list[str], str, list[str]]] = [
    # item 2: accepted, then the run could never be resumed (recipe.resolved.yaml's seed)
    ("--batch --seed", ["--batch", "probe.yaml", "--no-snapshot"], "--seed",
     [HUGE, "-1", "9223372036854775808", "1.5", "nan", "٣"]),
    ("policy sweep --seed", ["policy", "sweep", *QUICK, "--dry-run"], "--seed", [HUGE, "-1"]),
    # item 4: "knee_gain": NaN written into sweep.json
    ("queue sweep --knee-gain", ["queue", "sweep", "hetero_kernels", "--streams", "2,4"],
     "--knee-gain", ["nan", "inf", "-1", "0", "1e309"]),
    # item 6: exit 70 after the run (OverflowError), or nan accepted
    ("--batch --metrics-linger", ["--batch", "probe.yaml", "--no-snapshot", "--metrics", "0"],
     "--metrics-linger", ["inf", "1e309", "1e12", "nan", "-1"]),
    ("agent --llm-timeout", ["agent", "probe.yaml"], "--llm-timeout", ["inf", "1e309", "nan", "0"]),
    ("queue compare --min-change", ["queue", "compare", "a.json", "b.json"], "--min-change",
     ["nan", "inf", "-0.5"]),
    ("trace queue --interval", ["trace", "queue", "--interval"], "--interval", ["nan", "inf"]),
]


def _refusal_cases() -> list[tuple[str, list[str], str, str]]:
    return [(what, argv, opt, v) for what, argv, opt, values in REFUSED for v in values]


@pytest.mark.parametrize(("what", "argv", "option", "value"), _refusal_cases(),
                         ids=[f"{c[0]}={c[3]}" for c in _refusal_cases()])
def test_a_numeric_option_out_of_range_is_exit_2_naming_it(
        tmp_path: Path, what: str, argv: list[str], option: str, value: str,
        attack_tally) -> None:
    (tmp_path / "probe.yaml").write_text(PROBE)
    before = sorted(p.name for p in tmp_path.iterdir())
    # the option last in argv: its value follows it; else OPTION=VALUE (a value may start with -)
    args = [*argv, value] if argv[-1] == option else [*argv, f"{option}={value}"]
    if args[0] == "--batch":
        args += ["--", "true"]
    proc = aorta(*args, cwd=tmp_path, timeout=120)
    ok = (proc.returncode == 2 and option in proc.stderr and "Traceback" not in proc.stderr
          and sorted(p.name for p in tmp_path.iterdir()) == before)
    attack_tally.record("CLI numeric options (real CLI)", cases=1, failures=int(not ok),
                        promise="exit 2 naming the option, nothing written")
    assert ok, (what, value, proc.returncode, proc.stderr[-1500:])


def test_the_largest_seed_is_accepted_and_the_run_resumes(tmp_path: Path) -> None:
    """The bound is the recipe key's: a run started with it is resumable."""
    (tmp_path / "probe.yaml").write_text(PROBE)
    proc = aorta("--batch", "probe.yaml", "--no-snapshot", "--seed", "9223372036854775807",
                 "--", "true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    from tests.engine_support import only_run_dir

    run_dir = only_run_dir(tmp_path / "aorta-out")
    again = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("host", ["a" * 300, "a" * 64 + ".example", "x." * 130 + "y"])
def test_a_metrics_host_no_resolver_takes_is_a_located_exit_2(tmp_path: Path, host: str) -> None:
    """``--metrics "<300 characters>:0"`` was exit 70 (UnicodeError from the idna codec)."""
    (tmp_path / "probe.yaml").write_text(PROBE)
    proc = aorta("--batch", "probe.yaml", "--no-snapshot", "--metrics", f"{host}:0", "--", "true",
                 cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--metrics" in proc.stderr and "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr
    assert not (tmp_path / "aorta-out").exists()


_BOUNDS = st.tuples(st.sampled_from([None, -1.0, 0.0, 1.0]), st.sampled_from([None, 0.0, 0.5]),
                    st.sampled_from([1.0, 100.0, 2.0**63 - 1]), st.booleans())


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=600, deadline=None)
@given(st.one_of(st.text(max_size=50), st.floats(allow_nan=True, allow_infinity=True),
                 st.integers(min_value=-10**400, max_value=10**400),
                 st.from_regex(r"\A-?[0-9]{1,30}(\.[0-9]*)?(e[-+]?[0-9]{1,4})?\Z")),
       _BOUNDS)
def test_the_one_number_parser_gives_a_number_in_range_or_a_usage_error(
        attack_tally, value: object, bounds: tuple) -> None:
    from aorta_tui.cli.common import number

    above, at_least, at_most, integer = bounds
    parse = number(integer=integer, above=above, at_least=at_least, at_most=at_most)
    try:
        got = parse(value)
    except typer.BadParameter as exc:
        ok = len(str(exc)) < 300  # a 400-digit value is clipped in the message
    except Exception:  # anything else escapes to the user as exit 70
        ok = False
    else:
        ok = (isinstance(got, int) if integer else isinstance(got, float)) and math.isfinite(got)
        ok = ok and got <= at_most and (above is None or got > above)
        ok = ok and (at_least is None or got >= at_least)
        ok = ok and json.loads(json.dumps(got)) == got
    attack_tally.record("CLI number parser (hypothesis)", cases=1, failures=int(not ok),
                        promise="a finite int/float in range (strict JSON) or a usage error")
    assert ok, (value, bounds)


def _float_options(path: Path) -> list[tuple[int, ast.Call]]:
    """(line, the typer.Option call) of every parameter annotated float in ``path``; a default
    named by a module constant (``METRICS_LINGER_OPT``) is looked up in any command module."""
    tree = ast.parse(path.read_text())
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        args = fn.args
        pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        for arg, default in pairs:
            if arg.annotation is None or "float" not in ast.unparse(arg.annotation):
                continue
            call = _CONSTANTS.get(default.id) if isinstance(default, ast.Name) else default
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "typer.Option":
                out.append((arg.lineno, call))
    return out


_CLI = Path(__file__).resolve().parents[2] / "aorta_tui" / "cli"
_CONSTANTS = {t.id: node.value for path in sorted(_CLI.glob("*.py"))
              for node in ast.parse(path.read_text()).body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)}


def test_every_float_option_goes_through_the_one_parser() -> None:
    """A float option without ``parser=`` takes nan, inf and 1e309 again (click's ``min=`` lets
    nan through): the rule, over every command module."""
    found, missing = 0, []
    for path in sorted(_CLI.glob("*.py")):
        for line, call in _float_options(path):
            found += 1
            if not any(k.arg == "parser" for k in call.keywords):
                missing.append(f"{path.name}:{line}")
    assert found >= 8, found  # the rule sees the options (--timeout-s, --knee-gain, ...)
    assert not missing, f"float options without the one parser (cli/common.number): {missing}"
