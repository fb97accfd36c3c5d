"""Reading a file the user hands us: bounded, typed, and located when it is wrong.

Every file the tool reads (recipes, sidecars, snapshots, queue results, policy files, journals)
goes through here, so each gets the same three guarantees:

- **no hang**: only regular files are read (a FIFO, ``/dev/zero`` or a socket is refused before
  it is opened for reading, and the open itself never blocks);
- **no unbounded read**: at most ``limit`` bytes are read, and a larger file is refused with its
  size and the limit;
- **a located message**: a bad byte or bad JSON names ``file:line:column``; nesting deeper than
  ``max_depth`` is refused instead of exhausting the interpreter's stack.

Errors are :class:`~aorta_tui.core.errors.UsageError` (exit 2): bad input, never exit 70; a file
this user may not open is :class:`~aorta_tui.core.errors.EnvironmentProblem` (exit 3).

``open_input`` is the one checked open of a file by path: the journal and ``.lock`` at a run's
root, ``store/journal_follow.py``, the TUI, ``attach`` and ``bundle`` open through it or through
the readers built on it (``read_input_bytes``, ``read_json_or_none``);
``tests/reliability/test_rel_rundir_damage.py`` lists them. Below a run's root, files are
reached through the run's file layer (``core/rundir_fs.py``: no link followed on the way),
which reads with the same bounded read, ``read_fd_bounded``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import sys
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

from aorta_tui.core.errors import AortaError, EnvironmentProblem, UsageError

KiB = 1 << 10
MiB = 1 << 20
DEFAULT_MAX_DEPTH = 64
# Any JSON value (what json.loads returns): the type of a typed document's sections that are
# copied through as written (policy.json, matrix.json, a queue result)
Json = str | int | float | bool | None | list["Json"] | dict[str, "Json"]

# The size limit of each kind of input file, in one place. Each is far above what aorta-tui
# writes (a snapshot is ~60 KiB, a 10k-iteration queue result with its timeline ~10 MiB), so
# only a wrong path or a hostile file meets it; what it bounds is the memory a read can take.
INPUT_LIMITS: dict[str, int] = {
    "snapshot": 16 * MiB,  # env.json (aorta-tui or upstream AORTA)
    "queue result": 512 * MiB,  # `queue run -o` (--timeline, --repeat) or `queue sweep -o`
    "queue sweep request": 4 * MiB,  # a queue sweep's request.json (its run directory's)
    # a failed point's trials/s<NNNN>/result.json (its stream count, why, its exit status)
    "queue sweep failed point": 4 * MiB,
    "policy file": 1 * MiB,  # hand-written YAML/JSON policies
    "policy sweep manifest": 16 * MiB,  # a policy sweep's sweep.json
    "policy outcome": 64 * MiB,  # a policy trial's outcome.json
    "policy report": 64 * MiB,  # policy.json, opened by the TUI
    "profiler trace": 512 * MiB,  # torch.profiler's Chrome trace, for the CUPTI join
    "matrix": 512 * MiB,  # a sweep's matrix.json (a trial row per finished trial)
    "trace result": 256 * MiB,  # `trace queue -o`, a sweep trial's trace.json
    "run meta": 4 * MiB,  # a run's run.json (its id, recipe hash, command, argv)
    "plan": 64 * MiB,  # a run's plan.json (a line per cell and per trial)
    "Slurm job map": 64 * MiB,  # a Slurm run's slurm/jobs.json (about 100 bytes a trial)
    # a Slurm batch's slurm/<batch>.json (a path a trial) and each trial's slurm-job.json
    # (its environment: large, never unbounded), read on the node by executor/slurm_job.py
    "Slurm manifest": 64 * MiB,
    "Slurm job spec": 64 * MiB,
    "Slurm trial outcome": 16 * MiB,  # a trial's slurm-outcome.json (its process, node, kernel log)
    "bundle manifest": 256 * MiB,  # a bundle's MANIFEST.json (about 450 bytes a file)
    # a `mode: sanitizer` run's sanitizer_report.json (a check's reason and first error, each
    # clipped by collect/sanitizer.py: a few KiB a check)
    "sanitizer report": 4 * MiB,
    # a trial's layer_numerics/summary_rank<R>.json (the watched layers' names: ~100 bytes
    # each) and torch_profiler/summary_rank<R>.json (the top ops and kernels, at most 100
    # each): the bounds collect/collectors.py read them with
    "layer numerics summary": 1 * MiB,
    "torch profiler summary": 4 * MiB,
    # ~/.cache/aorta-tui/trace-calibration.json (a cost and a reason per probe set: ~1 KiB)
    "calibration cache": 1 * MiB,
    # a fresh-process queue run's config file (hwqueue/point_config.py): a few hundred bytes
    "queue run config": 1 * MiB,
    # an engine caller's sweep request (sweep/way_in.py; the agent's iter-NN.request.json)
    "sweep request": 1 * MiB,
    # an agent's llm-NN.json: the request (goal, candidates, tried cells) and what came back
    # (at most llm.MAX_RAW_SAVED of a body that was not a proposal)
    "agent llm record": 16 * MiB,
    # a trial worker's workload_result.json (.rank<N>.json): the bound the orchestrator has
    # always read it with (a result with its timeline is a few KiB; a workload's metrics more)
    "worker result": 64 * MiB,
}


def describe_size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / KiB:.1f} KiB" if n >= KiB else f"{n} B"


def describe_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words ("a FIFO (named pipe)")."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _a_file(what: str) -> str:
    # "a snapshot file", but "a policy file" (not "a policy file file")
    return f"a {what}" if what.endswith("file") else f"a {what} file"


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _visible(path: Path) -> bool:
    """``path`` exists and this user can look at it (``Path.exists`` raises on EACCES: a path
    under a folder this user cannot search)."""
    try:
        path.stat()
    except OSError:
        return False
    return True


def permission_problem(path: str | os.PathLike[str], *, doing: str = "write",
                       fix_dir: str | os.PathLike[str] | None = None,
                       nearest: str | os.PathLike[str] | None = None) -> EnvironmentProblem:
    """Exit 3 for a file or directory this user may not ``doing`` (read, write): whose it is,
    who we are, and the two ways out. ``fix_dir`` is what to take over (default: its folder).
    ``nearest``: the nearest of ``path`` and the folders above it that this user can see, where
    the caller has climbed to it already (else it is found here, the same way)."""
    if nearest is not None:
        probe = Path(nearest)
    else:
        probe = Path(path)
        while not _visible(probe) and probe != probe.parent:  # the nearest one this user can see
            probe = probe.parent
    try:
        st = probe.stat()
        owner, mode = _user_name(st.st_uid), f"mode {stat.S_IMODE(st.st_mode):04o}"
    except OSError:
        owner, mode = "another user", "mode unknown"
    me = _user_name(os.geteuid())
    target = Path(fix_dir) if fix_dir is not None else (probe if probe.is_dir() else probe.parent)
    take_over = f"`sudo chown -R {me} {target}`"
    if owner == "root":
        # Not `sudo aorta-tui`: under sudo the tool drops to the invoking user before it touches
        # a file (privsep/boot.py), so it would be refused the same way.
        hint = (f"it is root's, and aorta-tui writes nothing as root for you (under sudo it runs "
                f"as the invoking user; only its helper keeps root): take it over ({take_over}), "
                f"let {me} write it (`sudo chmod` its mode), or use a directory of your own")
    else:
        hint = (f"run the command as {owner} (`sudo -u {owner} aorta-tui ...`), or take it "
                f"over: {take_over}")
    return EnvironmentProblem(
        f"cannot {doing} {path}: permission denied ({probe} belongs to {owner}, {mode}; "
        f"aorta-tui runs as {me})", hint=hint)


def _refusal(p: str, exc: OSError, what: str, hint: str | None) -> AortaError:
    if isinstance(exc, PermissionError):
        return permission_problem(p, doing="open")
    if exc.errno == errno.ELOOP:
        return UsageError(f"{p} is a symlink, not {_a_file(what)}: a run directory's files are "
                          "never followed out of it", hint=hint or f"pass the path of {_a_file(what)}")
    return UsageError(f"{p}: cannot read the {what}: {exc.strerror or exc}", hint=hint)


def open_input(path: str | os.PathLike[str], *, what: str, hint: str | None = None,
               writable: bool = False, create: bool = False, follow_symlinks: bool = True,
               missing_ok: bool = False) -> BinaryIO | None:
    """The one checked open: ``path`` as a binary file object, only when it is a regular file.

    Every reader of a user's file or of a run directory opens it here, so none of them can hang
    or spin: ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer (and a FIFO, a
    device such as ``/dev/zero``, a socket or a directory is refused by ``fstat`` on the opened
    descriptor, so swapping the path after a check changes nothing); ``follow_symlinks=False``
    refuses a symlink (``O_NOFOLLOW``) where a link would lead out of a run directory.
    ``writable``/``create`` open it for update (a lock file). A missing file is ``None`` with
    ``missing_ok``, else an error; every refusal is a :class:`UsageError` (exit 2) naming the
    path and what it is instead, but permission denied, which is the machine's (exit 3, naming
    the owner and the fix: ``permission_problem``).
    """
    p = os.fspath(path)
    if not _judged_before_open(p, what=what, hint=hint, create=create, missing_ok=missing_ok,
                               follow_symlinks=follow_symlinks):
        return None
    fd = _open_nonblocking(p, what=what, hint=hint, writable=writable, create=create,
                           missing_ok=missing_ok, follow_symlinks=follow_symlinks)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{p} is {describe_kind(st.st_mode)}, not {_a_file(what)}",
                             hint=hint or f"pass the path of {_a_file(what)}")
        os.set_blocking(fd, True)  # a regular file never blocks; the flag only guarded the open
    except BaseException:
        os.close(fd)
        raise
    # Outside the try: once fdopen has made its file object, that object owns ``fd``. A Ctrl-C
    # landing inside fdopen closes ``fd`` with the object; closing it again here failed with
    # EBADF, which replaced the KeyboardInterrupt (an interrupted bundle said "cannot write the
    # bundle: Bad file descriptor", exit 3, in CI), and in a threaded process it would close
    # whatever another thread had just opened under that number. An interrupt before the object
    # exists leaks one descriptor of a process that is leaving.
    return os.fdopen(fd, "r+b" if writable else "rb")


def _judged_before_open(p: str, *, what: str, hint: str | None, create: bool, missing_ok: bool,
                        follow_symlinks: bool) -> bool:
    """``p`` judged before it is opened (opening some devices acts: a watchdog starts, a tape
    rewinds): False for a missing file that ``missing_ok`` lets be none; a link (where refused)
    or anything but a regular file raises."""
    try:
        st = os.stat(p, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        if create:
            return True
        if missing_ok:
            return False
        raise UsageError(f"{p}: no such file", hint=hint) from None
    except OSError as exc:
        raise _refusal(p, exc, what, hint) from None
    if stat.S_ISLNK(st.st_mode):
        raise _refusal(p, OSError(errno.ELOOP, "a symlink"), what, hint)
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{p} is {describe_kind(st.st_mode)}, not {_a_file(what)}",
                         hint=hint or f"pass the path of {_a_file(what)}")
    return True


def _open_nonblocking(p: str, *, what: str, hint: str | None, writable: bool, create: bool,
                      missing_ok: bool, follow_symlinks: bool) -> int | None:
    """The descriptor, opened without waiting (``O_NONBLOCK``: a FIFO swapped in after the
    check never blocks the open); None for a file gone since, where ``missing_ok``."""
    flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_CREAT if create else 0
    flags |= 0 if follow_symlinks else os.O_NOFOLLOW
    try:
        return os.open(p, flags, 0o644)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise UsageError(f"{p}: no such file", hint=hint) from None
    except IsADirectoryError:
        raise UsageError(f"{p} is a directory, not {_a_file(what)}",
                         hint=hint or f"pass the path of {_a_file(what)}") from None
    except OSError as exc:  # ENXIO: a FIFO opened for writing without a reader; ELOOP: a link
        if exc.errno == errno.ENXIO:
            raise UsageError(f"{p} is a FIFO (named pipe), not {_a_file(what)}",
                             hint=hint or f"pass the path of {_a_file(what)}") from None
        raise _refusal(p, exc, what, hint) from None


def read_input_bytes(path: str | os.PathLike[str], *, what: str, limit: int,
                     hint: str | None = None, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in messages: "snapshot")."""
    p = os.fspath(path)
    fh = open_input(p, what=what, hint=hint, follow_symlinks=follow_symlinks)
    assert fh is not None
    with fh:
        return read_fd_bounded(fh, where=p, what=what, limit=limit, hint=hint)


