"""Which GPU tools exist here (probed once, cached) and per-process GPU sampling through them.

The probe never runs a vendor tool: it looks for ``nvidia-smi`` / ``amd-smi`` / ``rocm-smi``
on PATH and for the driver's device node, so a CPU-only machine pays a few ``stat`` calls once
per orchestrator. Sampling runs the tool (tens of milliseconds) in a background thread of the
worker, at a low rate, and only while a trial runs longer than the first sampling delay; a
trial like ``true`` never causes a tool call. When a tool call fails once (driver gone, tool
wedged), sampling is switched off for the rest of the process with that reason, instead of
paying a failing call per trial.

Figures and what they mean:
- per-process GPU memory: NVIDIA ``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory``
  (MiB, per process and GPU); AMD ``amd-smi process --json`` (VRAM per process) or
  ``rocm-smi --showpids --json`` (VRAM per process). Summed over the trial's process tree.
  A sampled peak is a lower bound of the true peak (a spike between samples is missed).
- GPU utilisation (for the hang detector): ``utilization.gpu`` (NVIDIA), ``gfx_activity``
  (amd-smi) or ``GPU use (%)`` (rocm-smi), per device, for the devices the tree has a context
  on. Device-wide: another process on the same GPU keeps it "busy".
"""

from __future__ import annotations

import functools
import json
import math
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aorta_tui.core import spawn_gate
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.trial import proctree

TOOL_TIMEOUT_S = 5.0

_broken_reason: str | None = None  # set once a tool call fails; later samples skip the tool

_T = TypeVar("_T")


@dataclass(frozen=True)
class GpuTools:
    """What this machine offers for GPU sampling. ``tool`` is None when nothing does."""

    vendor: str | None  # "nvidia" | "amd" | None
    tool: str | None  # "nvidia-smi" | "amd-smi" | "rocm-smi" | None
    path: str | None
    reason: str | None  # why sampling is not possible (tool is None)

    def to_dict(self) -> dict[str, Any]:
        return {"vendor": self.vendor, "tool": self.tool, "path": self.path, "reason": self.reason}


@functools.lru_cache(maxsize=1)
def probe() -> GpuTools:
    """Find the vendor tool once per process (cheap: PATH lookups and stat calls only)."""
    nvidia_smi = shutil.which("nvidia-smi")
    nvidia_dev = Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists()
    if nvidia_smi and nvidia_dev:
        return GpuTools("nvidia", "nvidia-smi", nvidia_smi, None)
    amd_dev = Path("/dev/kfd").exists()
    for tool in ("amd-smi", "rocm-smi"):
        path = shutil.which(tool)
        if path and amd_dev:
            return GpuTools("amd", tool, path, None)
    if nvidia_smi:
        reason = "nvidia-smi is on PATH but no NVIDIA driver is loaded (/dev/nvidiactl missing)"
    elif amd_dev:
        reason = "/dev/kfd exists but neither amd-smi nor rocm-smi is on PATH"
    elif shutil.which("amd-smi") or shutil.which("rocm-smi"):
        reason = "amd-smi/rocm-smi is on PATH but no AMD GPU driver is loaded (/dev/kfd missing)"
    else:
        reason = "no GPU tool on this machine: no nvidia-smi, amd-smi or rocm-smi with a loaded driver"
    return GpuTools(None, None, None, reason)


def sampling_unavailable() -> str | None:
    """Why GPU sampling cannot run here, or ``None`` when it can."""
    tools = probe()
    if tools.tool is None:
        return tools.reason
    return _broken_reason


def _mark_broken(reason: str) -> None:
    global _broken_reason
    _broken_reason = reason


