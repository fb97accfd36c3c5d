"""Issue 13's proofs on a GPU machine: ground truth, exact counts, the collector's build.

    sudo python3 scripts/dispatch_check.py --out DIR [--stages build,backlog,nobacklog,counts]

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
    for name, fn in (("backlog", stage_backlog), ("nobacklog", stage_nobacklog)):
        if name in stages:
            verdicts[name] = fn(a.out, rows)
    if "counts" in stages:
        verdicts["counts"] = stage_counts(a.out, rows, a.launches)
    if "paced" in stages:  # ~100k launches/s: a 10 us period per launch
        verdicts["paced"] = stage_counts(a.out, rows, a.launches // 2, spin_ns=9000, name="paced")
    text = "\n".join(rows)
    (a.out / "dispatch-check.md").write_text(text + "\n")
    print(text)
    print("verdicts:", verdicts)
    sys.exit(0 if all(verdicts.values()) else 1)


if __name__ == "__main__":
    main()
