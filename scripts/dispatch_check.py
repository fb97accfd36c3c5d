"""Issues 13, 24 and 34 on a GPU machine: ground truth, exact counts, cost, one CUPTI subscriber,
and launch -> start in three parts (host / push / GPU queue) that must add up per launch.

    sudo python3 scripts/dispatch_check.py --out DIR [--stages STAGES] [--deadline-s S]

Stages (default: all of issue 24's "Done when", in this order): ``build``; ``backlog`` (0 kernels
below the bound, with the old L beside it; the parts add up and one carries the wait); ``nobacklog``
(the default mode's push + GPU queue, launches from the collector's callback with all three parts,
from the eBPF uprobe with its calibrated cost taken off, and torch.profiler's reference in a
separate run); ``counts`` (the default mode, launches from the kernel records, at >= 90k launches/s), ``paced`` (the same at ~100k/s
paced), ``crosscheck`` (both sources counted and compared); ``queue`` (`queue run --ebpf-trace`
with --timing auto works, --timing cupti is refused with exit 2); ``profiler`` (a program with its
own torch.profiler: its profiler's fate is said); ``cost`` (benchmarks/dispatch_overhead.py: added
host time per launch of every mode, median and 95% interval); ``lag`` (live lag, optional);
``metrics`` (issue 26: the paced loop with and without ``--metrics`` and a scrape a second, optional).

Each stage has a time limit measured on the H200 with margin (STAGE_LIMIT_S); a stage that would
not fit in what is left of ``--deadline-s`` is reported "NOT RUN" with the reason, never silently
dropped, and every stage runs even when one before it failed. One table (DIR/dispatch-check.md)
holds every figure with its reference and verdict; it is rewritten after every stage.

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
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
AT = [sys.executable, "-m", "aorta_tui"]
# Seconds each stage may take, from what was measured on the H200 (docs GPU-NOTES, 2026-12-01/02:
# a fresh Python with torch and a first CUDA tensor 5.4-6.1 s, bpftrace attach ~1-2 s, `queue
# run tiny_kernel_stress --streams 8` 21 s) times ~2 for margin; every run prints each stage's
# wall time beside its limit, so the next run's limits come from this one's figures. A stage's
# subprocesses get what is left of its limit (never more), so a stage never outruns it.
STAGE_LIMIT_S = {"build": 60, "backlog": 60, "nobacklog": 120, "counts": 60, "paced": 60,
                 "crosscheck": 60, "queue": 120, "profiler": 150, "cost": 260, "lag": 60,
                 "metrics": 150}
STAGES = ("build", "backlog", "nobacklog", "counts", "paced", "crosscheck", "queue", "profiler", "cost")
CALL_TIMEOUT_S = 90  # one traced program of a stage, at most
_stage_end = [float("inf")]  # monotonic time the running stage must end by


def left_s(most: float = CALL_TIMEOUT_S) -> float:
    """A subprocess's timeout: ``most``, or what is left of the stage's limit if that is less."""
    return max(1.0, min(most, _stage_end[0] - time.monotonic()))


def run(cmd: list[str], timeout: float, **kw: object) -> subprocess.CompletedProcess[str]:
    """subprocess.run in a process group of its own: at its timeout the group gets SIGINT (a
    `trace queue` then stops bpftrace and writes its result), then SIGKILL, so no traced program
    or tracer outlives its stage and perturbs the next one (bpftrace itself exits at its next
    heartbeat once its reader is gone)."""
    import os
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kw)  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGINT, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
                proc.communicate(timeout=wait)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def trace(out: Path, name: str, program: list[str], *extra: str, python: bool = True,
          calibrate: bool = False, timeout: float | None = None) -> tuple[dict, dict, list[dict], float]:
    result, raw = out / f"{name}.json", out / f"{name}.raw.jsonl.gz"
    t0 = time.monotonic()
    proc = run([*AT, "trace", "queue", "--probes", "cuda", "--device-timestamps", "on",
                           *([] if calibrate else ["--no-calibrate"]), "-o", str(result), "--raw", str(raw),
                           *extra, "--", *([sys.executable] if python else []), *program],
                          timeout=left_s(timeout or CALL_TIMEOUT_S))
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


def _below(tiny: list[dict], sleep: dict, L: float, unc: int) -> tuple[list[float], list[tuple[float, float]]]:
    """Bounds L - (launch offset after the sleep's launch), and the tiny kernels below them."""
    bounds = [L - (r["ts_ns"] - sleep["ts_ns"]) for r in tiny]
    below = [(r["value"], b) for r, b in zip(tiny, bounds, strict=True) if r["value"] < b - unc - 1000]
    return bounds, below


def stage_backlog(out: Path, rows: list[str]) -> bool:
    prog, res, recs, _ = trace(out, "backlog", [str(HERE / "dispatch" / "backlog.py"), "--tiny", "100",
                                                "--sleep-ms", "10"])
    L, L_idle = prog["sleep_ns"], prog.get("sleep_ns_idle_start")
    mine = sorted((r for r in recs if r["metric"] == "launch_to_start" and r["key"] == prog["stream"]
                   and r["ts_ns"] >= prog["marker_ns"]), key=lambda r: r["ts_ns"])
    dev = device_summary(res)
    unc = dev["clock"]["uncertainty_ns"] or 0
    ok = len(mine) == prog["tiny"] + 1
    rows.append(f"| backlog: records in the measured section (launches from {res['launch_source']['mode']}) | "
                f"{len(mine)} | {prog['tiny'] + 1} (sleep + tiny) | {'PASS' if ok else 'FAIL'} |")
    if len(mine) < 2:
        return False
    sleep, tiny = mine[0], mine[1:]
    bounds, below = _below(tiny, sleep, L, unc)
    rows.append(f"| backlog: L = sleep kernel by CUDA events with the GPU kept busy before the first event | "
                f"{L / 1e6:.4f} ms | - | info |")
    rows.append(f"| backlog: tiny kernels below L - launch offset (tolerance: clock ±{unc} ns + 1 us) | "
                f"{len(below)} | 0 | {'PASS' if not below else 'FAIL'} |")
    if L_idle is not None:
        _b, below_idle = _below(tiny, sleep, L_idle, unc)
        rows.append(f"| backlog: the old model, L timed on an idle GPU (includes the host's launch gap "
                    f"after the first event): L_idle - L, kernels below its bound | {(L_idle - L) / 1000:+.2f} us, "
                    f"{len(below_idle)} below | the model error, not the clocks | info |")
    # the sleep itself started `sleep.value` after its launch, so every tiny kernel waits that long more
    delays = [r["value"] for r in tiny]
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
    parts_ok = _parts_rows(rows, "backlog", recs, prog, backlog=True)
    (out / "backlog-check.json").write_text(json.dumps(
        {"program": prog, "delays_ns": delays, "bounds_ns": bounds, "sleep_delay_ns": sleep["value"],
         "device": dev}, indent=1))
    return ok and not below and abs(rel) <= 0.05 and qok and parts_ok


PARTS = ("launch_host", "launch_push", "launch_gpu_queue")


def _parts_rows(rows: list[str], name: str, recs: list[dict], prog: dict, backlog: bool) -> bool:
    """Issue 34: per launch of the measured section, host + push + GPU queue (the parts the mode
    has) must equal launch -> start exactly; with a backlog one part must carry the wait (which
    one is reported: measured, not assumed), without one every part stays in microseconds."""
    def mine(metric: str) -> dict[int, int]:
        return {r["ts_ns"]: r["value"] for r in recs if r["metric"] == metric and r["key"] == prog["stream"]
                and r["ts_ns"] >= prog["marker_ns"]}

    total = mine("launch_to_start")
    parts = {p: mine(p) for p in PARTS}
    have = [p for p in PARTS if parts[p]]
    summed = {ts: sum(parts[p].get(ts, 0) for p in have) for ts in total}
    complete = [ts for ts in total if all(ts in parts[p] for p in have)]
    exact = bool(complete) and all(summed[ts] == total[ts] for ts in complete) and len(complete) == len(total)
    rows.append(f"| {name}: parts present / launches whose parts add up to launch->start exactly | "
                f"{', '.join(have) or 'none'} / {sum(summed[ts] == total[ts] for ts in complete)} of {len(total)} | "
                f"all | {'PASS' if exact else 'FAIL'} |")
    med = {p: statistics.median(parts[p].values()) for p in have}
    rows.append(f"| {name}: median per part (us) | " + ", ".join(f"{p[7:]} {v / 1000:.2f}" for p, v in med.items())
                + " | - | info |")
    if backlog:
        if not med:
            return False
        big = max(med, key=lambda p: med[p])
        carries = med[big] >= 0.5 * statistics.median(total.values())
        rows.append(f"| {name}: the part that carries the wait behind the sleep kernel | {big[7:]} "
                    f"({med[big] / 1e6:.3f} ms median) | one part, >= half of launch->start | "
                    f"{'PASS' if carries else 'FAIL'} |")
        return exact and carries
    small = all(v < 100_000 for v in med.values())
    rows.append(f"| {name}: every part without a backlog | max median {max(med.values(), default=0) / 1000:.2f} us | "
                f"< 100 us | {'PASS' if small and med else 'FAIL'} |")
    return exact and small and bool(med)


def _nobacklog_run(out: Path, name: str, *extra: str, calibrate: bool = False
                   ) -> tuple[float, list[int], dict, list[dict], dict]:
    prog, res, recs, _ = trace(out, name, [str(HERE / "dispatch" / "backlog.py"), "--tiny", "200", "--no-backlog"],
                               *extra, calibrate=calibrate)
    mine = [r["value"] for r in recs if r["metric"] == "launch_to_start" and r["key"] == prog["stream"]
            and r["ts_ns"] >= prog["marker_ns"]]
    return (statistics.median(mine) if mine else float("nan")), mine, res, recs, prog


def _nobacklog_p50(out: Path, name: str, *extra: str, calibrate: bool = False) -> tuple[float, list[int], dict]:
    p50, mine, res, _recs, _prog = _nobacklog_run(out, name, *extra, calibrate=calibrate)
    return p50, mine, res


def stage_nobacklog(out: Path, rows: list[str]) -> bool:
    """A sync after every tiny kernel: the launch -> start floor. The reference is torch.profiler
    timing the same loop in a separate, untraced run (kernel start - cudaLaunchKernel start)."""
    ref = run([sys.executable, str(HERE / "dispatch" / "backlog.py"), "--tiny", "200", "--no-backlog",
               "--profile"], timeout=left_s())
    ref_prog = _last_json(ref.stdout) or {}
    ref_vals = ref_prog.get("profiler_launch_to_start_ns") or []
    ref_p50 = statistics.median(ref_vals) if ref_vals else None
    rows.append(f"| no backlog: torch.profiler's reference (separate untraced run), p50 over {len(ref_vals)} "
                f"kernels | {'-' if ref_p50 is None else f'{ref_p50 / 1000:.2f} us'} | - | "
                f"{'info' if ref_p50 is not None else 'FAIL (exit ' + str(ref.returncode) + ')'} |")

    def verdict(p50: float) -> str:
        if ref_p50 is None or p50 != p50:
            return "FAIL (no figure)"
        return "PASS" if abs(p50 - ref_p50) <= 1000 else f"FAIL ({(p50 - ref_p50) / 1000:+.2f} us)"

    p50_d, mine_d, res_d, recs_d, prog_d = _nobacklog_run(out, "nobacklog-default")
    rows.append(f"| no backlog: default mode ({res_d['launch_source']['mode']}): p50 queued->start = push + GPU "
                f"queue (no entry time, so no host part) | {p50_d / 1000:.2f} us (n {len(mine_d)}) | - | info |")
    parts_d = _parts_rows(rows, "no backlog (default)", recs_d, prog_d, backlog=False)
    p50_c, mine_c, _res, recs_c, prog_c = _nobacklog_run(out, "nobacklog", "--launch-source", "collector")
    v_c = verdict(p50_c)
    rows.append(f"| no backlog: p50 launch->start = host + push + GPU queue, launch entry from the collector's "
                f"callback (no uprobe on the launch path) | "
                f"{p50_c / 1000:.2f} us (p90 {pct(mine_c, 90) / 1000 if mine_c else float('nan'):.2f}, n {len(mine_c)}) | "
                f"profiler within 1 us | {v_c} |")
    parts_c = _parts_rows(rows, "no backlog (collector)", recs_c, prog_c, backlog=False)
    p50_e, mine_e, res_e = _nobacklog_p50(out, "nobacklog-ebpf", "--launch-source", "ebpf", calibrate=True)
    inc = res_e["probe_sets"]["cuda"]["metrics"]["launch_to_start"].get("includes") or {}
    cost = inc.get("probe_cost_ns")
    rows.append(f"| no backlog: p50 launch->start, launches from the eBPF uprobe (as measured) | "
                f"{p50_e / 1000:.2f} us | - | info |")
    if cost is not None:
        v_e = verdict(p50_e - cost)
        rows.append(f"| no backlog: the same minus the uprobe's calibrated cost ({cost / 1000:.2f} us on "
                    f"{inc.get('calibrated_on')}) | {(p50_e - cost) / 1000:.2f} us | profiler within 1 us | {v_e} |")
    else:
        v_e = "info"
        rows.append(f"| no backlog: uprobe cost not subtracted | {inc.get('why')} | - | info |")
    return v_c == "PASS" and parts_d and parts_c


def _launch_loop(out: Path) -> Path:
    exe = out / "launch_loop"
    if not exe.exists():
        subprocess.run(["nvcc", "-O2", "-o", str(exe), str(HERE / "dispatch" / "launch_loop.cu")], check=True,
                       timeout=left_s(120))
    return exe


def _loop_figures(prog: dict) -> tuple[int, float]:
    """The C++ loop's own report: every launch it issued (warm-up included), and its measured
    launches per second."""
    return prog["measured_launches"] + prog["warmup_launches"], prog["measured_launches"] / (prog["issue_ns"] / 1e9)


def stage_counts(out: Path, rows: list[str], launches: int, spin_ns: int = 0, name: str = "counts",
                 cross_check: bool = False) -> bool:
    """A plain CUDA C++ program (compiled here with nvcc): no Python between the launches;
    ``spin_ns`` of busy wait between launches caps the rate. Launches from the collector (the
    default), or (``cross_check``) from both sources, compared."""
    exe = _launch_loop(out)
    prog, res, _recs, wall = trace(out, name, [str(exe), str(launches), "4", str(spin_ns)], *(
        ["--cross-check"] if cross_check else []), python=False)
    launch_metric = res["probe_sets"]["cuda"]["metrics"]["launch"]
    dev = device_summary(res)
    total, rate = _loop_figures(prog)
    src = res["launch_source"]["mode"]
    if cross_check:
        cc = dev.get("cross_check") or {}
        sent = launch_metric["records_sent_by_kernel"]
        # the two independent counts: the uprobes' in-kernel count and the collector's callbacks;
        # eBPF records lost on their way to the session are counted (lost_events), not a mismatch
        same = sent == cc.get("collector_launches") == total
        rows.append(f"| {name}: launches issued / eBPF uprobes (in-kernel count) / collector callbacks / "
                    f"device records | {total} / {sent} / {cc.get('collector_launches')} / "
                    f"{dev['counts']['kernels']} | equal | {'PASS' if same else 'FAIL'} |")
        rows.append(f"| {name}: eBPF records read / lost on the way (counted) | {launch_metric['records_received']} / "
                    f"{launch_metric['lost_events']} | lost 0, or counted | "
                    f"{'PASS' if launch_metric['lost_events'] == 0 else 'COUNTED'} |")
        rows.append(f"| {name}: per stream, eBPF read / collector | {json.dumps(cc.get('per_stream'))} | equal | "
                    f"{'PASS' if cc.get('equal') else 'COUNTED'} |")
        ok = same
    else:
        sent = launch_metric.get("records_sent_by_collector")
        exact = sent == launch_metric["records_received"] == total == dev["counts"]["kernels"]
        unknown = dev["counts"].get("latency_unknown", 0)
        rows.append(f"| {name}: kernels without latency timestamps (no push / GPU queue parts) | {unknown} | 0 | "
                    f"{'PASS' if unknown == 0 else 'FAIL'} |")
        exact &= unknown == 0
        rows.append(f"| {name}: launches issued / seen by the collector / read by the session / device records "
                    f"(launches from {src}) | {total} / {sent} / {launch_metric['records_received']} / "
                    f"{dev['counts']['kernels']} | equal | {'PASS' if exact else 'FAIL'} |")
        ok = exact and src in ("collector", "activity")
    for handle, st in dev["per_stream"].items():
        same = st["launches"] == st["with_device_record"]
        ok &= same
        rows.append(f"| {name}: stream {handle}: launches / with a device record | {st['launches']} / {st['with_device_record']} | equal | {'PASS' if same else 'FAIL'} |")
    dropped = sum(dev["dropped_by_collector"].values())
    rows.append(f"| {name}: records dropped (collector + CUPTI) | {dropped} | 0 | {'PASS' if dropped == 0 else 'FAIL'} |")
    rows.append(f"| {name}: launch rate while traced | {rate / 1000:.0f}k launches/s | >= 90k/s | {'PASS' if rate >= 90_000 else 'FAIL'} |")
    rows.append(f"| {name}: join counters | {json.dumps(dev['counts'])} | - | info |")
    return ok and dropped == 0 and rate >= 90_000


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
    crash, and if its profiler got less than untraced, the result must say so (issue 24 item 2)."""
    ok_all = True
    for first in (False, True):
        tag = "own-profiler-first" if first else "own-profiler"
        args = [str(HERE / "dispatch" / "own_profiler.py"), "--launches", "2000", *(["--profile-first"] if first else [])]
        ref = run([sys.executable, *args], timeout=left_s())
        ref_prog = _last_json(ref.stdout) or {}
        try:
            prog, res, recs, _ = trace(out, tag, args)
        except SystemExit as exc:
            rows.append(f"| {tag}: traced program | {str(exc)[:300]!r} | exit 0 | FAIL |")
            ok_all = False
            continue
        dt = device_summary(res)
        status = dt.get("status", "(no status)")
        conflict = dt.get("program_profiler") or {}
        got, want = prog.get("profiler_cuda_events"), ref_prog.get("profiler_cuda_events")
        short = want is not None and (got is None or got < want)
        said = bool(conflict) or status != "available"
        ok = not short or said
        ok_all &= ok
        rows.append(f"| {tag}: CUDA events the program's own profiler saw, traced / untraced | {got} / {want} | "
                    f"same, or said why | {'PASS (same)' if not short else 'PASS (said)' if said else 'FAIL (silent)'} |")
        rows.append(f"| {tag}: what the trace said (program_profiler / status) | "
                    f"{(next(iter(conflict.values()), '') or status)[:300]} | names `--device-timestamps off` when it took CUPTI | info |")
        phases = _per_phase(recs, prog["marks_ns"])
        issued = prog.get("launches_per_phase")
        # against the launches the program issued in each phase (its own count), not only the
        # trace's: a collector that could not subscribe sees none, and must say so
        missing = {p: issued - v["launch_to_start"] for p, v in phases.items()
                   if issued is not None and v["launch_to_start"] < issued}
        launch_why = res["probe_sets"]["cuda"]["metrics"]["launch"].get("lost_events_reason", "")
        rows.append(f"| {tag}: per phase, launches traced / with launch_to_start (issued {issued} each) | "
                    f"{json.dumps(phases)} | equal, or said why | "
                    f"{'PASS' if not missing else 'COUNTED' if status != 'available' or launch_why else 'FAIL'} |")
        rows.append(f"| {tag}: CUPTI lines on stderr (traced / untraced) | {_cupti_lines((out / f'{tag}.stderr.txt').read_text())} / "
                    f"{_cupti_lines(ref.stderr)} | - | info |")
        (out / f"{tag}-check.json").write_text(json.dumps({"reference": ref_prog, "reference_stderr": ref.stderr[-3000:],
                                                           "traced": prog, "phases": phases, "device": dt}, indent=1))
    return ok_all


def stage_cost(out: Path, rows: list[str], limit_s: float) -> bool:
    """benchmarks/dispatch_overhead.py: added host time per launch of every mode, median and 95%
    interval, each traced mode paired with the untraced run of its round. It stops starting
    rounds 45 s before the stage's limit (a round of all six modes takes ~15 s on the H200)."""
    exe = _launch_loop(out)
    proc = run([sys.executable, str(REPO / "benchmarks" / "dispatch_overhead.py"), "--rounds", "40",
                "--heavy-every", "1", "--budget-s", str(int(limit_s - 45)), "--loop-exe", str(exe),
                "--out", str(out)], timeout=left_s(limit_s))
    (out / "cost.stderr.txt").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    try:
        doc = json.loads((out / "dispatch-overhead.json").read_text())
    except (OSError, ValueError):
        rows.append(f"| cost: benchmark | exit {proc.returncode}: {proc.stderr[-300:]!r} | - | FAIL |")
        return False
    summ = doc["summary"]

    def us(x: float | None, sign: str = "") -> str:
        return "-" if x is None else f"{x / 1000:{sign}.2f}"

    errors = {}
    for row in doc.get("rounds", []):
        for smp in row:
            if not smp.get("valid") and smp["mode"] not in errors:
                errors[smp["mode"]] = smp.get("error") or f"cuda error {smp.get('cuda_error')!r}, records " \
                                                         f"{smp.get('collector_launch_records')} of {smp.get('launches')}"
    for m, e in summ["modes"].items():
        s = e["ns_per_launch"]
        add = e.get("added_vs_bare_ns") or {}
        ci = add.get("ci95")
        target = summ["targets"].get(m)
        if m == "bare":
            fig = f"{us(s['p50'])} us per launch (n {s['n']})"
        else:
            fig = (f"{us(add.get('median'), '+')} us" + (f" [{us(ci[0])}, {us(ci[1])}]" if ci else "")
                   + f" ({add.get('pairs', 0)} pairs)")
        ref = f"<= {summ['targets_ns'][m] / 1000:g} us upper bound" if target else "-"
        verdict = {"met": "PASS", "missed": "FAIL", None: "info"}.get(target, f"UNDECIDED ({target})")
        why = f"; first invalid: {errors[m][:200]!r}" if m in errors else ""
        rows.append(f"| cost: {m} (invalid runs {e['invalid_runs']}{why}) | {fig} | {ref} | {verdict} |")
    rows.append(f"| cost: rounds run / wall | {doc['settings']['rounds_run']} / {doc['wall_s']:.0f} s | - | info |")
    return all(v == "met" for v in summ["targets"].values())


def _scrape_loop(url: str, stop: threading.Event, scrapes: list[str]) -> None:
    """GET /metrics every second, as Prometheus would; keeps each body (the last one read after
    the trace ended holds the final figures: ``--metrics-linger``)."""
    import urllib.request

    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                scrapes.append(r.read().decode())
        except OSError:
            continue


def _counter(body: str, name: str, **labels: str) -> float | None:
    """One sample of an exposition body: ``name{labels...} value`` (labels matched as given)."""
    for ln in body.splitlines():
        if not ln.startswith(name + "{") and not ln.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in ln for k, v in labels.items()):
            return float(ln.rsplit(" ", 1)[1])
    return None


