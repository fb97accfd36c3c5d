"""The process that runs one trial of a registered workload.

``python -m aorta_tui.trial.worker SPEC.json`` — started by the orchestrator with the
trial's environment already set (GPU runtimes read their variables once, at start-up), directly
for ``single`` workloads and under ``torch.distributed.run`` for ``torchrun`` ones (each rank
reads RANK / WORLD_SIZE / LOCAL_RANK from its environment).

It prints one ``aorta-step <n> <seconds>`` line per step (live progress, and output activity
for the hang detector), and writes ``workload_result.json`` (``workload_result.rank<N>.json``
for ranks other than 0 in a distributed run). A workload that raises leaves its traceback on
stderr, where the classifier's traceback detector sees it, and a result with an ``exception``
failure. The exit code is 0 whenever a result was written, failing or not: the result says
how the trial went, and the classifier turns each failure into a ``workload:<code>`` detection.

Once the result is written and the streams flushed, the worker runs the ``atexit`` handlers and
leaves with ``os._exit``: the interpreter's teardown of torch's modules (0.5-1.5 s on a CPU box,
more with CUDA, measured by the trial timeline's ``exited`` phase) changes nothing the trial
reports. It exits the normal way instead when a library was injected that may flush at C
``atexit`` (``CUDA_INJECTION64_PATH``: the CUPTI collector; ``HSA_TOOLS_LIB``; ``LD_PRELOAD``),
when a non-daemon thread still runs (a normal exit would wait for it), or with
``AORTA_TRIAL_FAST_EXIT=0``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The timeline's "interpreter_up": before our own imports (the standard library's above are
# already loaded by the interpreter's start-up and runpy).
_INTERPRETER_UP_NS = time.monotonic_ns()

from aorta_tui.core.atomic import atomic_write_bytes  # noqa: E402
from aorta_tui.core.trial_contract import WorkerSpec, workload_result_filename  # noqa: E402
from aorta_tui.core.worker_result import WorkerResult  # noqa: E402
from aorta_tui.registry.workload import Failure, WorkloadContext, WorkloadResult, validate_config  # noqa: E402
from aorta_tui.trial import timeline  # noqa: E402

if TYPE_CHECKING:
    from aorta_tui.collect.layer_numerics import LayerNumerics
    from aorta_tui.collect.torch_profiler import TorchProfiler
    from aorta_tui.registry.workload import Workload

STEP_PREFIX = "aorta-step"


def result_filename(rank: int) -> str:
    """The workload result file of ``rank`` (named in core/trial_contract.py, which the parent reads by)."""
    return workload_result_filename(rank)


def load_class(spec: WorkerSpec | Mapping[str, Any]) -> type[Any]:
    """The workload class: from ``workload_ref`` (``module:qualname``, resolved by the
    orchestrator) when it names a workload of that name, else through the registry's entry
    points (a scan of every installed distribution)."""
    if isinstance(spec, WorkerSpec):
        name, ref = spec.workload, spec.workload_ref
    else:  # a caller's own mapping (tests, tools): only these two keys matter here
        name, ref = spec["workload"], spec.get("workload_ref")
    if isinstance(ref, str) and ":" in ref:
        import importlib

        from aorta_tui.registry.workload import Workload

        module, _, qualname = ref.partition(":")
        try:
            obj: object = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            obj = None
        if isinstance(obj, type) and issubclass(obj, Workload) and getattr(obj, "name", None) == name:
            return obj
    from aorta_tui.registry.registry import load_workload

    return load_workload(name)


def _typed(spec: WorkerSpec | Mapping[str, Any]) -> WorkerSpec:
    """A spec as given by the in-process and warm paths (a dict) or already typed."""
    return spec if isinstance(spec, WorkerSpec) else WorkerSpec.from_dict(dict(spec))


def run_trial(spec: WorkerSpec | Mapping[str, Any], marks: timeline.ChildMarks | None = None) -> WorkloadResult:
    if marks is not None:  # before the workload's module loads: it may import torch at its top
        marks.install_torch_hooks()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    spec = _typed(spec)
    cls = load_class(spec)
    config = validate_config(cls.config_schema, spec.config)
    numerics = _layer_numerics(spec, rank)  # upstream's layer_numerics collector, when asked
    from aorta_tui.collect.torch_profiler import from_spec  # the torch_profiler collector

    profiler = from_spec(spec.to_dict(), rank)
    ctx = WorkloadContext(
        steps=spec.steps,
        config=config,
        seed=spec.seed,
        trial_dir=Path(spec.trial_dir),
        switches=spec.switches,
        rank=rank,
        world_size=world,
        local_rank=local_rank,
        on_step=_step_reporter(numerics, profiler, marks),
    )
    result = _run_workload(cls(), ctx, marks, profiler, numerics)
    result.metrics.setdefault("rank", rank)
    result.metrics.setdefault("world_size", world)
    return result


def _step_reporter(numerics: LayerNumerics | None, profiler: TorchProfiler | None,
                   marks: timeline.ChildMarks | None) -> Callable[[int, float], None]:
    """The workload's ``on_step``: each collector's step, the timeline's first and last step,
    and the ``aorta-step`` line (live progress, and output for the hang detector)."""

    def on_step(step: int, seconds: float) -> None:
        if numerics is not None:
            numerics.end_step()
        if profiler is not None:
            profiler.step()
        if marks is not None:
            now = timeline.now_ns()
            marks.marks.setdefault("first_step", now)
            marks.marks["last_step"] = now
        print(f"{STEP_PREFIX} {step} {seconds:.9f}", flush=True)

    return on_step


def _run_workload(workload: Workload, ctx: WorkloadContext, marks: timeline.ChildMarks | None,
                  profiler: TorchProfiler | None, numerics: LayerNumerics | None) -> WorkloadResult:
    """setup, run and cleanup, each marked on the timeline; a workload that raises leaves its
    traceback on stderr (the classifier's traceback detector sees it) and an ``exception``
    failure, and its cleanup and the collectors' ends still run."""
    if marks is not None:
        marks.mark("worker_ready")
    try:
        if marks is not None:
            marks.mark("setup_start")
        try:
            workload.setup(ctx)
        finally:
            if marks is not None:
                marks.end_setup()
        if marks is not None:
            marks.mark("workload_start")
        if profiler is not None:  # around the steps: setup's imports and model build left out
            profiler.start()
        result = workload.run(ctx)
    except Exception as exc:
        traceback.print_exc()
        result = WorkloadResult(
            failures=[Failure("exception", f"{type(exc).__name__}: {exc}")],
        )
    finally:
        if profiler is not None:
            profiler.finish()
        try:
            workload.cleanup(ctx)
        except Exception:
            traceback.print_exc()
        if marks is not None:
            marks.mark("workload_end")
        if numerics is not None:
            numerics.finish()
    return result


def _layer_numerics(spec: WorkerSpec, rank: int) -> LayerNumerics | None:
    """The ``layer_numerics`` hooks (collect/layer_numerics.py), installed before the workload
    builds its model; ``None`` when the cell does not collect it."""
    options = spec.collect.get("layer_numerics")
    if not isinstance(options, dict):
        return None
    from aorta_tui.collect.layer_numerics import OUTPUT_SUBDIR, LayerNumerics

    numerics = LayerNumerics(Path(spec.trial_dir) / OUTPUT_SUBDIR, options, rank=rank)
    numerics.install()
    return numerics


def main(argv: list[str] | None = None, *, interpreter_up_ns: int | None = None,
         warm: dict[str, Any] | None = None) -> int:
    """Run the trial of ``argv[0]`` (a spec file). ``warm``: this process was forked from a
    warm zygote (trial/warm_zygote.py), which imported torch before the trial; its
    ``interpreter_up_ns`` is when the trial took over the forked process."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m aorta_tui.trial.worker SPEC.json", file=sys.stderr)
        return 2
    marks = timeline.ChildMarks(_INTERPRETER_UP_NS if interpreter_up_ns is None else interpreter_up_ns)
    if warm is not None:
        marks.info["warm"] = warm
        if warm.get("torch_import_ns"):  # the zygote imported torch (it does when the workload needs it)
            marks.preloaded_reason = timeline.warm_torch_reason(warm)
    from aorta_tui.core.errors import AortaError

    try:  # a damaged spec: a located message and exit 2, no traceback (and no trial dir to write)
        spec = WorkerSpec.from_json(argv[0])
    except AortaError as exc:
        print(f"aorta-tui worker: {exc.render()}", file=sys.stderr, flush=True)
        return int(exc.exit_code)
    started = time.time()
    try:
        result = run_trial(spec, marks)
    except Exception as exc:  # config or import errors: still leave a result behind
        msg = exc.render() if isinstance(exc, AortaError) else f"{type(exc).__name__}: {exc}"
        print(f"aorta-tui worker: {msg}", file=sys.stderr, flush=True)
        result = WorkloadResult(failures=[Failure("setup_error", msg)])
    rank = int(os.environ.get("RANK", "0"))
    workload = result.to_dict()  # before the wall time and the result_write mark, as always
    worker_wall_s = time.time() - started
    marks.mark("result_write")
    doc = WorkerResult.of(workload, worker_wall_s=worker_wall_s, timeline=marks.finish())
    # not fsynced: the orchestrator reads it as this process exits, and copies it into the
    # trial's result.json (two fsyncs saved per trial)
    path = Path(spec.trial_dir) / result_filename(rank)
    atomic_write_bytes(path, doc.file_bytes(where=str(path)), durable=False)
    if rank == 0:  # the end of the write cannot be inside the file: one line on stdout says it
        print(timeline.result_written_line(timeline.now_ns()), flush=True)
    # The result file carries the verdict (the classifier reads its failures). A non-zero exit
    # here would only add noise: under torchrun it makes the launcher print a ChildFailedError
    # traceback that reads like a crash.
    return 0


_INJECTED = ("CUDA_INJECTION64_PATH", "HSA_TOOLS_LIB", "LD_PRELOAD")


def fast_exit_allowed(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why the worker must exit the normal way, or ``None`` when ``os._exit`` is safe."""
    import threading

    if environ.get("AORTA_TRIAL_FAST_EXIT", "1") == "0":
        return "AORTA_TRIAL_FAST_EXIT=0"
    injected = [k for k in _INJECTED if environ.get(k)]
    if injected:
        return f"{injected[0]} is set (an injected library may flush at exit)"
    alive = [t.name for t in threading.enumerate()
             if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if alive:
        return f"non-daemon thread {alive[0]!r} still runs"
    return None


def _leave(code: int) -> None:
    if fast_exit_allowed() is not None:
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()  # the workload's and torch's handlers (profilers, caches) still run
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    _leave(main())
