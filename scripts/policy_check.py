#!/usr/bin/env python3
"""GPU check: a policy that must change behaviour changes the measured figures; a repeat of
``baseline`` does not.

Two sweeps through the real policy evaluator (every trial a fresh process, environment set at
creation, trials interleaved, 95% bootstrap intervals):

A. ``aorta-tui queue run`` (the hardware-queue harness) on WORKLOAD at N streams under
   ``baseline``, ``baseline_again`` (a user policy that sets nothing: baseline vs baseline),
   and ``--policies`` (default ``cuda_launch_blocking``, ``cuda_max_connections_1``,
   ``cuda_max_connections_32``).
B. (``--probe``, or when the time left after A allows) a self-contained probe child: N
   streams each issuing ``torch.cuda._sleep`` kernels (one thread block each, ~50 us), whose
   overlap is limited only by how many hardware work queues the runtime opens; ``baseline``,
   ``cuda_max_connections_1``, ``cuda_max_connections_32``.

Checks (exit 0 only when the required ones pass):
  required  A: baseline_again is "unchanged (within noise)" on throughput, p50 latency and
            achieved concurrency (the other key metrics are shown)
  required  A: cuda_launch_blocking differs from baseline on at least one key metric
  info      A: cuda_max_connections_1 (and _32 when swept) against baseline, and 1 vs 32
  required  B: cuda_max_connections_1 vs cuda_max_connections_32 differ in throughput
            (only when B ran)

Never touches clocks or power: it runs no GPU-control policy.

    python scripts/policy_check.py --streams 16 --trials 4 --save "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the probe child (each trial of sweep B) needs none
    from aorta_tui.policy.comparison import Comparison, Summary
    from aorta_tui.policy.report_doc import MetricSummary, PolicyReport

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEY_METRICS_A = ("throughput", "latency_p50_ms", "achieved_concurrency", "launch_delay_mean_us",
                 "queue_depth_max")
# baseline vs baseline is judged on these (each extra metric adds ~1% false calls at 5 trials)
REPEAT_METRICS = ("throughput", "latency_p50_ms", "achieved_concurrency")
KEY_METRICS_B = ("throughput", "latency_p50_ms", "achieved_concurrency")


# -- the probe child (sweep B) ---------------------------------------------------------------


def probe_child(argv: list[str]) -> int:
    """Run N streams of single-block sleep kernels; write a queue result as the harness does."""
    p = argparse.ArgumentParser()
    p.add_argument("--streams", type=int, required=True)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--kernels-per-stream", type=int, default=4)
    p.add_argument("--sleep-cycles", type=int, default=100_000)
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: the probe needs a CUDA/ROCm GPU", file=sys.stderr)
        return 3
    streams = [torch.cuda.Stream() for _ in range(a.streams)]

    def iteration() -> None:
        for _ in range(a.kernels_per_stream):
            for s in streams:
                with torch.cuda.stream(s):
                    torch.cuda._sleep(a.sleep_cycles)
        torch.cuda.synchronize()

    # One kernel alone, timed with events: the unit of "busy time".
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    alone = []
    for _ in range(7):
        start.record()
        torch.cuda._sleep(a.sleep_cycles)
        end.record()
        end.synchronize()
        alone.append(start.elapsed_time(end))
    kernel_ms = statistics.median(alone)
    for _ in range(a.warmup):
        iteration()
    lat = []
    t_start = time.perf_counter()
    for _ in range(a.iterations):
        t0 = time.perf_counter()
        iteration()
        lat.append((time.perf_counter() - t0) * 1e3)
    wall = time.perf_counter() - t_start
    kernels = a.streams * a.kernels_per_stream
    lat_sorted = sorted(lat)
    # a queue result (hwqueue/result_doc.py): the evaluator reads a trial's file with that
    # document's reader, and a trial whose file it refuses is a failed trial
    result = {
        "schema_version": 1,
        "kind": "aorta-tui/queue-result",
        "emulated": False,
        "workload": {"name": "probe:sleep_kernels", "kernels_per_stream": a.kernels_per_stream,
                     "sleep_cycles": a.sleep_cycles},
        "config": {"streams": a.streams, "iterations": a.iterations, "warmup": a.warmup},
        "platform": {"backend": "rocm" if torch.version.hip else "cuda",
                     "device_name": torch.cuda.get_device_name(0), "torch": torch.__version__,
                     "runtime": f"CUDA {torch.version.cuda}" if torch.version.cuda
                     else f"HIP {torch.version.hip}"},
        "summary": {
            "throughput": kernels * a.iterations / wall,
            "latency_mean_ms": statistics.fmean(lat),
            "latency_p50_ms": statistics.median(lat),
            "latency_p95_ms": lat_sorted[min(len(lat) - 1, int(0.95 * len(lat)))],
            "achieved_concurrency": kernels * kernel_ms / statistics.median(lat),
            "kernel_alone_ms": kernel_ms,
            "wall_s": wall,
        },
        "summary_units": {"throughput": "kernels/s", "latency_mean_ms": "ms",
                          "latency_p50_ms": "ms", "latency_p95_ms": "ms",
                          "achieved_concurrency": "kernels", "kernel_alone_ms": "ms",
                          "wall_s": "s"},
        "summary_better": {"throughput": "higher", "latency_mean_ms": "lower",
                           "latency_p50_ms": "lower", "latency_p95_ms": "lower",
                           "achieved_concurrency": "higher", "wall_s": "lower"},
        "unavailable": {},
        "definitions": {
            "latency_p50_ms": "host time of one iteration (all launches + synchronize), median",
            "achieved_concurrency": "streams*kernels_per_stream*kernel_alone_ms / median "
                                    "iteration time: how many sleep kernels overlapped",
        },
    }
    tmp = Path(a.output + ".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, a.output)
    return 0


# -- the checks ------------------------------------------------------------------------------


def run_sweep(label: str, workload: str, policies: list[Any], args: argparse.Namespace,
              root: Path, trial_command: Any = None) -> PolicyReport | None:
    from aorta_tui.policy.evaluator import PolicySweepRequest, run_policy_sweep
    from aorta_tui.policy.report_doc import PolicyReport

    req = PolicySweepRequest(workload=workload, policies=tuple(policies), streams=args.streams,
                       output_dir=root / label, trials=args.trials,
                       iterations=args.iterations, warmup=args.warmup, device=args.device,
                       seed=args.seed, timeout_s=args.trial_timeout_s,
                       queue_args=tuple(args.queue_arg))

    def show(event: Any) -> None:
        if event.kind == "trial_finished":
            print(f"  [{label}] {event.trial_id}: {event.verdict} in {event.wall_s:.1f}s "
                  f"{event.reason}".rstrip(), flush=True)
        elif event.kind == "warning":
            print(f"  [{label}] warning: {event.message}", flush=True)

    print(f"sweep {label}: {workload}, {args.streams} streams, {args.trials} trials x "
          f"{len(policies)} policies", flush=True)
    from aorta_tui.core.errors import AortaError

    try:
        outcome = run_policy_sweep(req, on_event=show, trial_command=trial_command)
        report: PolicyReport | None = outcome.report
    except AortaError as exc:
        print(f"sweep {label} failed: {exc.render()}", flush=True)
        return None
    except KeyboardInterrupt:
        print(f"sweep {label} interrupted; reporting the finished trials", flush=True)
        path = root / label / "policy.json"
        # read back by its one reader, as the sweep's own report is (readers read the type)
        report = PolicyReport.from_json(path) if path.exists() else None
    if report is not None and args.save:
        save = Path(args.save)
        save.mkdir(parents=True, exist_ok=True)
        for name in ("policy.md", "policy.json"):
            src = root / label / name
            if src.exists():
                shutil.copy(src, save / f"{label}-{name}")
    return report


def _summary(entry: MetricSummary) -> Summary:
    from aorta_tui.policy.comparison import Summary

    return Summary(entry.n, entry.median, entry.ci_low, entry.ci_high, entry.reason)


def direct(report: PolicyReport, a: str, b: str, metric: str) -> Comparison:
    """Policy ``a`` against policy ``b`` (not the reference) on ``metric``, as the report
    compares each policy with the reference."""
    from aorta_tui.policy import comparison

    pol = {p.name: p for p in report.policies}
    better = report.metric(metric).better
    hib = True if better == "higher" else False if better == "lower" else None
    if a not in pol or b not in pol or metric not in pol[a].metrics:
        return comparison.Comparison(comparison.NOT_AVAILABLE, None, "", "not measured")
    return comparison.compare(_summary(pol[b].summary(metric)), _summary(pol[a].summary(metric)),
                              higher_is_better=hib)


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4g}"


def table(report: PolicyReport, metrics: tuple[str, ...]) -> list[str]:
    units = {m.name: m.unit for m in report.metrics}
    present = [m for m in metrics if m in units]
    lines = [f"{'policy':<24} {'metric (unit)':<32} {'median':>10} {'95% CI':>23}  vs baseline"]
    for p in report.policies:
        if p.status != "ran":
            continue
        for m in present:
            s = p.summary(m)
            ci = f"[{_fmt(s.ci_low)}, {_fmt(s.ci_high)}]" if s.ci_low is not None else "n/a"
            if p.name == report.reference:
                vs = "reference"
            else:
                c = p.vs_reference.get(m)
                vs = c.verdict if c is not None else "?"
                if c is not None and c.change_pct is not None:
                    vs += f" ({c.change_pct:+.1f}%)"
            lines.append(f"{p.name:<24} {f'{m} ({units[m]})':<32} {_fmt(s.median):>10} "
                         f"{ci:>23}  {vs}")
    return lines


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe-child":
        return probe_child(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workload", default="hetero_kernels")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--policies", default="baseline_again,cuda_launch_blocking,"
                    "cuda_max_connections_1,cuda_max_connections_32",
                    help="sweep A's policies besides baseline (baseline_again = sets nothing)")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queue-arg", action="append", default=[],
                    help="extra `queue run` option for sweep A (repeat; e.g. --queue-arg=--size)")
    ap.add_argument("--trial-timeout-s", type=float, default=90.0)
    ap.add_argument("--budget-s", type=float, default=200.0,
                    help="run sweep B only when the time left is enough for it")
    ap.add_argument("--probe", action="store_true", help="always run sweep B")
    ap.add_argument("--skip-harness", action="store_true", help="only sweep B (no harness)")
    ap.add_argument("--save", default=None, help="copy the reports and the table here")
    args = ap.parse_args()

    from aorta_tui.policy.presets import BUILTIN_BY_NAME, Policy

    t_start = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="policy-check-"))
    out: list[str] = []
    checks: list[tuple[str, bool, bool, str]] = []  # (name, required, passed, detail)
    baseline_again = Policy(name="baseline_again", description="sets nothing (baseline repeat)")
    report_a = None
    n_a_trials = 0
    if not args.skip_harness:
        from aorta_tui.policy.presets import resolve_policies

        names = [n for n in args.policies.split(",") if n and n != "baseline_again"]
        pols = [BUILTIN_BY_NAME["baseline"], baseline_again,
                *(p for p in resolve_policies(names) if p.name != "baseline")]
        n_a_trials = len(pols) * args.trials
        report_a = run_sweep("A", args.workload, pols, args, root)
    if report_a is not None:
        out += [f"A: aorta-tui queue run {args.workload} --streams {args.streams} "
                f"--iterations {args.iterations} ({report_a.status}, "
                f"{report_a.failed_trials} failed trials) on "
                f"{report_a.platform.get('device_name')}", *table(report_a, KEY_METRICS_A), ""]
        pol = {p.name: p for p in report_a.policies}
        again = {m: c.verdict for m, c in pol["baseline_again"].vs_reference.items()}
        called = [m for m in REPEAT_METRICS if again.get(m) in ("higher", "lower")]
        measured = [m for m in REPEAT_METRICS if again.get(m) not in (None, "not available")]
        others = {m: again[m] for m in KEY_METRICS_A if m not in REPEAT_METRICS and m in again}
        checks.append(("A baseline_again unchanged vs baseline", True,
                       not called and bool(measured),
                       (f"called on {called}" if called else f"unchanged on {measured}")
                       + f"; also {others}"))
        for name, required in (("cuda_launch_blocking", True), ("cuda_max_connections_1", False),
                               ("cuda_max_connections_32", False)):
            if name not in pol or pol[name].status != "ran":
                continue
            vs = pol[name].vs_reference
            changed = {m: f"{c.verdict} {c.change_pct:+.1f}%" for m in KEY_METRICS_A
                       if (c := vs.get(m)) is not None and c.verdict in ("higher", "lower")
                       and c.change_pct is not None}
            checks.append((f"A {name} changes the figures vs baseline", required, bool(changed),
                           str(changed or "unchanged (within noise) on every key metric")))
        if "cuda_max_connections_1" in pol and "cuda_max_connections_32" in pol:
            conn = {m: direct(report_a, "cuda_max_connections_1", "cuda_max_connections_32", m)
                    for m in KEY_METRICS_A}
            conn_called = {m: f"{c.verdict} {c.change_pct:+.1f}%" for m, c in conn.items()
                           if c.verdict in ("higher", "lower") and c.change_pct is not None}
            checks.append(("A cuda_max_connections_1 vs _32 (direct)", False, bool(conn_called),
                           str(conn_called or "unchanged (within noise) on every key metric")))

    elapsed = time.monotonic() - t_start
    per_trial = elapsed / max(1, n_a_trials) if report_a is not None else 8.0
    left = args.budget_s - elapsed
    # As many rounds as the time left allows (at least 4: fewer give no interval), at most --trials.
    trials_b = args.trials if (args.probe or args.skip_harness) else min(
        args.trials, int((left - 10) / (per_trial * 3 * 1.1)))
    need_b = per_trial * 3 * 4 * 1.1 + 10
    report_b = None
    if trials_b >= 4:
        args.trials = trials_b
        script = str(Path(__file__).resolve())

        def probe_command(req: Any, policy: Any, result: Path) -> list[str]:
            return [req.python, script, "--probe-child", "--streams", str(req.streams),
                    "--iterations", "40", "-o", str(result)]

        pols_b = [BUILTIN_BY_NAME["baseline"], BUILTIN_BY_NAME["cuda_max_connections_1"],
                  BUILTIN_BY_NAME["cuda_max_connections_32"]]
        report_b = run_sweep("B", "probe:sleep_kernels", pols_b, args, root, probe_command)
    else:
        out.append(f"B skipped: {left:.0f}s left of the budget, about {need_b:.0f}s needed "
                   "for 4 rounds")
    if report_b is not None:
        out += [f"B: probe child, {args.streams} streams x 4 torch.cuda._sleep kernels "
                f"({report_b.status}, {report_b.failed_trials} failed trials)",
                *table(report_b, KEY_METRICS_B), ""]
        c = direct(report_b, "cuda_max_connections_1", "cuda_max_connections_32", "throughput")
        pct = f" {c.change_pct:+.1f}%" if c.change_pct is not None else ""
        checks.append(("B cuda_max_connections_1 vs _32 throughput (direct)", True,
                       c.verdict in ("higher", "lower"), f"{c.verdict}{pct}"))

    out.append("checks:")
    for name, required, passed, detail in checks:
        tag = "PASS" if passed else ("FAIL" if required else "info")
        out.append(f"  {tag:<4} {name}: {detail}")
    ok = bool(checks) and all(passed for _n, req, passed, _d in checks if req)
    out.append(f"overall: {'PASS' if ok else 'FAIL'} ({time.monotonic() - t_start:.0f}s, "
               f"reports under {root})")
    text = "\n".join(out)
    print(text, flush=True)
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
        (Path(args.save) / "policy_check.txt").write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
