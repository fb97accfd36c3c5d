"""TUI speed: time to first frame, and the trace monitor under a 100k events/s stream.

Every figure is measured here, in this run, on this machine, with the real program in a real
pseudo-terminal (the TUI draws to a pty that this script drains):

1. Time to first frame: from spawning ``python -m aorta_tui`` until the home screen's first
   frame (its key line) reaches the terminal. Reference: a minimal Textual app (one Static) in the same harness.
   Target: <= 0.5 s.
2. Streaming into the trace monitor (``--seconds`` of steady state), two ways:
   a. UI only: histogram snapshots at 10 per second describing 100k events/s (what the trace
      engine hands the screen); measures the screen's redraw rate and the process's CPU.
   b. The whole pipeline as `s` on the trace monitor runs it: the tracer worker process
      (``aorta-tui trace queue --json --synthetic N``) runs the trace engine's parser and statistics on 100k
      record lines/s (its `--synthetic` mode: pre-generated lines in bpftrace's output format
      instead of bpftrace itself) and streams a snapshot every 0.07 s to the TUI. The TUI
      process's CPU and the worker's CPU are reported separately.
   Targets: redraws >= 10/s, TUI process CPU <= 30% of one core.
   Reference: the same app idle on the trace monitor for the same time.

    .venv/bin/python benchmarks/tui_stream.py [--seconds 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

EVENTS_PER_S = 100_000
SNAPSHOTS_PER_S = 10
COLS, ROWS = 120, 40

MINIMAL_APP = """
from textual.app import App
from textual.widgets import Static
class Minimal(App):
    BINDINGS = [("ctrl+q", "quit", "Quit")]
    def compose(self):
        yield Static("minimal-first-frame")
