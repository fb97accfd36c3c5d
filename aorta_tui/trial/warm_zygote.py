"""The warm zygote: a process that paid the interpreter start-up and ``import torch`` once, and
forks one trial worker per request (``trial_isolation: warm``; :mod:`aorta_tui.trial.warm`).

``python -m aorta_tui.trial.warm_zygote [--no-torch] FD MODULE...`` - ``FD`` is its end of a Unix
stream socket to the orchestrator; ``MODULE`` are the workload modules to import ahead (their own
top-level imports); torch is imported first unless ``--no-torch`` (a workload that does not need
it, whose trial must not find it imported). It answers ``ready`` once loaded, then serves ``fork``
requests until the socket closes (the orchestrator ended or died: the zygote leaves then).

Each request carries the trial's complete environment, working directory and spec path, and
three descriptors: the trial's stdout and stderr pipes and a "go" pipe. The zygote forks an
intermediate process, which forks the trial and exits at once, so the trial is re-parented to
the orchestrator (a subreaper): the orchestrator waits for it, reads its exit status and rusage
and kills its process group exactly as for a process it started itself. The trial becomes a
session leader, waits for the go byte (sent once the orchestrator put it into its cgroup),
takes the pipes as fds 0-2, closes every other descriptor, replaces its environment (``putenv``:
what the GPU runtimes read with ``getenv`` when they initialise, later, in the trial) and runs
:func:`aorta_tui.trial.worker.main`, then leaves the way a trial worker does.

The zygote never initialises CUDA/HIP (a forked child could not use it): before every fork it
checks that torch's CUDA state is untouched and refuses to fork otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence

_T0 = time.monotonic_ns()  # the zygote's own "interpreter up"

_HEADER = struct.Struct("!I")
MAX_MESSAGE = 64 * 1024 * 1024
_PR_SET_CHILD_SUBREAPER = 36
_ZYGOTE_PID = 0


def send_message(sock: socket.socket, obj: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(obj).encode()
    header = _HEADER.pack(len(data))
    if fds:
        socket.send_fds(sock, [header], list(fds))
    else:
        sock.sendall(header)
    sock.sendall(data)


def recv_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One message and the descriptors that came with it; (None, []) at end of stream."""
    if max_fds:
        header, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, max_fds)
    else:
        header, fds = sock.recv(_HEADER.size), []
    while header and len(header) < _HEADER.size:
        more = sock.recv(_HEADER.size - len(header))
        if not more:
            break
        header += more
    if len(header) < _HEADER.size:
        for fd in fds:
            os.close(fd)
        return None, []
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(min(1 << 20, size - len(buf)))
        if not chunk:
            return None, fds
        buf += chunk
    msg = json.loads(buf)  # ValueError for bytes that are not UTF-8 JSON
    if not isinstance(msg, dict):
        raise ValueError(f"a message is a JSON object, not {type(msg).__name__}")
    return msg, fds


class _BecomeTrial(BaseException):
    """Raised in the forked trial: unwinds the zygote's loop, so nothing of it stays on the
    trial's stack (its ``finally`` blocks only close the zygote's socket)."""

    def __init__(self, request: dict, fds: list[int]) -> None:
        super().__init__()
        self.request, self.fds = request, fds