def stage_metrics(out: Path, rows: list[str], launches: int, rounds: int = 2) -> bool:
    """Issue 26 on the H200: the C++ loop traced with and without ``--metrics`` (a scrape every
    second), alternated ``rounds`` times so drift falls on both. In each run: launches issued, the
    uprobes' in-kernel count, the records read and lost, the device records, and the launch rate;
    with --metrics also the last scrape's ``aorta_trace_events_total`` against the -o result (the
    exporter's count must equal the tool's own, exactly). Paced to ~100k launches/s (the loop's
    busy wait), the rate the issue names (>= 90k/s)."""
    exe = _launch_loop(out)
    port = 9477
    rates: dict[bool, list[float]] = {False: [], True: []}  # launches/s, without and with --metrics
    ok = True
    for rnd in range(rounds):
        for with_metrics in (False, True):
            name = f"metrics-{'on' if with_metrics else 'off'}-{rnd}"
            stop, scrapes = threading.Event(), []
            scraper = None
            extra = ["--launch-source", "ebpf"]
            if with_metrics:
                extra += ["--metrics", f"127.0.0.1:{port}", "--metrics-linger", "2.5"]
                scraper = threading.Thread(target=_scrape_loop, daemon=True,
                                           args=(f"http://127.0.0.1:{port}/metrics", stop, scrapes))
                scraper.start()
            try:
                prog, res, _recs, wall = trace(out, name, [str(exe), str(launches), "4", "9000"], *extra,
                                               python=False)
            finally:
                stop.set()
                if scraper:
                    scraper.join(timeout=10)
            m = res["probe_sets"]["cuda"]["metrics"]["launch"]
            dev = device_summary(res)
            total, rate = _loop_figures(prog)
            sent, read, lost = m.get("records_sent_by_kernel"), m["records_received"], m.get("lost_events")
            exact = sent == total == dev["counts"]["kernels"] and read + (lost or 0) == sent
            fig = (f"{total} / {sent} / {read} / {lost} / {dev['counts']['kernels']} at {rate / 1000:.1f}k launches/s "
                   f"({wall:.1f} s)")
            verdict = exact and rate >= 90_000
            if with_metrics:
                final = next((b for b in reversed(scrapes) if _counter(b, "aorta_trace_running") == 0.0), None)
                scraped = _counter(final, "aorta_trace_events_total", probe_set="cuda", metric="launch") if final else None
                same = scraped is not None and int(scraped) == m["count"]
                fig += f"; {len(scrapes)} scrapes, final aorta_trace_events_total {scraped} vs -o count {m['count']}"
                verdict &= same
            rates[with_metrics].append(rate)
            ok &= verdict
            rows.append(f"| metrics {'with' if with_metrics else 'without'} --metrics, round {rnd + 1}: issued / "
                        f"uprobes' count / read / lost (counted) / device records | {fig} | counts equal (read + lost = "
                        f"sent), >= 90k/s{', scraped = -o' if with_metrics else ''} | {'PASS' if verdict else 'FAIL'} |")
    if rates[False] and rates[True]:
        off, on = statistics.median(rates[False]), statistics.median(rates[True])
        rows.append(f"| metrics: launch rate with / without --metrics (median of {rounds}) | {on / 1000:.1f}k / "
                    f"{off / 1000:.1f}k = {on / off:.3f} | same rate | info |")
    return ok


