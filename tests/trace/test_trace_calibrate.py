"""Calibration: a probe cost hidden by timing noise is reported as unknown, not 0; the result
and its cache are typed values (trace/calibrate.py) whose writers write the untyped writer's
bytes; a damaged cache is measured again (it only saves time), never a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.trace import calibrate as cal_mod
from aorta_tui.trace.calibrate import (
    Calibration,
    CalibrationCache,
    _difference,
    calibrate,
    read_calibration_cache,
)

NS = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@given(probed=NS, base=NS)
def test_probe_cost_is_the_difference_or_none_with_a_reason(probed: float, base: float) -> None:
    reasons: dict[str, str] = {}
    cost = _difference(reasons, "cuda", probed, base)
    if probed > base:
        assert cost == probed - base and "cuda" not in reasons
    else:
        assert cost is None
        assert "not resolved" in reasons["cuda"] and "noise" in reasons["cuda"]


# -- the untyped writer, verbatim (calibrate() before the type), its measurements drawn ----------


def _old_calibrate(extra: list[str], found: list[str], libc: list[str], base: dict[str, float],
                   probed: dict[str, float], returns: dict[str, float],
                   pre_reasons: dict[str, str]) -> dict[str, Any]:
    """calibrate()'s body from ``result = ...`` to the cache write, the measuring replaced by
    drawn numbers (by name; the fake targets are ``/l``'s functions of the target's name)."""
    base, probed, returns = ({f"/l:{n}": v for n, v in d.items()} for d in (base, probed, returns))
    result: dict[str, Any] = {"push": None, "other": None, "reasons": {}, "functions": {},
                              "method": f"{cal_mod.CALLS} ctypes calls of a cheap function, best of 3, "
                                        "with minus without a counting uprobe on it"}
    result["reasons"].update(pre_reasons)  # calibration_targets(extra, result["reasons"])
    targets_ = [*libc, *found]
    for name in extra:
        if name in targets_:
            result[name] = None
    specs = {name: f"/l:{name}" for name in targets_}  # f"{p}:{fn}" of the fake targets
    pairs = {name: specs[name] for name in extra if name in targets_}
    for name, spec in specs.items():
        result[name] = _old_difference(result, name, probed[spec], base[spec])
        result["functions"][name] = spec
    for name, spec in pairs.items():
        result[f"{name}+ret"] = _old_difference(result, f"{name}+ret", returns[spec], base[spec])
    return result


def _old_difference(result: dict[str, Any], name: str, probed: float, base: float) -> float | None:
    if probed > base:
        return probed - base
    result["reasons"][name] = (f"not resolved: {probed:.0f} ns per call with the probe, {base:.0f} ns "
                               "without (timing noise larger than the probe cost)")
    return None


_names = st.lists(st.sampled_from(["cuda", "hip", "nccl", "memory"]), unique=True, max_size=3)


@st.composite
def _measurements(draw: st.DrawFn) -> tuple[Any, ...]:
    extra = draw(_names)
    found = [n for n in extra if draw(st.booleans())]
    libc = draw(st.lists(st.sampled_from(["push", "other"]), unique=True).map(
        lambda xs: [c for c in ("push", "other") if c in xs]))
    names = [*libc, *found]
    base = {n: draw(NS) for n in names}
    probed = {n: draw(NS) for n in names}
    returns = {n: draw(NS) for n in found}
    pre = {n: f"{n} not in lib" for n in extra if n not in found}
    return extra, found, libc, base, probed, returns, pre


@given(_measurements(), st.floats(0, 4e9))
def test_calibrate_writes_the_untyped_writers_result_and_cache_bytes(
        tmp_path_factory: pytest.TempPathFactory, m: tuple[Any, ...], at: float) -> None:
    extra, found, libc, base, probed, returns, pre = m
    if not libc and not found:
        return  # no target: nothing measured, nothing cached (the next test)
    old = _old_calibrate(extra, found, libc, base, probed, returns, pre)
    cache = tmp_path_factory.mktemp("cache") / "trace-calibration.json"
    with pytest.MonkeyPatch.context() as mp:
        _fake_measuring(mp, cache, extra, found, libc, base, probed, returns, pre)
        mp.setattr(cal_mod.time, "time", lambda: at)
        typed = calibrate("/bin/bpftrace", extra={n: (Path(f"/l/{n}"), "f") for n in extra})
    assert json_bytes(typed.to_json()) == json_bytes(old)
    key = f"{cal_mod.platform.release()}|/bin/bpftrace|" + "|".join(
        f"{k}=/l/{k}:f" for k in sorted(extra))
    old_cache = {"key": key, "at": at, "result": old}
    assert cache.read_bytes() == json_bytes(old_cache, indent=None)
    again = read_calibration_cache(cache)
    assert again.result == typed and json_bytes(again.to_json(), indent=None) == cache.read_bytes()


def _fake_measuring(mp: pytest.MonkeyPatch, cache: Path, extra: list[str], found: list[str],
                    libc: list[str], base: dict[str, float], probed: dict[str, float],
                    returns: dict[str, float], pre: dict[str, str]) -> None:
    def targets(ex: dict[str, Any], reasons: dict[str, str]) -> dict[str, tuple[Path, str]]:
        reasons.update(pre)
        return {n: (Path("/l"), n) for n in [*libc, *found]}

    def measure(_b: str, _t: Any, specs: dict[str, str], pairs: dict[str, str], *_a: Any) -> Any:
        by = {specs[n]: n for n in specs}  # "LIBRARY:FUNCTION" -> the target's name
        return ({s: base[by[s]] for s in specs.values()}, {s: probed[by[s]] for s in specs.values()},
                {s: returns[by[s]] for s in pairs.values()})

    mp.setattr(cal_mod, "_cache_file", lambda: cache)
    mp.setattr(cal_mod, "calibration_targets", targets)
    mp.setattr(cal_mod, "_measure", measure)


def test_functions_name_the_library_and_function_as_before(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "c.json"
    _fake_measuring(monkeypatch, cache, ["cuda"], ["cuda"], ["push"], {"push": 5.0, "cuda": 9.0},
                    {"push": 50.0, "cuda": 99.0}, {"cuda": 150.0}, {})
    result = calibrate("bt", extra={"cuda": (Path("/l/libcuda.so"), "cuDriverGetVersion")})
    assert result.functions == {"push": "/l:push", "cuda": "/l:cuda"}
    assert (result.push, result.cost("cuda"), result.cost("cuda+ret")) == (45.0, 90.0, 141.0)
    assert list(result.to_json()) == ["push", "other", "reasons", "functions", "method", "cuda",
                                      "cuda+ret"]


# -- the cache: a hit, and damage that is measured again ------------------------------------------

def _cache_doc(key: str, at: float) -> dict[str, Any]:
    result = Calibration(method="m", push=1.5, other=None, reasons={"other": "none here"},
                         functions={"push": "/libc:lfind"}, costs={"cuda": 7.0})
    return CalibrationCache(key=key, at=at, result=result).to_json()


def _key() -> str:
    return f"{cal_mod.platform.release()}|bt|"


def test_a_fresh_cache_for_the_same_key_is_the_result(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "c.json"
    cache.write_bytes(json_bytes({**_cache_doc(_key(), time.time()), "host": "n1"}, indent=None))
    monkeypatch.setattr(cal_mod, "_cache_file", lambda: cache)
    monkeypatch.setattr(cal_mod, "calibration_targets", lambda *a: pytest.fail("measured"))
    assert calibrate("bt").to_json() == _cache_doc("", 0)["result"]
    assert read_calibration_cache(cache).extra == {"host": "n1"}  # a newer writer's key kept


DAMAGED: list[tuple[str, object, str]] = [
    ("at", "today", "at: expected a finite number"),
    ("key", 3, "key: expected a string"),
    ("result", [], "result: expected an object"),
    ("result.push", "fast", "result.push: expected a finite number or null"),
    ("result.cuda", {"ns": 7}, "result.cuda: expected a finite number or null"),
    ("result.reasons", {"other": 4}, "result.reasons.other: expected a string"),
    ("-result.method", None, "result.method: missing"),
    ("-at", None, "at: expected a number, found null or nothing"),
]


@pytest.mark.parametrize(("path", "value", "message"), DAMAGED,
                         ids=[f"{p}={v!r}" for p, v, _m in DAMAGED])
def test_a_damaged_cache_is_located_and_calibrate_measures_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, value: object,
        message: str) -> None:
    doc = _cache_doc(_key(), time.time())
    *parents, last = path.lstrip("-").split(".")
    node = doc
    for k in parents:
        node = node[k]  # type: ignore[assignment]
    if path.startswith("-"):
        del node[last]
    else:
        node[last] = value
    cache = tmp_path / "c.json"
    cache.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=f"^{cache}: {message}") as caught:
        read_calibration_cache(cache)
    assert caught.value.exit_code == ExitCode.USAGE
    # the untyped reader returned a damaged result ("fast" as push's cost) to the session;
    # calibrate() now measures again, as it does without a cache
    monkeypatch.setattr(cal_mod, "_cache_file", lambda: cache)
    monkeypatch.setattr(cal_mod, "calibration_targets", lambda extra, reasons: {})
    result = calibrate("bt")
    assert result.push is None and result.costs == {}  # not the cache's 1.5 and cuda 7.0


def test_an_oversize_or_unreadable_cache_is_measured_again(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "c.json"
    with cache.open("wb") as fh:
        fh.truncate(INPUT_LIMITS["calibration cache"] + 1)  # sparse: nothing to read
    with pytest.raises(UsageError, match="limit"):
        read_calibration_cache(cache)
    monkeypatch.setattr(cal_mod, "_cache_file", lambda: cache)
    monkeypatch.setattr(cal_mod, "calibration_targets", lambda extra, reasons: {})
    for text in (None, "{", "[]"):
        if text is not None:
            cache.write_text(text)
        assert calibrate("bt").push is None  # measured (nothing to measure here), no traceback