Minimal().run()
"""


# --- running something in a pseudo-terminal -----------------------------------------------


class PtyRun:
    """A child process whose stdin/stdout/stderr are a pty of COLS x ROWS; output is drained."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.master = master
        self.output = bytearray()
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                     start_new_session=True)
        os.close(slave)
        self.first_seen: dict[bytes, float] = {}
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.output += data

    def wait_for(self, marker: bytes, timeout: float = 30.0) -> float:
        """Seconds from spawn until ``marker`` appeared in the output."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            with self.lock:
                if marker in self.output:
                    return time.perf_counter() - self.started
            time.sleep(0.002)
        raise RuntimeError(f"{marker!r} never appeared")

    def quit(self) -> None:
        try:
            os.write(self.master, b"\x11")  # ctrl+q
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def child_env() -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8", COLUMNS=str(COLS), LINES=str(ROWS))
    env.pop("NO_COLOR", None)
    return env


# --- 1. time to first frame ---------------------------------------------------------------


def first_frame(repeat: int, workdir: Path) -> dict[str, float]:
    env = child_env()
    env["AORTA_TUI_OUTPUT"] = str(workdir / "out")
    ours, ref = [], []
    for _ in range(repeat):
        run = PtyRun([sys.executable, "-m", "aorta_tui"], env, workdir)
        ours.append(run.wait_for(b"trace monitor"))  # the home screen's key line, drawn in the first frame
        run.quit()
        run = PtyRun([sys.executable, "-c", MINIMAL_APP], env, workdir)
        ref.append(run.wait_for(b"minimal-first-frame"))
        run.quit()
    return {"aorta_tui_s": statistics.median(ours), "minimal_textual_s": statistics.median(ref)}


# --- 2. the stream, run inside the TUI process (child mode) --------------------------------


def stream_child(mode: str, seconds: float, result_path: Path) -> None:
    from aorta_tui.core.events import HistogramSnapshot
    from aorta_tui.tui.app import AortaApp
    from aorta_tui.tui.machine import MachineFacts
    from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen

    stop = threading.Event()
    engine_cpu = [0.0]
    produced = [0]

    def ui_only(screen: TraceMonitorScreen) -> None:
        import numpy as np

        edges = np.geomspace(1.0, 10_000.0, 80)
        weights = np.exp(-((np.log(edges) - 1.5) ** 2))
        count = 0
        t0 = time.perf_counter()
        k = 0
        while not stop.is_set():
            k += 1
            start = time.thread_time()
            count += EVENTS_PER_S // SNAPSHOTS_PER_S
            counts = (weights / weights.sum() * count).astype(int)
            buckets = [[float(edges[i]), float(edges[i + 1]), int(counts[i])] for i in range(len(edges) - 1)]
            screen.offer(HistogramSnapshot(
                run_id="bench", probe_set="synthetic.latency", measures="synthetic stream (benchmark)",
                unit="us", count=count, buckets=buckets,
                percentiles={"p50": 4.5, "p90": 9.0, "p99": 20.0, "max": 9000.0},
                events_per_s=float(EVENTS_PER_S),
                breakdown={f"stream {i}": {"count": count // 16, "p50": 4.5, "mean": 5.0, "max": 90.0}
                           for i in range(16)},
            ))
            produced[0] += EVENTS_PER_S // SNAPSHOTS_PER_S
            engine_cpu[0] += time.thread_time() - start
            stop.wait(max(0.0, t0 + k / SNAPSHOTS_PER_S - time.perf_counter()))

    class BenchApp(AortaApp):
        def on_mount(self) -> None:
            super().on_mount()
            self.set_timer(0.5, self._begin)

        def _begin(self) -> None:
            self.action_goto("trace")
            self.set_timer(0.5, self._measure)

        def _measure(self) -> None:
            screen = self.screen
            assert isinstance(screen, TraceMonitorScreen)
            self._screen = screen
            self._r0 = resource.getrusage(resource.RUSAGE_SELF)
            self._t0 = time.perf_counter()
            self._draws0 = screen.redraws
            self._offers0 = screen._offered
            self._worker_cpu0 = 0.0
            if mode == "ui":
                self._thread = threading.Thread(target=ui_only, args=(screen,), daemon=True)
                self._thread.start()
            elif mode == "pipeline":
                # The trace monitor's own tracer worker, fed by the trace engine's parser and
                # statistics at 100k record lines/s instead of bpftrace.
                screen.start_worker(["--synthetic", str(EVENTS_PER_S)])
                self._worker_cpu0 = process_cpu_s(screen.engine_run.pid)
            self.set_timer(seconds, self._finish)

        def _finish(self) -> None:
            stop.set()
            wall = time.perf_counter() - self._t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (r1.ru_utime - self._r0.ru_utime) + (r1.ru_stime - self._r0.ru_stime)
            worker_cpu = 0.0
            events_per_s = produced[0] / wall
            if mode == "pipeline" and self._screen.engine_run is not None:
                worker_cpu = process_cpu_s(self._screen.engine_run.pid) - self._worker_cpu0
                latest = next(iter(self._screen._latest.values()), None)
                events_per_s = latest.events_per_s if latest else 0.0
                self._screen.stop_trace()
            result = {
                "mode": mode, "wall_s": wall,
                "cpu_core_fraction": cpu / wall,
                "producer_thread_core_fraction": engine_cpu[0] / wall,
                "worker_core_fraction": worker_cpu / wall,
                "redraws_per_s": (self._screen.redraws - self._draws0) / wall,
                "snapshots_per_s": (self._screen._offered - self._offers0) / wall,
                "events_per_s": events_per_s,
            }
            result_path.write_text(json.dumps(result))
            self.exit()

    with tempfile.TemporaryDirectory() as tmp:
        BenchApp(cwd=Path(tmp), output_dir=Path(tmp) / "out",
                 machine_facts=MachineFacts(["(benchmark)"], "fixed", "(benchmark)", "(benchmark)")).run()


def process_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a process so far, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream(mode: str, seconds: float, workdir: Path) -> dict[str, float]:
    result = workdir / f"stream-{mode}.json"
    result.unlink(missing_ok=True)
    run = PtyRun([sys.executable, __file__, "--child", mode, "--seconds", str(seconds), "--result", str(result)],
                 child_env(), workdir)
    try:
        run.proc.wait(seconds + 60)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    if not result.exists():
        tail = bytes(run.output[-2000:]).decode(errors="replace")
        raise RuntimeError(f"the {mode} run wrote no result; terminal tail:\n{tail}")
    return json.loads(result.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=("idle", "ui", "pipeline"))
    parser.add_argument("--result", type=Path)
    args = parser.parse_args()
    if args.child:
        stream_child(args.child, args.seconds, args.result)
        return

    print(f"machine: {os.uname().nodename} ({os.cpu_count()} CPUs), load average {os.getloadavg()[0]:.1f}, "
          f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ff = first_frame(args.repeat, workdir)
        print(f"time to first frame: aorta-tui {ff['aorta_tui_s']:.3f} s (median of {args.repeat}; target <= 0.5 s), "
              f"minimal Textual app {ff['minimal_textual_s']:.3f} s, "
              f"ratio {ff['aorta_tui_s'] / ff['minimal_textual_s']:.2f}x")
        idle = stream("idle", args.seconds, workdir)
        print(f"reference, trace monitor idle: {idle['cpu_core_fraction']:.1%} of a core")
        for mode, label in (("ui", "a. snapshots only (10/s, each describing 100k events/s), made in-process"),
                            ("pipeline", "b. the tracer worker process parsing 100k record lines/s")):
            r = stream(mode, args.seconds, workdir)
            print(f"{label}:\n"
                  f"  events/s {r['events_per_s']:,.0f}; snapshots {r['snapshots_per_s']:.1f}/s; "
                  f"redraws {r['redraws_per_s']:.1f}/s (target >= 10)\n"
                  f"  TUI process CPU {r['cpu_core_fraction']:.1%} of a core (target <= 30%; "
                  f"{r['cpu_core_fraction'] / max(idle['cpu_core_fraction'], 1e-9):.0f}x idle)"
                  + (f", of which the snapshot-making thread {r['producer_thread_core_fraction']:.1%}"
                     if mode == "ui" else "")
                  + (f"; tracer worker process {r['worker_core_fraction']:.1%} of a core" if mode == "pipeline" else ""))


if __name__ == "__main__":
    main()
