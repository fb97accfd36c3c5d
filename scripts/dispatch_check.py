"""Issue 13's proofs on a GPU machine: ground truth, exact counts, the collector's build.

    sudo python3 scripts/dispatch_check.py --out DIR [--stages build,backlog,nobacklog,counts,paced,queue,profiler]

``queue``: `queue run --ebpf-trace` with the collector (timing auto and cupti); ``profiler``: a
program that runs its own torch.profiler (CUDA activities) under the collector.

Every check runs the real CLI (`aorta-tui trace queue --probes cuda --device-timestamps on`)
over a real CUDA program in scripts/dispatch/, and compares what the trace reports with an
independent reference: the sleep kernel's length timed by CUDA events (backlog), the launches the
eBPF uprobes counted (counts). Writes DIR/dispatch-check.md and one JSON per stage.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AT = [sys.executable, "-m", "aorta_tui"]


def trace(out: Path, name: str, program: list[str], *extra: str, python: bool = True,
          ) -> tuple[dict, dict, list[dict], float]:
    result, raw = out / f"{name}.json", out / f"{name}.raw.jsonl.gz"
    t0 = time.monotonic()
    proc = subprocess.run([*AT, "trace", "queue", "--probes", "cuda", "--device-timestamps", "on",
                           "--no-calibrate", "-o", str(result), "--raw", str(raw), *extra, "--",
                           *([sys.executable] if python else []), *program],
                          capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    (out / f"{name}.stderr.txt").write_text(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: trace queue exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    prog = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    res = json.loads(result.read_text())
    with gzip.open(raw, "rt") as fh:
        records = [json.loads(ln) for ln in fh if ln.strip()]
    return prog, res, records, wall


def device_summary(res: dict) -> dict:
    return res["probe_sets"]["cuda"]["device_timestamps"]


def pct(vals: list[float], q: float) -> float:
    """Nearest rank, the trace's convention (``aorta_tui.core.stats``; a hand-written
    ``round(q/100*n + 0.5)`` rounded half to even and answered the next rank up for 50 of 10)."""
    from aorta_tui.core.stats import percentile

    return percentile(vals, q, method="nearest")


def stage_backlog(out: Path, rows: list[str]) -> bool:
    prog, res, recs, _ = trace(out, "backlog", [str(HERE / "dispatch" / "backlog.py"), "--tiny", "100",
                                                "--sleep-ms", "10"])
    L = prog["sleep_ns"]
    mine = sorted((r for r in recs if r["metric"] == "launch_to_start" and r["key"] == prog["stream"]
                   and r["ts_ns"] >= prog["marker_ns"]), key=lambda r: r["ts_ns"])
    dev = device_summary(res)
    unc = dev["clock"]["uncertainty_ns"] or 0
    ok = len(mine) == prog["tiny"] + 1
    rows.append(f"| backlog: records in the measured section | {len(mine)} | {prog['tiny'] + 1} (sleep + tiny) | {'PASS' if ok else 'FAIL'} |")
    if len(mine) < 2:
        return False
    sleep, tiny = mine[0], mine[1:]
    bounds = [L - (r["ts_ns"] - sleep["ts_ns"]) for r in tiny]
    delays = [r["value"] for r in tiny]
    below = [(d, b) for d, b in zip(delays, bounds, strict=True) if d < b - unc - 1000]
    rows.append(f"| backlog: tiny kernels below L - launch offset (tolerance: clock ±{unc} ns + 1 us) | {len(below)} | 0 | {'PASS' if not below else 'FAIL'} |")
    # the sleep itself started `sleep.value` after its launch, so every tiny kernel waits that long more
    expected = [b + sleep["value"] for b in bounds]
    p50, p50_exp = statistics.median(delays), statistics.median(expected)
    rel = (p50 - p50_exp) / p50_exp
    rows.append(f"| backlog: p50 launch->start vs CUDA-event expectation (L = {L / 1e6:.3f} ms) | {p50 / 1e6:.3f} ms | {p50_exp / 1e6:.3f} ms ({rel:+.2%}) | {'PASS' if abs(rel) <= 0.05 else 'FAIL'} |")
    queued = [r["value"] for r in sorted(recs, key=lambda r: r["ts_ns"]) if r["metric"] == "queued"
              and r["key"] == prog["stream"] and r["ts_ns"] >= prog["marker_ns"]]
    # in launch order each tiny launch finds one more kernel waiting than the one before it (the
    # first may find the sleep not started yet): steps of 0 or 1, ending at tiny-1 or tiny
    steps = [b - a for a, b in zip(queued, queued[1:], strict=False)]
    qok = bool(queued) and set(steps) <= {0, 1} and queued[-1] >= prog["tiny"] - 1
    rows.append(f"| backlog: queued kernels seen by each launch | 0..{max(queued, default=0)} | 0..{prog['tiny']} | {'PASS' if qok else 'FAIL'} |")
    hist = res["probe_sets"]["cuda"]["metrics"]["launch_to_start"]["histogram"]["percentiles"]
    rows.append(f"| backlog: histogram p50 (whole trace, us) | {hist['p50']:.1f} | - | info |")
    (out / "backlog-check.json").write_text(json.dumps(
        {"program": prog, "delays_ns": delays, "bounds_ns": bounds, "sleep_delay_ns": sleep["value"],
         "device": dev}, indent=1))
    return ok and not below and abs(rel) <= 0.05 and qok


def stage_nobacklog(out: Path, rows: list[str]) -> bool:
    prog, res, recs, _ = trace(out, "nobacklog", [str(HERE / "dispatch" / "backlog.py"), "--tiny", "200",
                                                  "--no-backlog"])
    mine = [r["value"] for r in recs if r["metric"] == "launch_to_start" and r["key"] == prog["stream"]
            and r["ts_ns"] >= prog["marker_ns"]]
    p50 = statistics.median(mine) if mine else float("nan")
    ok = bool(mine) and p50 < 10_000
    rows.append(f"| no backlog: p50 launch->start over {len(mine)} kernels | {p50 / 1000:.2f} us (p90 {pct(mine, 90) / 1000:.2f}) | < 10 us | {'PASS' if ok else 'FAIL'} |")
    return ok


def stage_counts(out: Path, rows: list[str], launches: int, spin_ns: int = 0, name: str = "counts") -> bool:
    """A plain CUDA C++ program (compiled here with nvcc): no Python between the launches;
    ``spin_ns`` of busy wait between launches caps the rate."""
    exe = out / "launch_loop"
    if not exe.exists():
        subprocess.run(["nvcc", "-O2", "-o", str(exe), str(HERE / "dispatch" / "launch_loop.cu")], check=True)
    prog, res, _recs, wall = trace(out, name, [str(exe), str(launches), "4", str(spin_ns)], python=False)
    launch_metric = res["probe_sets"]["cuda"]["metrics"]["launch"]
    total = prog["measured_launches"] + prog["warmup_launches"]
    rows.append(f"| {name}: launches issued / sent by the uprobes (in-kernel count) / read by the session / "
                f"device records | {total} / {launch_metric['records_sent_by_kernel']} / "
                f"{launch_metric['records_received']} / {device_summary(res)['counts']['kernels']} | equal, or "
                f"the difference counted (lost_events {launch_metric['lost_events']}) | info |")
    dev = device_summary(res)
    rate = prog["measured_launches"] / (prog["issue_ns"] / 1e9)
    ok = True
    for handle, st in dev["per_stream"].items():
        same = st["launches"] == st["with_device_record"]
        ok &= same
        rows.append(f"| {name}: stream {handle}: eBPF launches / with a device record | {st['launches']} / {st['with_device_record']} | equal | {'PASS' if same else 'FAIL'} |")
    dropped = sum(dev["dropped_by_collector"].values())
    rows.append(f"| {name}: records dropped (collector + CUPTI) | {dropped} | 0, or counted | {'PASS' if dropped == 0 else 'COUNTED'} |")
    rows.append(f"| {name}: launch rate while traced | {rate / 1000:.0f}k launches/s | >= 100k/s | {'PASS' if rate >= 100_000 else 'FAIL'} |")
    rows.append(f"| {name}: join counters | {json.dumps(dev['counts'])} | - | info |")
    rows.append(f"| {name}: callback minus eBPF launch time, ns | {json.dumps(dev['callback_minus_ebpf_ns'])} | small, >= 0 | info |")
    return ok and rate >= 100_000


def _last_json(stdout: str) -> dict | None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


def _cupti_lines(stderr: str) -> list[str]:
    """What a profiler inside the program said about CUPTI (kineto's warnings), clipped."""
    return [ln.strip()[:200] for ln in stderr.splitlines() if "CUPTI" in ln or "cupti" in ln][:5]


def _per_phase(recs: list[dict], marks: dict[str, int]) -> dict[str, dict[str, int]]:
    """eBPF launches and joined launch_to_start values in each phase's window of the program."""
    order = sorted(marks.items(), key=lambda kv: kv[1])
    out = {}
    for (name, lo), (_, hi) in zip(order, order[1:], strict=False):
        inside = [r for r in recs if lo <= r["ts_ns"] < hi]
        out[name] = {"ebpf_launches": sum(r["metric"] == "launch" for r in inside),
                     "launch_to_start": sum(r["metric"] == "launch_to_start" for r in inside)}
    return out


def stage_own_profiler(out: Path, rows: list[str]) -> bool:
    """A program that runs torch.profiler (CUDA activities) under our collector: it must not
    crash, and what the trace reports must be complete or say why not ("not available: ...")."""
    ok_all = True
    for first in (False, True):
        tag = "own-profiler-first" if first else "own-profiler"
        args = [str(HERE / "dispatch" / "own_profiler.py"), "--launches", "2000", *(["--profile-first"] if first else [])]
        ref = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)
        ref_prog = _last_json(ref.stdout) or {}
        rows.append(f"| {tag}: untraced reference: exit / CUDA events the program's profiler saw | {ref.returncode} / "
                    f"{ref_prog.get('profiler_cuda_events')} | 0 / >= 2000 | info |")
        try:
            prog, res, recs, _ = trace(out, tag, args)
        except SystemExit as exc:
            rows.append(f"| {tag}: traced program | {str(exc)[:300]!r} | exit 0 | FAIL |")
            ok_all = False
            continue
        dt = device_summary(res)
        status = dt.get("status", "(no status)")
        phases = _per_phase(recs, prog["marks_ns"])
        missing = {p: v["ebpf_launches"] - v["launch_to_start"] for p, v in phases.items()
                   if v["launch_to_start"] < v["ebpf_launches"]}
        honest = not missing or status != "available"
        ok_all &= honest
        rows.append(f"| {tag}: traced: exit 0, the program's profiler saw / raised | 0 / "
                    f"{prog.get('profiler_cuda_events')} / {prog.get('profiler_error')} | 0 / same as untraced | info |")
        rows.append(f"| {tag}: per phase, eBPF launches / with launch_to_start | {json.dumps(phases)} | equal, or said why | "
                    f"{'PASS' if not missing else 'COUNTED' if honest else 'FAIL (missing, status says available)'} |")
        rows.append(f"| {tag}: device_timestamps status | {status[:400]} | 'available', or 'not available: <reason>' | info |")
        rows.append(f"| {tag}: processes | {json.dumps({p: {k: v[k] for k in ('errors', 'kernel_records', 'exited_cleanly')} for p, v in dt.get('processes', {}).items()})[:400]} | - | info |")
        rows.append(f"| {tag}: CUPTI lines on stderr (traced / untraced) | {_cupti_lines((out / f'{tag}.stderr.txt').read_text())} / "
                    f"{_cupti_lines(ref.stderr)} | - | info |")
        (out / f"{tag}-check.json").write_text(json.dumps({"reference": ref_prog, "reference_stderr": ref.stderr[-3000:],
                                                           "traced": prog, "phases": phases, "device": dt}, indent=1))
    return ok_all