def _run_tool(argv: list[str]) -> str:
    """Run a vendor tool; raise ``RuntimeError`` with a one-line reason when it fails."""
    try:
        proc = spawn_gate.run(
            argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{Path(argv[0]).name} did not answer within {TOOL_TIMEOUT_S:g} s") from exc
    except OSError as exc:
        raise RuntimeError(f"{Path(argv[0]).name} could not run: {exc}") from exc
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        raise RuntimeError(
            f"{Path(argv[0]).name} exited {proc.returncode}" + (f": {first[0]}" if first else "")
        )
    return proc.stdout


# --- parsers (pure; unit-tested against recorded tool output) --------------------------------

_UNIT_BYTES = {
    "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
    "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3,
}  # fmt: skip


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu: str  # device key: NVIDIA uuid, AMD index ("0") or "*" when the tool does not say
    used_bytes: int | None


def parse_nvidia_compute_apps(text: str) -> list[GpuProcess]:
    """``--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`` (MiB)."""
    out: list[GpuProcess] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not ascii_digits(parts[0]):
            continue
        used = int(parts[2]) * 1024**2 if ascii_digits(parts[2]) else None  # "[N/A]" under MIG
        out.append(GpuProcess(int(parts[0]), parts[1], used))
    return out


def parse_nvidia_utilisation(text: str) -> dict[str, float | None]:
    """``--query-gpu=uuid,utilization.gpu --format=csv,noheader,nounits`` (percent)."""
    out: dict[str, float | None] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0]:
            continue
        try:
            out[parts[0]] = float(parts[1])
        except ValueError:
            out[parts[0]] = None
    return out


def _bytes_of(value: object) -> int | None:
    """amd-smi values are ``123`` or ``{"value": 123, "unit": "MB"}`` (unit absent: bytes)."""
    unit = "B"
    if isinstance(value, dict):
        unit = str(value.get("unit", "B")).upper()
        value = value.get("value")
    if isinstance(value, str):
        head = value.split()
        if len(head) == 2:
            value, unit = head[0], head[1].upper()
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value * _UNIT_BYTES.get(unit, 1))


def parse_amd_smi_process(text: str) -> list[GpuProcess]:
    """``amd-smi process --json``: a list of ``{gpu, process_list: [{process_info: {...}}]}``.

    The layout moved between amd-smi releases; this walks it defensively: any dict with a
    ``pid`` is a process, its VRAM is ``memory_usage.vram_mem`` or ``mem_usage`` or ``mem``.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return []
    out: list[GpuProcess] = []
    gpus = data if isinstance(data, list) else [data]
    for entry in gpus:
        if not isinstance(entry, dict):
            continue
        gpu = str(entry.get("gpu", "*"))
        for item in _walk_dicts(entry.get("process_list", [])):
            pid = item.get("pid")
            if not isinstance(pid, int) or isinstance(pid, bool):
                continue
            mem = item.get("memory_usage")
            used = None
            if isinstance(mem, dict) and "vram_mem" in mem:
                used = _bytes_of(mem["vram_mem"])
            elif "mem_usage" in item:
                used = _bytes_of(item["mem_usage"])
            elif "mem" in item:
                used = _bytes_of(item["mem"])
            out.append(GpuProcess(pid, gpu, used))
    return out


def parse_amd_smi_usage(text: str) -> dict[str, float | None]:
    """``amd-smi metric --usage --json``: ``[{gpu: 0, usage: {gfx_activity: ...}}]``."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, float | None] = {}
    for entry in data if isinstance(data, list) else [data]:
        if not isinstance(entry, dict) or "gpu" not in entry:
            continue
        usage = entry.get("usage")
        value = usage.get("gfx_activity") if isinstance(usage, dict) else None
        if isinstance(value, dict):
            value = value.get("value")
        try:
            out[str(entry["gpu"])] = float(value) if value is not None else None
        except (TypeError, ValueError):
            out[str(entry["gpu"])] = None
    return out


def parse_rocm_smi_pids(text: str) -> list[GpuProcess]:
    """``rocm-smi --showpids --json``: ``{"system": {"PID123": "name, ngpus, vram, sdma, cu"}}``.

    rocm-smi does not say which GPU a process uses, so ``gpu`` is ``"*"`` (all of them).
    """
    try:
        data = json.loads(text)
    except ValueError:
        return []
    system = data.get("system") if isinstance(data, dict) else None
    out: list[GpuProcess] = []
    if not isinstance(system, dict):
        return out
    for key, value in system.items():
        if not (isinstance(key, str) and key.startswith("PID") and ascii_digits(key[3:])):
            continue
        parts = [p.strip() for p in str(value).split(",")]
        used = int(parts[2]) if len(parts) > 2 and ascii_digits(parts[2]) else None
        out.append(GpuProcess(int(key[3:]), "*", used))
    return out


