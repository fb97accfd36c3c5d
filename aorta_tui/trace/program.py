"""Render bpftrace programs from probe-set templates with validated parameters.

A template (``probes/*.bt``) holds named blocks between ``// @block NAME`` and ``// @end``.
Each block may use ``{{param}}`` placeholders and the pseudo-call
``@@EMIT(metric, ts, key, value, aux[, label])`` whose arguments are plain tokens (``$vars``,
``nsecs``, integers). Rendering expands ``@@EMIT`` per collection mode:

* ``events``: count the record in ``@sent[id]`` and print one ``@R`` line
  (see :mod:`aorta_tui.trace.parser`);
* ``aggregate``: count it, add it to the per-key count/sum maps and, for durations and sizes,
  to ``@lh[id, bucket]`` using the same log-linear buckets as :mod:`aorta_tui.trace.hdr`.

Every program gets a heartbeat (``@H``) and prints ``@sent`` with it and at exit, so the
reader can tell how many records the kernel sent (lost-event accounting).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from aorta_tui.core.errors import UsageError
from aorta_tui.trace.hdr import SUB_BITS
from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.probes.base import ident

if TYPE_CHECKING:
    from aorta_tui.trace.probes.base import Instance, ProbeDetection, ProbeSet

_BLOCK_RE = re.compile(r"^// @block (\w+)\s*$(.*?)^// @end\s*$", re.M | re.S)
_PARAM_RE = re.compile(r"\{\{(\w+)\}\}")
_EMIT_RE = re.compile(r"@@EMIT\(([^)]*)\)")
_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]+$")
_EXPR_RE = re.compile(r'^[A-Za-z0-9_$@>\-()*+<&|^" .\[\]]+$')
_TOKEN_RE = re.compile(r"^(\$[A-Za-z_]\w*|nsecs|-?\d+|pid|tid)$")
_USER_MAP_RE = re.compile(r"@([A-Za-z_]\w*)\[")
_OWN_MAPS = {"sent", "lh", "n", "sum", "nl", "suml", "mx"}
MODES = ("events", "aggregate")
# Events mode runs bpftrace with block-buffered stdout (``-B full``, runner.py): one write of
# 4 KiB instead of one per record (~1.5 us of bpftrace's time per record on the development
# box). A heartbeat must still reach the reader at once (drain() and the live view wait for
# it), so after every heartbeat bpftrace prints a line longer than its 4096-byte buffer: the
# buffer is written out past the heartbeat, whatever the rate. The parser skips ``@P`` lines.
PAD_BYTES = 4100
FLUSH_PAD = 'printf("@P ' + "." * PAD_BYTES + '\\n");'




def validate_param(name: str, value: str) -> str:
    if name in ("lib", "path"):
        if not _PATH_RE.match(value):
            raise UsageError(
                f"library path {value!r} has characters bpftrace cannot take in a probe name",
                hint="copy or symlink the library to a path of letters, digits, '.', '_', '-', '/'",
            )
        if not Path(value).exists():
            raise UsageError(f"library {value} does not exist")
        return value
    if name in ("symbol", "group", "event", "metric", "queue_event", "run_event", "done_event", "cmd_field", "fd_field"):
        return ident(value)
    if name in ("kind", "id"):
        if not re.match(r"^-?\d+$", value):
            raise UsageError(f"parameter {name}={value!r} must be an integer")
        return value
    if "\n" in value or ";" in value or "{" in value or "}" in value or not _EXPR_RE.match(value):
        raise UsageError(f"parameter {name}={value!r} is not an allowed bpftrace expression")
    return value


@dataclass
class Program:
    text: str
    mode: str
    metric_ids: dict[int, tuple[str, Metric]] = field(default_factory=dict)
    uprobe_count: int = 0
    tracepoint_count: int = 0
    attached: set[int] = field(default_factory=set)  # metric ids some probe of the program emits


def parse_blocks(template: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip("\n") for m in _BLOCK_RE.finditer(template)}


def bucket_statements(value: str) -> str:
    """bpftrace statements setting ``$b`` to :func:`aorta_tui.trace.hdr.bucket_index` of value."""
    s = SUB_BITS
    lines = [f"$v = (uint64)({value});", "$t = $v;", "$e = (uint64)0;"]
    for bits in (32, 16, 8, 4, 2, 1):
        lines.append(f"if ($t >= {1 << bits}) {{ $t = $t >> {bits}; $e = $e + {bits}; }}")
    lines.append("$b = $v;")
    lines.append(
        f"if ($v >= {1 << s}) {{ $b = (($e - {s - 1}) << {s}) | (($v >> ($e - {s})) & {(1 << s) - 1}); }}"
    )
    return " ".join(lines)


def _printf_field(tok: str) -> tuple[str, list[str]]:
    """An @@EMIT number as (printf format piece, printf arguments): literals inline."""
    if re.fullmatch(r"-?\d+", tok):
        return str(int(tok)), []
    return "%lld", [f"(int64)({tok})"]


def _expand_emit(args: list[str], mid: int, metric: Metric, mode: str) -> str:
    if len(args) not in (5, 6):
        raise ValueError(f"@@EMIT takes 5 or 6 arguments, got {args}")
    _, ts, key, value, aux, *rest = args
    label = rest[0] if rest else None
    for tok in (ts, key, value, aux):
        if not _TOKEN_RE.match(tok):
            raise ValueError(f"@@EMIT argument {tok!r} must be a $variable, nsecs or an integer")
    out = [f"@sent[{mid}] = count();"]
    if mode == "events":
        # An integer literal goes into the format itself: bpftrace formats every printf argument
        # of every record in user space (~0.3 us each on the development box), and the line
        # the parser reads is the same either way.
        (ts_f, ts_a), *fields = [_printf_field(tok) for tok in (ts, key, value, aux)]
        args = [*ts_a, "pid", "tid", *(arg for _, a in fields for arg in a), *([label] if label else [])]
        fmt = " ".join([f"@R {mid}", ts_f, "%d %d", *(f for f, _ in fields), "%s" if label else "-"])
        out.append(f'printf("{fmt}\\n", {", ".join(args)});')
        return " ".join(out)
    if metric.breakdown_by == "label" and label:
        out.append(f"@nl[{mid}, {label}] = count(); @suml[{mid}, {label}] = sum((int64)({value}));")
    else:
        out.append(f"@n[{mid}, (int64)({key})] = count(); @sum[{mid}, (int64)({key})] = sum((int64)({value}));")
    if metric.kind != "point":
        out.append(bucket_statements(value))
        out.append(f"@lh[{mid}, (int64)$b] = count(); @mx[{mid}] = max((int64)({value}));")
    return " ".join(out)


def render(
    selections: list[tuple[ProbeSet, ProbeDetection]],
    *,
    mode: str,
    pid: int | None,
    heartbeat_ms: int = 200,
    interval_s: float = 1.0,
) -> Program:
    if mode not in MODES:
        raise UsageError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    pred = f"pid == {int(pid)}" if pid is not None else "1"
    parts: list[str] = []
    ids: dict[int, tuple[str, Metric]] = {}
    uprobes = tracepoints = 0
    emitted: set[int] = set()
    next_id = 1
    for ps, det in selections:
        blocks = parse_blocks(ps.template_text())
        local: dict[str, int] = {}
        for metric in ps.metrics:
            local[metric.name] = next_id
            ids[next_id] = (ps.name, metric)
            next_id += 1
        parts.append(f"// probe set {ps.name}: {ps.description}")
        for inst in det.instances:
            text = _instance_text(ps, inst, blocks, pred, local, emitted, mode)
            uprobes += len(re.findall(r"^\s*u(?:ret)?probe:", text, re.M))
            tracepoints += len(re.findall(r"^\s*tracepoint:", text, re.M))
            parts.append(text)
    parts += _interval_and_end("\n".join(parts), mode, heartbeat_ms, interval_s)
    # @sent must exist even when nothing fires, or print(@sent) fails to compile.
    parts.insert(0, "BEGIN { @sent[0] = count(); }")
    return Program(
        text="\n".join(parts) + "\n",
        mode=mode,
        metric_ids=ids,
        uprobe_count=uprobes,
        tracepoint_count=tracepoints,
        attached=emitted,
    )


def _instance_text(ps: ProbeSet, inst: Instance, blocks: dict[str, str], pred: str, local: dict[str, int],
                   emitted: set[int], mode: str) -> str:
    """One probe instance's bpftrace: its template block with the detected parameters filled in
    and each ``@@EMIT`` expanded for ``mode``; the metric ids it emits go into ``emitted``."""
    body = blocks.get(inst.block)
    if body is None:
        raise ValueError(f"template {ps.template} has no block {inst.block}")
    params = {k: validate_param(k, v) for k, v in inst.params.items()}
    params["pred"] = pred

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in params:
            raise ValueError(f"block {inst.block} needs parameter {m.group(1)}")
        return params[m.group(1)]

    def emit(m: re.Match[str]) -> str:
        args = [a.strip() for a in m.group(1).split(",")]
        metric = ps.metric(args[0])
        emitted.add(local[metric.name])
        return _expand_emit(args, local[metric.name], metric, mode)

    return _EMIT_RE.sub(emit, _PARAM_RE.sub(sub, body))


def _interval_and_end(probes_text: str, mode: str, heartbeat_ms: int, interval_s: float) -> list[str]:
    """The periodic block (heartbeat; in aggregate mode also the maps) and the END block that
    prints the last counts and clears every map the probes used, so bpftrace prints nothing else."""
    used = set(_USER_MAP_RE.findall(probes_text))
    temp_maps = sorted(used - _OWN_MAPS)
    own = [m for m in ("lh", "n", "sum", "nl", "suml", "mx") if m in used]
    if mode == "events":
        periodic = f'interval:ms:{int(heartbeat_ms)} {{ printf("@H %lld\\n", nsecs); print(@sent); {FLUSH_PAD} }}'
    else:
        ms = max(50, int(round(interval_s * 1000)))
        prints = " ".join(f"print(@{m});" for m in own)
        periodic = f'interval:ms:{ms} {{ printf("@H %lld\\n", nsecs); print(@sent); {prints} }}'
    end = " ".join(f"clear(@{m});" for m in temp_maps)
    final_prints = " ".join(f"print(@{m}); clear(@{m});" for m in own)
    return [periodic,
            f'END {{ {end} printf("@H %lld\\n", nsecs); print(@sent); clear(@sent); {final_prints} '
            f'{FLUSH_PAD if mode == "events" else ""} }}']