def read_fd_bounded(fh: BinaryIO, *, where: str, what: str, limit: int,
                    hint: str | None = None) -> bytes:
    """At most ``limit`` bytes of the opened regular file ``fh`` (checked by its opener), or a
    located refusal naming its size: the one bounded read of ``open_input`` and of a run
    directory's file layer (``core/rundir_fs.py``)."""
    os.set_blocking(fh.fileno(), True)  # a regular file never blocks; O_NONBLOCK guarded the open
    size = os.fstat(fh.fileno()).st_size
    if size > limit:
        raise UsageError(
            f"{where}: the {what} is {describe_size(size)}, over the {describe_size(limit)} limit",
            hint=hint or f"a {what} this large is not one aorta-tui wrote; check the path")
    data = fh.read(limit + 1)
    if len(data) > limit:  # the file grew after the fstat
        raise UsageError(f"{where}: the {what} is over the {describe_size(limit)} limit", hint=hint)
    return data


def read_json_or_none(path: str | os.PathLike[str], *, limit: int = 64 * MiB,
                      follow_symlinks: bool = False) -> Json:
    """A record of a run directory (a trial's ``result.json``, ``plan.json``, ...) decoded, or
    ``None`` when it is missing, not a regular file (or a symlink, unless ``follow_symlinks``),
    unreadable, over ``limit``, or not JSON: for readers to
    whom a damaged record is no record (the trial runs again, the row shows nothing)."""
    try:
        data = read_input_bytes(path, what="record", limit=limit, follow_symlinks=follow_symlinks)
        return json.loads(data)
    except (AortaError, ValueError, RecursionError):  # AortaError: also another user's file
        return None