def stage_queue(out: Path, rows: list[str]) -> bool:
    """`queue run --ebpf-trace` with the collector: timing auto (the profiler's detail pass runs
    after the trace, so the collector must have given CUPTI back) and cupti (the profiler runs
    inside the trace: the conflict, reported)."""
    ok_all = True
    for timing in ("auto", "cupti"):
        res_path = out / f"queue-ebpf-{timing}.json"
        proc = subprocess.run([*AT, "queue", "run", "tiny_kernel_stress", "--streams", "4", "--device", "cuda",
                               "--iterations", "20", "--warmup", "3", "--timing", timing, "--ebpf-trace",
                               "-o", str(res_path)], capture_output=True, text=True, timeout=300)
        (out / f"queue-ebpf-{timing}.stderr.txt").write_text(proc.stderr)
        if proc.returncode != 0 or not res_path.exists():
            rows.append(f"| queue --timing {timing} --ebpf-trace: exit | {proc.returncode}: {proc.stderr[-300:]!r} | 0 | FAIL |")
            ok_all = False
            continue
        r = json.loads(res_path.read_text())
        cuda = ((r.get("ebpf") or {}).get("probe_sets") or {}).get("cuda") or {}
        dt = cuda.get("device_timestamps") or {}
        counts = dt.get("counts") or {}
        lts = (cuda.get("metrics") or {}).get("launch_to_start") or {}
        p = (lts.get("histogram") or {}).get("percentiles") or {}
        timing_info = r.get("timing") or {}
        joined = counts.get("launches_with_device_record")
        complete = bool(dt.get("available")) and joined == counts.get("ebpf_launches") and bool(joined)
        status = dt.get("status", "(no status)")
        honest = complete or status != "available"
        rows.append(f"| queue --timing {timing}: ebpf_reason / device status / detach | {r.get('ebpf_reason')} / "
                    f"{status[:300]} / {dt.get('detach')} | - / available / detached | info |")
        rows.append(f"| queue --timing {timing}: eBPF launches / with a device record / launch_to_start count, p50 us | "
                    f"{counts.get('ebpf_launches')} / {joined} / {lts.get('count')}, "
                    f"{(p.get('p50') or 0) / 1000:.2f} | equal, or said why | "
                    f"{'PASS' if complete else 'COUNTED' if honest else 'FAIL'} |")
        src_ok = timing_info.get("kernel_source") == "cupti"
        rows.append(f"| queue --timing {timing}: the harness's own profiler got kernels (kernel_source / reason) | "
                    f"{timing_info.get('kernel_source')} / {timing_info.get('kernel_source_reason')} | cupti | "
                    f"{'PASS' if src_ok else 'FAIL' if timing == 'auto' else 'COUNTED'} |")
        ok_all &= honest and (src_ok or timing != "auto")
    return ok_all


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stages", default="build,backlog,nobacklog,counts")
    ap.add_argument("--launches", type=int, default=400_000)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = ["| check | measured | reference | verdict |", "|---|---|---|---|"]
    verdicts = {}
    stages = a.stages.split(",")
    if "build" in stages:
        from aorta_tui.trace.device.build import build_collector
        b = build_collector()
        rows.append(f"| build: collector against {b.cupti.origin} (CUPTI {b.cupti.version}) | {b.library} | cached={b.cached} | info |")
    # every stage runs even when one before it failed or raised, and each is reported
    todo = (("backlog", stage_backlog), ("nobacklog", stage_nobacklog),
            ("counts", lambda o, r: stage_counts(o, r, a.launches)),
            # ~100k launches/s: a 10 us period per launch
            ("paced", lambda o, r: stage_counts(o, r, a.launches // 2, spin_ns=9000, name="paced")),
            ("queue", stage_queue), ("profiler", stage_own_profiler))
    for name, fn in todo:
        if name not in stages:
            continue
        print(f"== stage {name}", flush=True)
        try:
            verdicts[name] = fn(a.out, rows)
        except (Exception, SystemExit) as exc:
            rows.append(f"| {name}: stage raised | {type(exc).__name__}: {str(exc)[:300]!r} | - | FAIL |")
            verdicts[name] = False
        (a.out / "dispatch-check.md").write_text("\n".join(rows) + "\n")  # what is done so far
    text = "\n".join(rows)
    (a.out / "dispatch-check.md").write_text(text + "\n")
    print(text)
    print("verdicts:", verdicts)
    sys.exit(0 if all(verdicts.values()) else 1)


if __name__ == "__main__":
    main()