def _cuda_problem() -> str | None:
    """Why forking now would hand a trial a used CUDA state, or None."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is None:
        return None
    try:
        if cuda.is_initialized():
            return "CUDA was initialised in the zygote (a forked child cannot use it)"
    except Exception as exc:  # an unusual torch: say so rather than fork blind
        return f"cannot tell whether CUDA is initialised: {exc}"
    if getattr(cuda, "_cached_device_count", None) is not None:
        return "torch cached the device count in the zygote (CUDA_VISIBLE_DEVICES would not apply)"
    return None


def _load(modules: list[str], with_torch: bool = True) -> dict:
    info: dict = {"pid": os.getpid(), "interpreter_up_ns": _T0, "python": sys.version.split()[0]}
    if with_torch or "torch" in modules:  # first, and timed: the trial's torch_imported says so
        start = time.monotonic_ns()
        import torch  # noqa: F401 - the point of the zygote

        info["torch_import_ns"] = [start, time.monotonic_ns()]
        info["torch"] = getattr(sys.modules["torch"], "__version__", None)
    import importlib

    # modules[0] is the workload's own module: without it there is nothing to fork. The rest is
    # what its trials import (Workload.preload_modules): one that fails to import here is left
    # to the trial, which imports it itself and reports the error as its own.
    preload_ms: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for i, name in enumerate(modules):
        t0 = time.monotonic_ns()
        if i == 0:
            importlib.import_module(name)
        else:
            try:
                importlib.import_module(name)
            except Exception as exc:
                skipped[name] = f"{type(exc).__name__}: {exc}"[:300]
                continue
        preload_ms[name] = round((time.monotonic_ns() - t0) / 1e6, 3)
    info["preload_ms"] = preload_ms
    info["preload_skipped"] = skipped
    from aorta_tui.trial import worker as trial_worker  # noqa: F401 - its imports, ahead of the trials

    info["loaded_ns"] = time.monotonic_ns()
    info["threads"] = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    info["problem"] = _cuda_problem()
    return info


def _fork(request: dict, fds: list[int]) -> dict:
    """Fork the trial (through an intermediate, so it is re-parented); its pid or an error."""
    problem = _cuda_problem()
    if problem:
        return {"error": problem}
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing of the zygote's output may reach the trial's logs
    read_fd, write_fd = os.pipe()
    inter = os.fork()
    if inter == 0:
        os.close(read_fd)
        try:
            pid = os.fork()
        except OSError:
            os._exit(1)
        if pid == 0:
            os.close(write_fd)
            raise _BecomeTrial(request, fds)
        os.write(write_fd, str(pid).encode())
        os._exit(0)
    os.close(write_fd)
    data = b""
    while chunk := os.read(read_fd, 64):
        data += chunk
    os.close(read_fd)
    _pid, status = os.waitpid(inter, 0)  # the trial is the orchestrator's child from here
    if not data:
        return {"error": f"the intermediate process could not fork (status {status})"}
    return {"pid": int(data), "forked_ns": time.monotonic_ns()}


def serve(sock: socket.socket) -> None:
    while True:
        request, fds = recv_message(sock, max_fds=3)
        if request is None:
            return
        try:
            reply = _fork(request, fds) if request.get("op") == "fork" else {"error": "unknown op"}
        finally:
            if os.getpid() == _ZYGOTE_PID:  # not in the forked trial: those fds are its own
                for fd in fds:  # the trial holds its copies; ours would keep its pipes open
                    os.close(fd)
        send_message(sock, reply)


def _become_subreaper() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reseed() -> None:
    """What a fresh process would have: numpy's global generator from the OS's entropy (Python's
    ``random`` reseeds itself at fork; torch's default seed is fixed in a fresh process too)."""
    np_random = getattr(sys.modules.get("numpy"), "random", None)
    if np_random is not None:
        with contextlib.suppress(Exception):  # an odd numpy: the workload seeds what it needs
            np_random.seed()


def run_trial(sock: socket.socket, become: _BecomeTrial) -> int:
    """In the forked trial: take its descriptors and environment, then run it."""
    request, (out_fd, err_fd, go_fd) = become.request, become.fds
    forked_ns = time.monotonic_ns()
    os.setsid()  # its own session and process group: the orchestrator signals the group
    sock.close()
    go = os.read(go_fd, 1)  # sent once the orchestrator holds the trial (its cgroup)
    if go != b"g":
        os._exit(125)  # the orchestrator went away before the start
    go_ns = time.monotonic_ns()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.closerange(3, 1 << 20)  # the zygote's socket, the pipes' originals, anything torch opened
    os.environ.clear()  # unsetenv/putenv: the C environment the runtimes will read
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request.get("subreaper"):
        _become_subreaper()
    _reseed()
    spec = request["spec"]
    sys.argv = [os.path.join(os.path.dirname(__file__), "trial_worker.py"), spec]
    from aorta_tui.trial import worker as trial_worker

    warm = {**request.get("warm", {}), "forked_ns": forked_ns, "go_ns": go_ns}
    return trial_worker.main([spec], interpreter_up_ns=go_ns, warm=warm)


def _leave_with_the_orchestrator(sock: socket.socket) -> Callable[[], None]:
    """While the imports run (2-10 s of torch), leave the moment the orchestrator's end of the
    socket closes: a SIGKILLed orchestrator's prepared zygotes outlived it that long, into its
    resume (issue 37 item 5). Once loaded, ``serve`` sees the end of the stream itself.
    Returns what stops the watch (a thread, gone before any fork)."""
    import select
    import threading

    stop_r, stop_w = os.pipe()
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLRDHUP)  # POLLHUP is reported whatever the mask
    poller.register(stop_r, select.POLLIN)

    def watch() -> None:
        for fd, mask in poller.poll():
            if fd == sock.fileno() and mask & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                os._exit(0)  # nothing of a trial exists yet: nothing to clean up

    thread = threading.Thread(target=watch, name="orchestrator-watch", daemon=True)
    thread.start()

    def stop() -> None:
        os.write(stop_w, b"x")
        thread.join()
        os.close(stop_r)
        os.close(stop_w)

    return stop


def main(argv: list[str]) -> int:
    global _ZYGOTE_PID
    _ZYGOTE_PID = os.getpid()
    with_torch = not (argv and argv[0] == "--no-torch")
    argv = argv if with_torch else argv[1:]
    sock = socket.socket(fileno=int(argv[0]))
    stop_watching = _leave_with_the_orchestrator(sock)
    try:
        info = _load(argv[1:], with_torch)
    except BaseException as exc:  # an import that fails: the orchestrator shows it
        info = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        stop_watching()
    try:
        send_message(sock, {"op": "ready", **info})
    except OSError:  # the orchestrator went away while we imported (SIGKILL, Ctrl-C): leave
        return 1  # quietly: this log goes into bundles, and a traceback here reads as a bug
    if "error" in info:
        return 1
    try:
        serve(sock)
    except _BecomeTrial as become:
        from aorta_tui.trial import worker as trial_worker

        trial_worker._leave(run_trial(sock, become))
        os._exit(0)  # _leave returns only through SystemExit, caught nowhere above
    except (OSError, ValueError):
        return 1
    return 0


if __name__ == "__main__":
    # The zygote itself needs no interpreter teardown (torch's takes a second).
    os._exit(main(sys.argv[1:]))
