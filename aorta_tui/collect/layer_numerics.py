"""The ``layer_numerics`` collector, inside the trial worker: per-layer activation/gradient
statistics of the workload's torch model, the way upstream AORTA's NaN logger records them.

Upstream (``aorta.instrumentation.layer_numerics``) arms forward hooks on every watched module
and backward hooks for the input gradients, computes each tensor's NaN / Inf / huge counts and
finite extrema **on the device**, and drains them to the host in one batched copy per step (no
per-layer sync, so the kernel order and timing stay the workload's). Here the same: the hooks
are torch's *global* module hooks (``register_module_forward_hook`` and friends), so any model
a workload builds is watched without the workload knowing; a step ends at the workload's own
``on_step`` call. Module names are the root model's ``named_modules()`` paths, assigned the
first time a root module runs.

Output (``<trial>/layer_numerics/``, upstream's file names and record keys):

- ``layers_rank<R>.jsonl``: one JSON object per line, ``type: "layer_step"``, with ``step``,
  ``layer_name``, ``direction`` (``fwd`` / ``bwd`` / ``param``), ``role`` (``act``, ``input``,
  ``igrad``, ``weight``, ``bias``, ``wgrad``, ``bgrad``), ``param_name``, ``shape``,
  ``dtype``, ``nan_count``, ``inf_count``, ``finite_count``, ``huge_count``,
  ``finite_abs_max`` / ``finite_max`` / ``finite_min`` (``null`` when nothing is finite),
  ``numel``, ``bad``, ``rank``, ``pid``, ``t`` (monotonic seconds). A clean record is written
  one step in ``NANLOG_SAMPLE_EVERY`` (step 0 always); a bad one always; with
  ``NANLOG_PRE_CONTEXT`` = K the last K steps' unwritten records are written when the first
  bad record appears (the run-up).
- ``summary_rank<R>.json`` (atomic): ``steps_seen``, ``records_written``, ``first_bad``
  (``{step, layer, direction, kind}`` or ``null``), ``watched_names``, ``channels``,
  ``huge_threshold``, ``sample_every``, ``pre_context``, ``ignored_options``, ``error``.

Options (``collect: {layer_numerics: {NANLOG_*: "..."}}``, strings, as upstream):
``NANLOG_SAMPLE_EVERY`` (50), ``NANLOG_PRE_CONTEXT`` (10), ``NANLOG_CHANNELS``
(``act,input,igrad,weight,bias,wgrad,bgrad``), ``NANLOG_HUGE_THRESHOLD`` (1e10),
``NANLOG_WATCH_TYPES`` (``Linear``; off when ``NANLOG_WATCH_NAMES`` is set),
``NANLOG_WATCH_NAMES``, ``NANLOG_MAX_RECORDS`` (200000), ``NANLOG_STOP_ON_FIRST``. Upstream's
torchrec pipeline / spec knobs are listed in the summary's ``ignored_options``. Differences:
parameters and their gradients are read at the end of the step (after the optimizer), not at
the next step's start, so ``value_is_from_prev_step`` is ``false``. A collector problem never
fails the trial: it is the summary's ``error``.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.collect.summaries import FirstBad, LayerNumericsSummary
from aorta_tui.core.numerals import ascii_digits

if TYPE_CHECKING:  # torch is imported where it runs: a worker without the collector never loads it
    from torch import Tensor
    from torch.nn import Module

OUTPUT_SUBDIR = "layer_numerics"
DEFAULTS: dict[str, str] = {
    "NANLOG_PRE_CONTEXT": "10",
    "NANLOG_SAMPLE_EVERY": "50",
    "NANLOG_CHANNELS": "act,input,igrad,weight,bias,wgrad,bgrad",
    "NANLOG_HUGE_THRESHOLD": "1e10",
    "NANLOG_WATCH_TYPES": "Linear",
    "NANLOG_WATCH_NAMES": "",
    "NANLOG_MAX_RECORDS": "200000",
    "NANLOG_STOP_ON_FIRST": "0",
}
CHANNELS = ("act", "input", "igrad", "weight", "bias", "wgrad", "bgrad")
_KEYS = ("nan_count", "inf_count", "finite_count", "huge_count", "finite_abs_max",
         "finite_max", "finite_min", "numel")


def option_problems(options: dict[str, str]) -> list[tuple[str, str, str]]:
    """(option, problem, fix) for each option that cannot be honoured as written; upstream's
    other ``NANLOG_*`` knobs are accepted (and listed as ignored), anything else is an error."""
    out: list[tuple[str, str, str]] = []
    for key, value in options.items():
        if not key.startswith("NANLOG_"):
            out.append((key, "layer_numerics options are NANLOG_* variables",
                        "known: " + ", ".join(sorted(DEFAULTS))))
        elif key in ("NANLOG_SAMPLE_EVERY", "NANLOG_PRE_CONTEXT", "NANLOG_MAX_RECORDS"):
            if not ascii_digits(value.strip()) or (key == "NANLOG_SAMPLE_EVERY" and int(value) < 1):
                out.append((key, f"expected a whole number{' >= 1' if key == 'NANLOG_SAMPLE_EVERY' else ''}, "
                            f"got {value!r}", f'e.g. {key}: "10"'))
        elif key == "NANLOG_HUGE_THRESHOLD":
            try:
                # finite too: an infinite threshold would be written as the non-JSON
                # `Infinity` in the summary, which its reader refuses as damage
                ok = 0 < float(value) < float("inf")
            except ValueError:
                ok = False
            if not ok:
                out.append((key, f"expected a positive number, got {value!r}", '"1e10"'))
        elif key == "NANLOG_CHANNELS":
            bad = [c for c in _split(value) if c not in CHANNELS]
            if bad or not _split(value):
                out.append((key, f"unknown channel {bad[0]!r}" if bad else "names no channel",
                            "channels: " + ",".join(CHANNELS)))
    return out


def _split(value: str) -> list[str]:
    return [t for t in value.replace(",", " ").split() if t]


class LayerNumerics:
    """Global module hooks recording per-layer statistics into ``out_dir`` (one rank)."""

    def __init__(self, out_dir: Path, options: dict[str, str], *, rank: int = 0) -> None:
        opts = {**DEFAULTS, **{k: str(v) for k, v in options.items() if k in DEFAULTS}}
        if "NANLOG_WATCH_NAMES" in options and "NANLOG_WATCH_TYPES" not in options:
            opts["NANLOG_WATCH_TYPES"] = ""  # naming a layer does not also pull in every Linear
        self.out_dir = out_dir
        self.rank = rank
        self.ignored = sorted(k for k in options if k not in DEFAULTS)
        self.sample_every = max(1, int(opts["NANLOG_SAMPLE_EVERY"]))
        self.pre_context = int(opts["NANLOG_PRE_CONTEXT"])
        self.channels = set(_split(opts["NANLOG_CHANNELS"])) & set(CHANNELS)
        self.huge = float(opts["NANLOG_HUGE_THRESHOLD"])
        self.types = set(_split(opts["NANLOG_WATCH_TYPES"]))
        self.names = _split(opts["NANLOG_WATCH_NAMES"])
        self.max_records = int(opts["NANLOG_MAX_RECORDS"])
        self.stop_on_first = opts["NANLOG_STOP_ON_FIRST"].strip() in ("1", "true", "yes")
        self.step = 0
        self.written = 0
        self.first_bad: dict[str, Any] | None = None
        self.error: str | None = None
        self._pending: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._buffer: deque[list[dict[str, Any]]] = deque(maxlen=max(1, self.pre_context))
        self._flushed = False
        self._named: weakref.WeakKeyDictionary[Module, str] = weakref.WeakKeyDictionary()
        self._watched: weakref.WeakKeyDictionary[Module, str] = weakref.WeakKeyDictionary()
        self._handles: list[Any] = []
        self._watched_names: set[str] = set()  # kept after the workload frees its model
        self.jsonl = out_dir / f"layers_rank{rank}.jsonl"
        self.summary = out_dir / f"summary_rank{rank}.json"

    # -- hooks --------------------------------------------------------------------------------

    def install(self) -> None:
        import warnings

        import torch.nn.modules.module as mm

        # the first watched layer's input needs no grad: torch says so once per backward
        warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl.write_text("")  # a re-run attempt never appends to the last one's records
        self._handles.append(mm.register_module_forward_pre_hook(self._pre))
        self._handles.append(mm.register_module_forward_hook(self._fwd))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre(self, module: Module, _args: object) -> None:
        if module in self._named:
            return
        # the first time a module runs unnamed it is a root: name its whole tree once
        root = type(module).__name__
        for name, sub in module.named_modules():
            if sub not in self._named:
                full = name or root
                self._named[sub] = full
                if self._watch(sub, full):
                    self._watched[sub] = full
                    self._watched_names.add(full)
                    if "igrad" in self.channels:  # only watched modules: autograd elsewhere untouched
                        self._handles.append(sub.register_full_backward_hook(self._bwd))

    def _watch(self, module: Module, name: str) -> bool:
        return type(module).__name__ in self.types or any(n in name for n in self.names)

    def _fwd(self, module: Module, args: object, output: object) -> None:
        name = self._watched.get(module)
        if name is None:
            return
        if "act" in self.channels:
            self._record(name, "fwd", "act", _first(output))
        if "input" in self.channels:
            self._record(name, "fwd", "input", _first(args))

    def _bwd(self, module: Module, grad_input: object, _grad_output: object) -> None:
        name = self._watched.get(module)
        if name is not None:
            self._record(name, "bwd", "igrad", _first(grad_input))

    def _record(self, layer: str, direction: str, role: str, t: object,
                param_name: str | None = None) -> None:
        import torch

        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        rec = {"type": "layer_step", "step": self.step, "rank": self.rank, "pid": os.getpid(),
               "layer_name": layer, "direction": direction, "role": role,
               "param_name": param_name, "value_is_from_prev_step": False,
               "shape": list(t.shape), "dtype": str(t.dtype), "t": time.monotonic()}
        with torch.no_grad():
            self._pending.append((rec, _device_stats(t.detach(), self.huge)))

    # -- steps --------------------------------------------------------------------------------

    def end_step(self) -> None:
        """The workload finished a step: read the parameters, drain, advance."""
        try:
            self._params()
            self._drain()
        except Exception as exc:  # never the trial's failure: the summary says it
            self.error = self.error or f"{type(exc).__name__}: {exc}"
        self.step += 1

    def _params(self) -> None:
        want = self.channels & {"weight", "bias", "wgrad", "bgrad"}
        if not want:
            return
        for module, name in list(self._watched.items()):
            for pname, p in module.named_parameters(recurse=False):
                kind = "weight" if p.ndim >= 2 else "bias"
                if kind in want:
                    self._record(name, "param", kind, p, pname)
                if f"{kind[0]}grad" in want and p.grad is not None:
                    self._record(name, "param", f"{kind[0]}grad", p.grad, pname)

    def _drain(self) -> None:
        import torch

        if not self._pending:
            return
        pending, self._pending = self._pending, []
        flat = [stats[k].to(torch.float64).reshape(()) for _, stats in pending for k in _KEYS]
        device = flat[0].device  # a model on one device: one stack, one host copy per step
        values = torch.stack([v.to(device) for v in flat]).cpu().tolist()
        step_records, bad_now = [], False
        for i, (rec, _) in enumerate(pending):
            d = dict(zip(_KEYS, values[i * len(_KEYS):(i + 1) * len(_KEYS)], strict=True))
            for k in ("nan_count", "inf_count", "finite_count", "huge_count", "numel"):
                rec[k] = int(d[k])
            finite = rec["finite_count"] > 0
            for k in ("finite_abs_max", "finite_max", "finite_min"):
                rec[k] = d[k] if finite else None  # strict JSON: no Infinity tokens
            rec["bad"] = bool(rec["nan_count"] or rec["inf_count"] or rec["huge_count"])
            if rec["bad"] and self.first_bad is None:
                kind = "nan" if rec["nan_count"] else "inf" if rec["inf_count"] else "huge"
                self.first_bad = {"step": rec["step"], "layer": rec["layer_name"],
                                  "direction": rec["direction"], "role": rec["role"], "kind": kind}
                bad_now = True
            step_records.append(rec)
        if bad_now and self.pre_context and not self._flushed:
            for held in self._buffer:  # the run-up, oldest first, before this step
                self._write(held)
            self._buffer.clear()
            self._flushed = True
        keep: list[dict[str, Any]] = []
        held = []  # typed by the loop over self._buffer above
        for rec in step_records:
            sampled = rec["bad"] or self._flushed or self.step % self.sample_every == 0
            if self.stop_on_first and self.first_bad is not None and not rec["bad"]:
                continue
            (keep if sampled else held).append(rec)
        self._write(keep)
        if self.pre_context and not self._flushed and held:
            self._buffer.append(held)

    def _write(self, records: list[dict[str, Any]]) -> None:
        room = self.max_records - self.written
        if room <= 0 or not records:
            return
        with self.jsonl.open("a", encoding="utf-8") as fh:
            for rec in records[:room]:
                fh.write(json.dumps(rec, allow_nan=False) + "\n")
        self.written += min(room, len(records))

    def finish(self) -> LayerNumericsSummary:
        """Drain what is left (a step the workload did not report) and write the summary."""
        self.remove()
        if self._pending:
            try:
                self._drain()
            except Exception as exc:
                self.error = self.error or f"{type(exc).__name__}: {exc}"
        summary = LayerNumericsSummary(
            rank=self.rank, pid=os.getpid(), steps_seen=self.step, records_written=self.written,
            first_bad=None if self.first_bad is None else FirstBad(**self.first_bad),
            huge_threshold=self.huge, sample_every=self.sample_every,
            pre_context=self.pre_context, pre_context_flushed=self._flushed,
            channels=tuple(sorted(self.channels)), watch_types=tuple(sorted(self.types)),
            watch_names=tuple(self.names), watched_count=len(self._watched_names),
            watched_names=tuple(sorted(self._watched_names)),
            ignored_options=tuple(self.ignored), error=self.error)
        from aorta_tui.core.atomic import atomic_write_json

        atomic_write_json(self.summary, summary.to_json())
        return summary


def _first(x: object) -> object:
    if isinstance(x, (tuple, list)):
        return x[0] if x else None
    return x


def _device_stats(t: Tensor, huge: float) -> dict[str, Tensor]:
    """Upstream's reductions, left on the tensor's device (no host sync here)."""
    import torch

    if t.dtype.is_floating_point or t.dtype.is_complex:
        t = t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
        fin = torch.isfinite(t)
        zero = torch.zeros((), dtype=t.dtype, device=t.device)
        abs_safe = torch.where(fin, t.abs(), zero)
        safe_max = torch.where(fin, t, torch.full((), float("-inf"), dtype=t.dtype, device=t.device))
        safe_min = torch.where(fin, t, torch.full((), float("inf"), dtype=t.dtype, device=t.device))
    else:
        t = t.to(torch.int64)
        fin = torch.ones_like(t, dtype=torch.bool)
        abs_safe, safe_max, safe_min = t.abs(), t, t
    empty = t.numel() == 0
    return {
        "nan_count": torch.isnan(t).sum(), "inf_count": torch.isinf(t).sum(),
        "finite_count": fin.sum(), "huge_count": (fin & (t.abs() > huge)).sum(),
        "finite_abs_max": zero_if(empty, abs_safe, "max"), "finite_max": zero_if(empty, safe_max, "max"),
        "finite_min": zero_if(empty, safe_min, "min"),
        "numel": torch.tensor(t.numel(), device=t.device),
    }


def zero_if(empty: bool, t: Tensor, op: str) -> Tensor:
    """max/min of an empty tensor raise: an empty tensor has no finite value (reported null)."""
    import torch

    if empty:
        return torch.zeros((), device=t.device)
    return t.max() if op == "max" else t.min()


__all__ = ["CHANNELS", "DEFAULTS", "OUTPUT_SUBDIR", "LayerNumerics", "option_problems"]