def parse_rocm_smi_use(text: str) -> dict[str, float | None]:
    """``rocm-smi --showuse --json``: ``{"card0": {"GPU use (%)": "0"}}``."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, float | None] = {}
    if not isinstance(data, dict):
        return out
    for card, fields in data.items():
        if not (isinstance(card, str) and card.startswith("card") and isinstance(fields, dict)):
            continue
        raw = fields.get("GPU use (%)")
        try:
            out[card[4:]] = float(raw) if raw is not None else None
        except (TypeError, ValueError):
            out[card[4:]] = None
    return out


def _walk_dicts(node: object) -> Iterable[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk_dicts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk_dicts(value)


# --- live queries -----------------------------------------------------------------------------


def query_processes(tools: GpuTools) -> list[GpuProcess]:
    assert tools.path is not None
    if tools.tool == "nvidia-smi":
        text = _run_tool([tools.path, "--query-compute-apps=pid,gpu_uuid,used_memory",
                          "--format=csv,noheader,nounits"])  # fmt: skip
        return parse_nvidia_compute_apps(text)
    if tools.tool == "amd-smi":
        return parse_amd_smi_process(_run_tool([tools.path, "process", "--json"]))
    return parse_rocm_smi_pids(_run_tool([tools.path, "--showpids", "--json"]))


def query_utilisation(tools: GpuTools) -> dict[str, float | None]:
    assert tools.path is not None
    if tools.tool == "nvidia-smi":
        text = _run_tool([tools.path, "--query-gpu=uuid,utilization.gpu",
                          "--format=csv,noheader,nounits"])  # fmt: skip
        return parse_nvidia_utilisation(text)
    if tools.tool == "amd-smi":
        return parse_amd_smi_usage(_run_tool([tools.path, "metric", "--usage", "--json"]))
    return parse_rocm_smi_use(_run_tool([tools.path, "--showuse", "--json"]))


# Error counters read before and after a trial (tier 3 where the kernel log is unreadable,
# e.g. in a container). Names are normalised: ecc_uncorrected, ecc_corrected.
Counters = dict[str, dict[str, int]]  # device -> counter -> value


def _count(raw: object) -> int | None:
    if isinstance(raw, dict):
        raw = raw.get("value")
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and ascii_digits(raw.strip()):
        return int(raw.strip())
    return None


def parse_nvidia_ecc(text: str) -> Counters:
    """``--query-gpu=uuid,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total``.

    ``[N/A]`` (ECC off, or a GPU without ECC) leaves the counter out.
    """
    out: Counters = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0]:
            continue
        values = {"ecc_uncorrected": _count(parts[1]), "ecc_corrected": _count(parts[2])}
        out[parts[0]] = {k: v for k, v in values.items() if v is not None}
    return out


def parse_amd_smi_ecc(text: str) -> Counters:
    """``amd-smi metric --ecc --json``: ``[{gpu, ecc: {total_uncorrectable_count, ...}}]``."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out: Counters = {}
    for entry in data if isinstance(data, list) else [data]:
        if not isinstance(entry, dict) or "gpu" not in entry or not isinstance(entry.get("ecc"), dict):
            continue
        ecc = entry["ecc"]
        values = {
            "ecc_uncorrected": _count(ecc.get("total_uncorrectable_count")),
            "ecc_corrected": _count(ecc.get("total_correctable_count")),
        }
        out[str(entry["gpu"])] = {k: v for k, v in values.items() if v is not None}
    return out