def line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``data``."""
    if isinstance(data, bytes):
        line, start = data.count(b"\n", 0, offset) + 1, data.rfind(b"\n", 0, offset) + 1
    else:
        line, start = data.count("\n", 0, offset) + 1, data.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def decode_utf8(data: bytes, *, where: str, what: str, hint: str | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = line_col(data, exc.start)
        raise UsageError(
            f"{where}:{line}:{col}: the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x})",
            hint=hint or f"pass a UTF-8 {what} file") from None


def read_input_text(path: str | os.PathLike[str], *, what: str, limit: int,
                    hint: str | None = None) -> str:
    """The UTF-8 text of ``path``, bounded and checked as :func:`read_input_bytes` does."""
    data = read_input_bytes(path, what=what, limit=limit, hint=hint)
    return decode_utf8(data, where=os.fspath(path), what=what, hint=hint)


def json_depth_exceeds(value: object, max_depth: int) -> bool:
    """True when ``value`` nests containers deeper than ``max_depth`` (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json_text(text: str, *, where: str, what: str, max_depth: int = DEFAULT_MAX_DEPTH,
                    hint: str | None = None) -> Any:
    """``json.loads`` with located errors, bounded nesting, and no NaN/Infinity surprises."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        # An error at the very end (or in a string never closed) means the file stops early.
        cut = exc.msg.startswith("Unterminated string") or (
            exc.msg != "Extra data" and exc.pos >= len(text.rstrip()))
        note = " (truncated JSON: the file ends early)" if cut else ""
        raise UsageError(f"{where}:{exc.lineno}:{exc.colno}: the {what} is not valid JSON: "
                         f"{exc.msg}{note}", hint=hint) from None
    except RecursionError:
        value = None
        deep = True
    except ValueError:  # an integer longer than sys.get_int_max_str_digits() (4300)
        raise UsageError(f"{where}: the {what} holds an integer of more than "
                         f"{sys.get_int_max_str_digits()} digits",
                         hint=hint or f"no {what} aorta-tui writes holds such a number") from None
    else:
        deep = json_depth_exceeds(value, max_depth)
    if deep:
        raise UsageError(f"{where}: the {what} nests deeper than {max_depth} levels",
                         hint=hint or f"no {what} aorta-tui reads nests this deep; check the file")
    return value


def load_json_input(path: str | os.PathLike[str], *, what: str, limit: int,
                    max_depth: int = DEFAULT_MAX_DEPTH, hint: str | None = None) -> Json:
    """Read and parse a JSON input file with every guarantee of this module."""
    where = os.fspath(path)
    text = read_input_text(path, what=what, limit=limit, hint=hint)
    if not text.strip():
        raise UsageError(f"{where}: the {what} file is empty", hint=hint)
    return parse_json_text(text, where=where, what=what, max_depth=max_depth, hint=hint)


def require_object(value: object, *, where: str, field: str = "", what: str = "file",
                   hint: str | None = None) -> dict[str, Any]:
    """``value`` if it is a JSON object, else a located error naming the field and the type."""
    if isinstance(value, dict):
        return value
    at = f"{where}: {field}" if field else where
    found = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
    raise UsageError(f"{at}: expected an object, found {found}", hint=hint or f"pass a {what}")


def clip_for_message(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so an error about a huge value stays short."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


def is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def json_type_name(value: object) -> str:
    """The JSON name of ``value``'s type, for "expected X, found Y" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


# Numbers a consumer computes with must stay finite floats: 1e400 parses to inf, and a
# 400-digit integer overflows the first division by it.
MAX_JSON_NUMBER = 1e300


def _finite_number(value: object) -> TypeGuard[int | float]:
    """A finite int or float, not a boolean (JSON's ``true`` is no number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def is_json_number(value: object) -> bool:
    """A finite int or float (not a boolean) that float arithmetic can take."""
    return _finite_number(value) and abs(value) <= MAX_JSON_NUMBER


def _is_union(hint: object) -> bool:
    # ``Optional[X]``/``Union[X, Y]`` and ``X | Y`` are two different objects at run time
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def conforms(value: object, hint: object, *, finite: bool = True) -> bool:
    """Whether the decoded JSON ``value`` fits ``hint``, the annotation of a typed record's
    field (a journal event, a queue run's config, a sweep request): the one check of them all.

    ``Any`` fits anything; ``None`` only null; a union (``X | None``) when one alternative
    fits; ``bool`` only true/false and ``int`` never a boolean (``True`` is an ``int`` to
    Python, but ``"streams": true`` is no count); ``float`` an int or a float, finite unless
    ``finite=False``; ``str`` a string; ``Path`` a non-empty string (an empty path names
    nothing: ``Path("")`` is the working directory); ``list[T]`` an array of T;
    ``dict[str, T]`` an object of T. A class of its own (an event's ``CellStats``) is its
    constructor's to judge, so any value fits here; any other generic (``tuple[...]``,
    ``Literal[...]``) raises TypeError: a field typed so is a shape to teach this check, and
    passing it unchecked would let a damaged file through.
    """
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if _is_union(hint):
        return any(conforms(value, h, finite=finite) for h in typing.get_args(hint))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        item: object = args[0] if args else Any
        return isinstance(value, list) and all(conforms(v, item, finite=finite) for v in value)
    if origin is dict:
        item = args[1] if args else Any
        return isinstance(value, dict) and all(
            isinstance(k, str) and conforms(v, item, finite=finite) for k, v in value.items())
    if origin is not None:
        raise TypeError(f"conforms() does not know the annotation {hint!r}")
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        if not finite:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return _finite_number(value)
    if hint is Path:
        return isinstance(value, str) and value != ""
    if hint in (str, list, dict):
        return isinstance(value, typing.cast(type, hint))
    return True  # a class of its own (see above): its constructor takes or refuses the value


# JSON's types in the words every message uses ("expected an integer", "is an array, not ..."):
# one table for require_type's labels and hint_text's annotations
_JSON_WORDS = {"object": "an object", "array": "an array", "string": "a string",
               "boolean": "true or false", "number": "a finite number", "integer": "an integer",
               "null": "null"}
_HINT_WORDS: dict[object, str] = {
    str: _JSON_WORDS["string"], int: _JSON_WORDS["integer"], bool: _JSON_WORDS["boolean"],
    type(None): _JSON_WORDS["null"], None: _JSON_WORDS["null"], list: _JSON_WORDS["array"],
    dict: _JSON_WORDS["object"], Path: "a path (a non-empty string)", Any: "any value",
}


def hint_text(hint: object, *, finite: bool = True) -> str:
    """The annotation ``hint`` in JSON's words, for "is X, not Y" messages: ``int | None`` is
    "an integer or null", ``list[str]`` "an array (items: a string)"; ``finite`` as for
    :func:`conforms`."""
    if _is_union(hint):
        return " or ".join(hint_text(h, finite=finite) for h in typing.get_args(hint))
    if hint is float:
        return _JSON_WORDS["number"] if finite else "a number"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    # the items' type is named where it says something (list[Any] is just "an array")
    if origin is list and args and args[0] is not Any:
        return f"an array (items: {hint_text(args[0], finite=finite)})"
    if origin is dict and len(args) == 2 and args[1] is not Any:
        return f"an object (values: {hint_text(args[1], finite=finite)})"
    key = origin or hint
    return _HINT_WORDS.get(key, f"a {getattr(key, '__name__', key)}")


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "number": is_json_number,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) <= MAX_JSON_NUMBER,
}


def require_type(value: object, expected: str, *, where: str, field: str, what: str = "file",
                 nullable: bool = False, hint: str | None = None) -> Any:
    """``value`` if it is of the JSON type ``expected`` (a key of ``_CHECKS``; ``nullable``
    also takes null), else a UsageError naming the file, the field path and both types."""
    if (nullable and value is None) or _CHECKS[expected](value):
        return value
    label = _JSON_WORDS[expected] + (" or null" if nullable else "")
    raise UsageError(f"{where}: {field}: expected {label}, found {found_value(value)}",
                     hint=hint or f"this {what} is damaged or was not written by aorta-tui")


def found_value(value: object) -> str:
    """What a wrong value is, in JSON's words: ``null``, ``true``, or its type and its text
    (``a string 'x'``); the value clipped, never "null None"."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return f"{json_type_name(value)} {clip_for_message(value, 40)}"


class FieldReader:
    """Typed reads of one JSON document's fields (the reader of a typed record such as
    ``policy.json`` or ``agent.json``): each error names the file and the field path
    (``policies[1].metrics.throughput.median``), exit 2. A missing optional key reads as
    its default, a present one must have its type."""

    def __init__(self, where: str, what: str) -> None:
        self.where = where
        self.what = what

    @staticmethod
    def join(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    def check(self, value: object, kind: str, path: str, *, nullable: bool = False) -> Any:
        """``value`` itself once it is of JSON type ``kind`` (raw JSON: its type is checked)."""
        return require_type(value, kind, where=self.where, field=path, what=self.what,
                            nullable=nullable)

    def _at(self, d: dict[str, Any], key: str, kind: str, path: str, default: object,
            *, nullable: bool = False, required: bool = False) -> Any:
        if key in d:
            return self.check(d[key], kind, self.join(path, key), nullable=nullable)
        if required:
            raise UsageError(f"{self.where}: {self.join(path, key)}: missing",
                             hint=f"this {self.what} is damaged or was not written by aorta-tui")
        return default

    def obj(self, value: object, path: str) -> dict[str, Any]:
        out: dict[str, Any] = self.check(value, "object", path)
        return out

    def obj_at(self, d: dict[str, Any], key: str, path: str, *, required: bool = False
               ) -> dict[str, Any]:
        out: dict[str, Any] = self._at(d, key, "object", path, {}, required=required)
        return out

    def array_at(self, d: dict[str, Any], key: str, path: str) -> list[Any]:
        out: list[Any] = self._at(d, key, "array", path, [])
        return out

    def text(self, d: dict[str, Any], key: str, path: str, default: str = "", *,
             required: bool = False) -> str:
        out: str = self._at(d, key, "string", path, default, required=required)
        return out

    def opt_text(self, d: dict[str, Any], key: str, path: str) -> str | None:
        out: str | None = self._at(d, key, "string", path, None, nullable=True)
        return out

    def integer(self, d: dict[str, Any], key: str, path: str, default: int = 0, *,
                required: bool = False) -> int:
        out: int = self._at(d, key, "integer", path, default, required=required)
        return out

    def opt_integer(self, d: dict[str, Any], key: str, path: str) -> int | None:
        out: int | None = self._at(d, key, "integer", path, None, nullable=True)
        return out

    def boolean(self, d: dict[str, Any], key: str, path: str, default: bool = False) -> bool:
        out: bool = self._at(d, key, "boolean", path, default)
        return out

    def opt_boolean(self, d: dict[str, Any], key: str, path: str) -> bool | None:
        out: bool | None = self._at(d, key, "boolean", path, None, nullable=True)
        return out

    @typing.overload
    def number(self, d: dict[str, Any], key: str, path: str, default: None = None, *,
               required: typing.Literal[False] = False) -> float | None: ...
    @typing.overload
    def number(self, d: dict[str, Any], key: str, path: str, default: float, *,
               required: bool = False) -> float: ...
    @typing.overload
    def number(self, d: dict[str, Any], key: str, path: str, default: float | None = None, *,
               required: typing.Literal[True]) -> float: ...
    @typing.overload
    def number(self, d: dict[str, Any], key: str, path: str, default: float | None = None, *,
               required: bool = False) -> float | None: ...

    def number(self, d: dict[str, Any], key: str, path: str, default: float | None = None, *,
               required: bool = False) -> float | None:
        """A finite number; null and a missing key read as ``default`` (a number field's null
        means "not known", as its absence does), and with ``required`` both are refused. A
        value of another type is refused as "a finite number or null" even when required: the
        words of the trace result's own copy this replaced, kept byte for byte."""
        out: float | None = self._at(d, key, "number", path, None, nullable=True)
        if out is None and required:
            # One message for null and nothing: to a reader of the number they are one fault.
            raise UsageError(f"{self.where}: {self.join(path, key)}: expected a number, found "
                             "null or nothing",
                             hint=f"this {self.what} is damaged or was not written by aorta-tui")
        return default if out is None else out

    def opt_number(self, value: object, path: str) -> float | None:
        out: float | None = self.check(value, "number", path, nullable=True)
        return out

    def strings(self, value: object, path: str) -> tuple[str, ...]:
        items: list[object] = self.check(value, "array", path)
        return tuple(str(self.check(v, "string", f"{path}[{i}]")) for i, v in enumerate(items))

    def strings_at(self, d: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
        return self.strings(d.get(key, []), self.join(path, key))
