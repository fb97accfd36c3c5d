from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.trace import probes, program
from aorta_tui.trace.hdr import bucket_index_scalar
from aorta_tui.trace.probes.base import Instance, ProbeDetection


def test_bucket_statements_match_the_python_histogram_in_real_bpftrace(bpftrace: str) -> None:
    """The in-kernel (aggregate mode) bucket of a value is the one hdr.py computes."""
    vals = [0, 1, 15, 16, 17, 31, 32, 1000, 4095, 4096, 123_456, 999_999, 10**9, 2**40 + 12345]
    body = " ".join(f'{program.bucket_statements(str(v))} printf("%lld %lld\\n", (int64){v}, (int64)$b);'
                    for v in vals)
    out = subprocess.run([bpftrace, "-e", f"BEGIN {{ {body} exit(); }}"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = dict(tuple(map(int, ln.split())) for ln in out.stdout.splitlines() if ln and ln[0].isdigit())
    assert got == {v: bucket_index_scalar(v) for v in vals}


def _det(params: dict[str, str]) -> list:
    ps = probes.get("cuda")
    return [(ps, ProbeDetection("cuda", True, instances=[Instance("launch", params)]))]


def test_parameters_are_validated(tmp_path: Path) -> None:
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"")
    ok = {"lib": str(lib), "symbol": "cuLaunchKernel", "stream": "arg1", "kind": "0"}
    text = program.render(_det(ok), mode="events", pid=123).text
    assert f"uprobe:{lib}:cuLaunchKernel /pid == 123/" in text
    bad_cases = [
        {**ok, "lib": str(tmp_path / "no such.so")},
        {**ok, "lib": str(tmp_path / "missing.so")},
        {**ok, "symbol": "cuLaunch; system(\"x\")"},
        {**ok, "stream": "arg1; } BEGIN { system(\"id\")"},
        {**ok, "kind": "1 + 1"},
    ]
    for bad in bad_cases:
        with pytest.raises(UsageError):
            program.render(_det(bad), mode="events", pid=None)


def test_events_and_aggregate_programs_differ_in_emission(tmp_path: Path) -> None:
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"")
    ok = {"lib": str(lib), "symbol": "cuLaunchKernel", "stream": "arg1", "kind": "0"}
    ev = program.render(_det(ok), mode="events", pid=None)
    ag = program.render(_det(ok), mode="aggregate", pid=None, interval_s=0.5)
    assert 'printf("@R 1 ' in ev.text and "@n[1," not in ev.text
    assert "@n[1," in ag.text and 'printf("@R' not in ag.text
    assert "interval:ms:500" in ag.text and "print(@n);" in ag.text
    assert ev.uprobe_count == 1 and ev.metric_ids[1][1].name == "launch"
    with pytest.raises(UsageError):
        program.render(_det(ok), mode="sometimes", pid=None)


@given(st.text(min_size=1, max_size=40))
def test_no_parameter_can_smuggle_statements_into_a_program(value: str) -> None:
    """Whatever text arrives (a path, a field name from a format file), it cannot end a probe
    block, start another one or add a statement."""
    for name in ("symbol", "stream", "group", "kind", "label"):
        try:
            out = program.validate_param(name, value)
        except UsageError:
            continue
        assert out == value
        assert not any(ch in out for ch in ";{}\n/") or name == "lib"


def test_events_records_put_literals_in_the_format_and_pad_after_heartbeats(tmp_path: Path) -> None:
    """Fewer printf arguments per record (bpftrace formats each one in user space) and, with
    bpftrace's block-buffered output, a padding line after every heartbeat longer than its
    4096-byte buffer, so a heartbeat is written at once at any rate."""
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"")
    ok = {"lib": str(lib), "symbol": "cuLaunchKernel", "stream": "arg1", "kind": "5"}
    text = program.render(_det(ok), mode="events", pid=None).text
    assert 'printf("@R 1 %lld %d %d %lld 0 5 -\\n", (int64)(nsecs), pid, tid, (int64)($s));' in text
    hb = next(ln for ln in text.splitlines() if ln.startswith("interval:ms:"))
    end = next(ln for ln in text.splitlines() if ln.startswith("END "))
    for ln in (hb, end):
        assert ln.index('printf("@H') < ln.index('printf("@P ')
        assert ln.count(".") >= 4096
    assert "@P " not in program.render(_det(ok), mode="aggregate", pid=None).text


def test_a_literal_timestamp_and_a_label_keep_the_field_order() -> None:
    m = probes.get("cuda").metric("launch")
    got = program._expand_emit(["launch", "7", "$s", "$d", "3", "$lab"], 4, m, "events")
    assert got.endswith('printf("@R 4 7 %d %d %lld %lld 3 %s\\n", pid, tid, (int64)($s), (int64)($d), $lab);')