def query_error_counters(tools: GpuTools) -> Counters:
    assert tools.path is not None
    if tools.tool == "nvidia-smi":
        text = _run_tool([tools.path, "--query-gpu=uuid,ecc.errors.uncorrected.volatile.total,"
                          "ecc.errors.corrected.volatile.total", "--format=csv,noheader,nounits"])  # fmt: skip
        return parse_nvidia_ecc(text)
    if tools.tool == "amd-smi":
        return parse_amd_smi_ecc(_run_tool([tools.path, "metric", "--ecc", "--json"]))
    raise RuntimeError("rocm-smi error counters are not read (install amd-smi)")


def counter_increase(before: Counters, after: Counters) -> Counters:
    """Counters that grew, by how much (devices/counters missing on either side are skipped)."""
    out: Counters = {}
    for device, values in after.items():
        for name, value in values.items():
            old = before.get(device, {}).get(name)
            if old is not None and value > old:
                out.setdefault(device, {})[name] = value - old
    return out


@dataclass(frozen=True)
class UtilReading:
    """One GPU-idle sample for the hang detector: ``idle`` is None when not measurable."""

    at: float  # time.monotonic()
    idle: bool | None
    reason: str | None = None
    idle_since: float | None = None  # first sample of the current idle run


class GpuSampler:
    """Samples the GPU memory (and optionally utilisation) of one trial's process tree.

    A daemon thread waits on an Event between samples (no sleep loop) so ``stop`` returns at
    once. The first sample is taken ``first_after_s`` after the start, so short trials never
    call the vendor tool.
    """

    def __init__(
        self,
        root_pid: int,
        *,
        tools: GpuTools | None = None,
        interval_s: float = 1.0,
        first_after_s: float = 0.2,
        want_utilisation: bool = False,
    ) -> None:
        self.tools = tools or probe()
        self.root_pid = root_pid
        self.interval_s = interval_s
        self.first_after_s = first_after_s
        self.want_utilisation = want_utilisation
        self.samples = 0
        self.peak_bytes: int | None = None
        self.error: str | None = None
        self.saw_tree_process = False
        self._counters_before: Counters | None = None
        self.counters_delta: Counters | None = None  # None: not read (see counters_reason)
        self.counters_reason: str | None = "the trial ended before the first GPU sample"
        self._util: UtilReading | None = None
        self.sampled = threading.Event()  # set after every sample (lets callers wait, no polling)
        self._stop = threading.Event()
        self._end_in_thread = False  # request_stop: the thread reads the end counters
        self._thread = threading.Thread(target=self._run, name=f"gpu-sampler-{root_pid}", daemon=True)
        self.tool_calls = 0  # what sampling cost (the trial's timeline shows it)
        self.tool_wall_ns = 0
        self.thread_cpu_ns = 0

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Stop sampling without waiting: the thread reads the end counters itself, while the
        caller reaps and drains (``stop`` then only waits, bounded, for it)."""
        self._end_in_thread = True
        self._stop.set()

    def stop(self, join_s: float = 0.5) -> None:
        """Stop sampling; when the first sample read error counters, read them again (one
        tool call at the end of a trial that ran past the first sample). Waits at most
        ``join_s`` for the thread (a vendor tool that hangs never holds the trial's end)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(join_s)
        if self._thread.is_alive():
            if self._counters_before is not None and self.counters_delta is None:
                self.counters_reason = (f"error counters after the trial: the sampler was still in a "
                                        f"{self.tools.tool} call {join_s:g} s after the trial ended")
            return
        self._read_counters_after()

    def _read_counters_after(self) -> None:
        if self._counters_before is not None and self.counters_delta is None:
            try:
                after = self._timed(query_error_counters)
            except RuntimeError as exc:
                self.counters_reason = f"error counters after the trial: {exc}"
                return
            self.counters_delta = counter_increase(self._counters_before, after)
            self.counters_reason = None

    def costs(self) -> dict[str, Any]:
        """Samples taken, vendor-tool calls and their wall time, the thread's own CPU time
        (the tools' CPU time is their processes', not measured here)."""
        return {"samples": self.samples, "tool_calls": self.tool_calls,
                "tool_wall_ms": round(self.tool_wall_ns / 1e6, 3),
                "thread_cpu_ms": round(self.thread_cpu_ns / 1e6, 3),
                "first_after_s": self.first_after_s, "interval_s": self.interval_s}

    def _timed(self, query: Callable[[GpuTools], _T]) -> _T:
        start = time.perf_counter_ns()
        try:
            return query(self.tools)
        finally:
            self.tool_calls += 1
            self.tool_wall_ns += time.perf_counter_ns() - start

    def latest_utilisation(self) -> UtilReading | None:
        return self._util

    def result(self) -> tuple[int | None, str | None, str | None]:
        """(peak bytes, reason when None, source description)."""
        tool = self.tools.tool
        source = (
            f"{tool} per-process memory summed over the trial's process tree, sampled every "
            f"{self.interval_s:g} s from {self.first_after_s:g} s (a lower bound of the true peak)"
        )
        if self.peak_bytes is not None:
            return self.peak_bytes, None, source
        if self.error:
            return None, self.error, None
        if self.samples == 0:
            return None, (
                f"the trial ended before the first GPU sample (taken {self.first_after_s:g} s "
                f"after the start, then every {self.interval_s:g} s)"
            ), None
        if self.saw_tree_process:
            return None, f"{tool} does not report per-process memory here (e.g. under MIG)", None
        return None, (
            f"{tool} listed no GPU process of this trial's process tree (CPU-only workload, "
            "or the pids live in another PID namespace)"
        ), None

    def _run(self) -> None:
        cpu0 = time.thread_time_ns()
        try:
            if self._stop.wait(self.first_after_s):
                return
            self._read_counters_before()
            while True:
                self._sample_once()
                self.sampled.set()
                if self.error or self._stop.wait(self.interval_s):
                    return
        finally:
            if self._end_in_thread:
                self._read_counters_after()
            self.thread_cpu_ns = time.thread_time_ns() - cpu0

    def _read_counters_before(self) -> None:
        # A failing counter query (e.g. a field this driver lacks) only turns the counters
        # off for this trial; memory and utilisation sampling go on.
        if _broken_reason:
            self.counters_reason = _broken_reason
            return
        try:
            self._counters_before = self._timed(query_error_counters)
        except RuntimeError as exc:
            self.counters_reason = f"error counters: {exc}"
            return
        if not any(self._counters_before.values()):
            self._counters_before = None
            self.counters_reason = f"{self.tools.tool} reports no ECC counters here (ECC off?)"

    def _sample_once(self) -> None:
        if _broken_reason:
            self.error = _broken_reason
            return
        try:
            procs = self._timed(query_processes)
            tree = proctree.tree_pids(self.root_pid, pgid=self.root_pid)
            tree.add(self.root_pid)
            mine = [p for p in procs if p.pid in tree]
            util = self._timed(query_utilisation) if self.want_utilisation else None
        except RuntimeError as exc:
            _mark_broken(str(exc))
            self.error = str(exc)
            self._util = UtilReading(time.monotonic(), None, str(exc))
            return
        self.samples += 1
        if mine:
            self.saw_tree_process = True
            sizes = [p.used_bytes for p in mine if p.used_bytes is not None]
            if sizes:
                total = sum(sizes)
                self.peak_bytes = total if self.peak_bytes is None else max(self.peak_bytes, total)
        if util is not None:
            previous = self._util
            reading = _idle_reading(mine, util, self.tools.tool or "")
            if reading.idle:
                since = previous.idle_since if previous and previous.idle else reading.at
                reading = UtilReading(reading.at, True, None, since)
            self._util = reading


def _idle_reading(mine: list[GpuProcess], util: dict[str, float | None], tool: str) -> UtilReading:
    now = time.monotonic()
    if not mine:
        return UtilReading(now, None, "the trial's process tree has no GPU context")
    devices = {p.gpu for p in mine}
    keys = list(util) if "*" in devices else [d for d in devices if d in util]
    values = [util[k] for k in keys]
    if not values or any(v is None for v in values):
        return UtilReading(now, None, f"{tool} reports no utilisation for the tree's GPUs")
    return UtilReading(now, all(v == 0 for v in values))
