"""`queue run`'s options as data, below the command line.

A policy's ``harness_args`` (policy files, the presets) and ``policy sweep --queue-arg`` are
written as `queue run` flags: that is the language users know. The policy sweep used to pass them
to a `queue run` command line in a child process; an engine never runs the CLI (docs/architecture.md),
so they are parsed here into :class:`QueueRunConfig` fields and the trial runs through the
engine entry point (``python -m aorta_tui.hwqueue.child``). tests/hwqueue/test_hwqueue_options.py
holds this table against the real `queue run` command, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.hwqueue.harness import QueueRunConfig, resolve_size


@dataclass(frozen=True)
class QueueOption:
    flags: tuple[str, ...]
    field: str  # the QueueRunConfig field it sets
    kind: str  # count (>= 1), count0 (>= 0), text, flag (no value), param (KEY=VALUE), devices


OPTIONS: tuple[QueueOption, ...] = (
    QueueOption(("--devices",), "devices", "devices"),
    QueueOption(("--sync-mode",), "sync_mode", "text"),
    QueueOption(("--dtype",), "dtype", "text"),
    QueueOption(("--size",), "size", "text"),
    QueueOption(("--param", "-p"), "params", "param"),
    QueueOption(("--timeline",), "keep_timeline", "flag"),
    QueueOption(("--timing",), "timing", "text"),
    QueueOption(("--detail-iterations",), "detail_iterations", "count"),
    QueueOption(("--profiler-trace",), "profiler_trace", "text"),
    QueueOption(("--ebpf-trace",), "ebpf_trace", "flag"),
    QueueOption(("--stream-priority",), "stream_priority", "text"),
    QueueOption(("--graph",), "graph", "flag"),
)
# set by the sweep itself, once for every trial (its own options say them)
SET_BY_SWEEP = ("-o", "--output", "-s", "--streams", "-d", "--device", "-i", "--iterations",
                "-w", "--warmup", "--json")
# `queue run` options that are about one command line, not one trial
CLI_ONLY = ("--repeat", "--quiet", "-q", "--run-id", "--help")
_BY_FLAG = {flag: opt for opt in OPTIONS for flag in opt.flags}


def check_not_set_by_sweep(args: Sequence[str], *, where: str) -> None:
    """Refuse the flags the sweep sets for every trial (a second value would be ambiguous)."""
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in SET_BY_SWEEP:
            raise UsageError(f"{where} {arg!r}: {flag} is set by the sweep itself",
                             hint="use the sweep's own option (--streams, --device, "
                                  "--iterations, --warmup, --output)")


def queue_overrides(args: Sequence[str], *, where: str) -> dict[str, Any]:
    """The QueueRunConfig fields that `queue run` flags ``args`` set; ``where`` names their
    source in messages (``policy 'lc' harness_args``, ``--queue-arg``)."""
    check_not_set_by_sweep(args, where=where)
    out: dict[str, Any] = {}
    items = list(args)
    while items:
        flag, sep, inline = items.pop(0).partition("=")
        opt = _BY_FLAG.get(flag)
        if opt is None and flag in CLI_ONLY:
            raise UsageError(f"{where}: {flag} is about one `queue run` command line, not a trial",
                             hint="a policy sweep repeats trials with --trials and names its run with -o")
        if opt is None:
            raise UsageError(f"{where}: {flag!r} is not a `queue run` option a trial can take",
                             hint="the options: " + ", ".join(o.flags[0] for o in OPTIONS)
                                  + " (see `aorta-tui queue run --help`)")
        if opt.kind == "flag":
            if sep:
                raise UsageError(f"{where}: {flag} takes no value, not {inline!r}", hint=f"write {flag} alone")
            out[opt.field] = True
            continue
        if not sep:
            if not items:
                raise UsageError(f"{where}: {flag} needs a value", hint=f"e.g. {flag} VALUE")
            inline = items.pop(0)
        _set(out, opt, inline, where=where)
    return out


def _set(out: dict[str, Any], opt: QueueOption, value: str, *, where: str) -> None:
    flag = opt.flags[0]
    if opt.kind in ("count", "count0"):
        least = 1 if opt.kind == "count" else 0
        if not ascii_digits(value.strip()) or int(value) < least:
            raise UsageError(f"{where}: {flag} wants a whole number >= {least}, not {value!r}")
        out[opt.field] = int(value)
    elif opt.kind == "param":
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{where}: --param {value!r} is not KEY=VALUE", hint="e.g. --param gemm_m=2048")
        out.setdefault("params", {})[key.strip()] = val.strip()
    elif opt.kind == "devices":
        out["devices"] = [d.strip() for d in value.split(",") if d.strip()] or None
    else:
        out[opt.field] = value


def trial_config(base: QueueRunConfig, *sources: tuple[str, Sequence[str]]) -> QueueRunConfig:
    """``base`` with every source's flags applied in order (a later source wins; ``--param``
    maps merge), and ``--size auto`` resolved as the command line resolves it."""
    fields: dict[str, Any] = {}
    for where, args in sources:
        over = queue_overrides(args, where=where)
        params = {**fields.get("params", {}), **over.pop("params", {})}
        fields.update(over)
        if params:
            fields["params"] = params
    config = dataclasses.replace(base, **fields)
    config.size = resolve_size(config.size, config.device, config.devices)
    return config