def stage_lag(out: Path, rows: list[str]) -> bool:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import dispatch_overhead

    lag_rows = dispatch_overhead.lag()
    rows.extend(f"| lag: {r[2:]} <= 1 s | info |" for r in lag_rows)
    return bool(lag_rows)


def stage_queue(out: Path, rows: list[str]) -> bool:
    """`queue run --ebpf-trace`: with --timing auto it works (the harness's profiler pass runs after
    the trace gave CUPTI back); with --timing cupti it is refused up front, exit 2 with the reason."""
    # the refusal first: seconds, and its row stands even if the run below outlasts the stage
    proc = run([*AT, "queue", "run", "tiny_kernel_stress", "--streams", "4", "--device", "cuda",
                "--iterations", "5", "--timing", "cupti", "--ebpf-trace",
                "-o", str(out / "queue-ebpf-cupti.json")], timeout=left_s(60))
    refused = proc.returncode == 2 and "CUPTI allows one" in proc.stderr
    rows.append(f"| queue --timing cupti --ebpf-trace: refused up front | exit {proc.returncode}: "
                f"{next((ln for ln in proc.stderr.splitlines() if ln.startswith('error')), proc.stderr[-200:])[:200]} | "
                "exit 2 with the reason | "
                f"{'PASS' if refused else 'FAIL'} |")
    res_path = out / "queue-ebpf-auto.json"
    proc = run([*AT, "queue", "run", "tiny_kernel_stress", "--streams", "4", "--device", "cuda",
                "--iterations", "20", "--warmup", "3", "--timing", "auto", "--ebpf-trace",
                "-o", str(res_path)], timeout=left_s(100))
    (out / "queue-ebpf-auto.stderr.txt").write_text(proc.stderr)
    ok = proc.returncode == 0 and res_path.exists()
    if not ok:
        rows.append(f"| queue --timing auto --ebpf-trace: exit | {proc.returncode}: {proc.stderr[-300:]!r} | 0 | FAIL |")
    else:
        r = json.loads(res_path.read_text())
        ebpf = r.get("ebpf") or {}
        cuda = (ebpf.get("probe_sets") or {}).get("cuda") or {}
        dt = cuda.get("device_timestamps") or {}
        counts = dt.get("counts") or {}
        lts = (cuda.get("metrics") or {}).get("launch_to_start") or {}
        launches = ((cuda.get("metrics") or {}).get("launch") or {}).get("count")
        joined = counts.get("launches_with_device_record")
        complete = bool(dt.get("available")) and bool(joined) and joined == launches
        timing = r.get("timing") or {}
        src_ok = timing.get("kernel_source") == "cupti"
        rows.append(f"| queue --timing auto --ebpf-trace: launches ({(ebpf.get('launch_source') or {}).get('mode')}) / "
                    f"with a device record / detach | {launches} / {joined} / {dt.get('detach')} | equal / detached | "
                    f"{'PASS' if complete else 'FAIL'} |")
        rows.append(f"| queue --timing auto --ebpf-trace: the harness's profiler got kernels (kernel_source) | "
                    f"{timing.get('kernel_source')} / {timing.get('kernel_source_reason')} | cupti | "
                    f"{'PASS' if src_ok else 'FAIL'} |")
        rows.append(f"| queue --timing auto --ebpf-trace: launch_to_start count, p50 | {lts.get('count')}, "
                    f"{((lts.get('histogram') or {}).get('percentiles') or {}).get('p50')} us | - | info |")
        ok = complete and src_ok
    return ok and refused


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--launches", type=int, default=400_000)
    ap.add_argument("--deadline-s", type=float, default=480.0,
                    help="start no stage that would not end before this many seconds from now")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rows = ["| check | measured | reference | verdict |", "|---|---|---|---|"]
    verdicts: dict[str, bool | None] = {}
    stages = [x for x in a.stages.split(",") if x]
    unknown = [x for x in stages if x not in STAGE_LIMIT_S]
    if unknown:
        raise SystemExit(f"unknown stage(s) {', '.join(unknown)}: choose from {', '.join(STAGE_LIMIT_S)}")

    def build(o: Path, r: list[str]) -> bool:
        from aorta_tui.trace.device.build import build_collector

        b = build_collector()
        r.append(f"| build: collector against {b.cupti.origin} (CUPTI {b.cupti.version}) | {b.library} | cached={b.cached} | info |")
        return True

    todo = {"build": build, "backlog": stage_backlog, "nobacklog": stage_nobacklog,
            "counts": lambda o, r: stage_counts(o, r, a.launches),
            # ~100k launches/s: a 10 us period per launch
            "paced": lambda o, r: stage_counts(o, r, a.launches // 2, spin_ns=9000, name="paced"),
            # paced to ~100k launches/s, as `paced`: both sources count the same 201,000 launches
            "crosscheck": lambda o, r: stage_counts(o, r, a.launches // 2, spin_ns=9000, name="crosscheck",
                                                    cross_check=True),
            "queue": stage_queue, "profiler": stage_own_profiler, "lag": stage_lag,
            # issue 26: the same paced loop with and without --metrics and a scrape a second
            "metrics": lambda o, r: stage_metrics(o, r, a.launches // 2)}
    # every stage runs even when one before it failed or raised, and each is reported
    for name in stages:
        left = a.deadline_s - (time.monotonic() - t0)
        need = STAGE_LIMIT_S[name]
        if name == "cost":  # the benchmark takes what is left, up to its limit
            need = min(need, left - 30)
        if left < need or need < 60:
            rows.append(f"| {name}: NOT RUN | {left:.0f} s left of the {a.deadline_s:.0f} s budget, the stage needs "
                        f"{STAGE_LIMIT_S[name]} s | - | NOT RUN |")
            verdicts[name] = None
            continue
        print(f"== stage {name} ({left:.0f} s left)", flush=True)
        s0 = time.monotonic()
        _stage_end[0] = s0 + need
        try:
            verdicts[name] = (stage_cost(a.out, rows, need) if name == "cost" else todo[name](a.out, rows))
        except (Exception, SystemExit) as exc:
            rows.append(f"| {name}: stage raised | {type(exc).__name__}: {str(exc)[:300]!r} | - | FAIL |")
            verdicts[name] = False
        rows.append(f"| {name}: stage wall time | {time.monotonic() - s0:.0f} s | limit {STAGE_LIMIT_S[name]} s | info |")
        (a.out / "dispatch-check.md").write_text("\n".join(rows) + "\n")  # what is done so far
    summary = ["", "| stage | verdict |", "|---|---|", *(f"| {n} | {'PASS' if v else 'NOT RUN' if v is None else 'FAIL'} |"
                                                     for n, v in verdicts.items())]
    text = "\n".join(rows + summary)
    (a.out / "dispatch-check.md").write_text(text + "\n")
    print(text)
    sys.exit(0 if all(v for v in verdicts.values()) else 1)


if __name__ == "__main__":
    main()
