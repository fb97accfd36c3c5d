"""Which environment variables ``trial_isolation: warm`` can apply per trial, and which not.

A warm trial is forked from a zygote that already ran the interpreter's start-up and
``import torch`` (:mod:`aorta_tui.trial.warm_zygote`). The trial's environment is applied in the
forked child before any GPU runtime initialises, so a variable read when CUDA/HIP, NCCL/RCCL,
cuBLAS or the caching allocator *initialise* takes effect as in a fresh process. A variable read
*earlier* - by the dynamic loader at exec, by the interpreter at start-up, or by a library while
``import torch`` loads it - has already been read by the zygote: such a variable must be the
same for every trial forked from one zygote, so it is part of the zygote's key, and a cell or
mitigation that changes it gets a zygote of its own, started with it (one per environment and import-time values, at most
``warm.MAX_ZYGOTES``; past that the recipe is refused, exit 2, every such variable listed with
what reads it and its cells).

The table is what each reader does (each row says why). ``scripts/gpu_warm_check.py`` measures
the runtime rows on a GPU (``CUDA_LAUNCH_BLOCKING``, ``CUDA_DEVICE_MAX_CONNECTIONS``,
``PYTORCH_CUDA_ALLOC_CONF``, ``CUDA_VISIBLE_DEVICES`` in a forked child) and
``tests/trial/test_warm_mode.py`` the import-time ones on a CPU build.
"""

from __future__ import annotations

from collections.abc import Mapping

# (name or prefix ending in "_" or "*", who reads it and when). First match wins.
IMPORT_TIME: tuple[tuple[str, str], ...] = (
    ("LD_*", "the dynamic loader, when the process is exec'd (LD_PRELOAD, LD_LIBRARY_PATH, "
             "LD_BIND_NOW, ...): the zygote's libraries are already loaded"),
    ("PYTHON*", "the Python interpreter, at start-up (PYTHONPATH, PYTHONHASHSEED, "
                "PYTHONMALLOC, PYTHONWARNINGS, ...)"),
    ("OMP_*", "the OpenMP runtime (libgomp / libiomp), when `import torch` loads it: its "
              "constructor parses its variables once"),
    ("GOMP_*", "libgomp, when `import torch` loads it"),
    ("KMP_*", "Intel's OpenMP runtime, when `import torch` loads it"),
    ("MALLOC_*", "glibc's malloc, at its first allocation (process start-up)"),
    ("GLIBC_TUNABLES", "glibc, at process start-up"),
    ("TORCH_LOGS*", "torch._logging, during `import torch` (_init_logs)"),
    ("TORCH_TRACE", "torch._logging, during `import torch` (_init_logs)"),
    ("TORCH_DEVICE_BACKEND_AUTOLOAD", "`import torch`, which loads the backend entry points"),
    ("TORCH_CPP_LOG_LEVEL", "c10's logging, when libc10 is loaded by `import torch`"),
    ("PYTORCH_JIT", "torch.jit, during `import torch`"),
    ("PYTORCH_JIT_*", "torch.jit, during `import torch`"),
    # The allocator backend (native or cudaMallocAsync) is picked by a static initialiser of
    # libc10_cuda.so, which `import torch` loads: a forked trial keeps the zygote's backend
    # whatever its own value says (measured on the H200, scripts/gpu_warm_check.py). The whole
    # variable is treated so: its other options are parsed later, but one value is one zygote.
    ("PYTORCH_CUDA_ALLOC_CONF", "libc10_cuda's static initialiser, when `import torch` loads it "
                                "(it picks the allocator backend)"),
    ("PYTORCH_ALLOC_CONF", "libc10_cuda's static initialiser, when `import torch` loads it "
                           "(it picks the allocator backend)"),
    ("PYTORCH_HIP_ALLOC_CONF", "libc10_hip's static initialiser, when `import torch` loads it "
                               "(it picks the allocator backend)"),
    # Read into their config modules when those are imported; the zygote imports torch._dynamo
    # ahead for workloads whose optimizer step would (Workload.preload).
    ("TORCHDYNAMO_*", "torch._dynamo.config, when the warm zygote imports torch._dynamo"),
    ("TORCHINDUCTOR_*", "torch._inductor.config, imported with torch._dynamo by the warm zygote"),
    ("TORCH_COMPILE_*", "torch._dynamo / torch._inductor config, imported by the warm zygote"),
)

# What each runtime reads at initialisation, for the documentation and the messages: a variable
# matching none of IMPORT_TIME is applied in the forked child before the runtime starts.
RUNTIME_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("CUDA_LAUNCH_BLOCKING", "the CUDA driver, at cuInit (the first CUDA call in the trial)"),
    ("CUDA_DEVICE_MAX_CONNECTIONS", "the CUDA driver, when it creates the context"),
    ("CUDA_VISIBLE_DEVICES", "the CUDA driver, at cuInit (torch caches the device count only "
                             "after its first query, which the zygote never makes)"),
    ("CUDA_MODULE_LOADING", "torch.cuda's lazy initialisation and the driver"),
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "the CUDA caching allocator, at its first use"),
    ("NCCL_*", "NCCL, when a communicator is created"),
    ("HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / HSA_*", "the HIP runtime / ROCr, at hipInit"),
    ("CUBLAS_WORKSPACE_CONFIG / NVIDIA_TF32_OVERRIDE", "cuBLAS, when its handle is created"),
)

# Per-trial variables the orchestrator sets: never part of a zygote's key or environment.
PER_TRIAL = ("AORTA_ARTIFACT_DIR", "AORTA_TRIAL_ID", "AORTA_CELL", "AORTA_TRIAL", "AORTA_ENV_FILE")


def import_time_reader(name: str) -> str | None:
    """Who reads ``name`` before a forked trial could change it, or None (a runtime variable)."""
    for pattern, reader in IMPORT_TIME:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return reader
        elif name == pattern:
            return reader
    return None


def import_time_items(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The import-time part of an environment: what a zygote for it must be started with."""
    return tuple(sorted((k, v) for k, v in env.items() if import_time_reader(k) is not None))


def zygote_env(env: dict[str, str]) -> dict[str, str]:
    """A trial's environment without the per-trial variables (the zygote outlives the trial)."""
    return {k: v for k, v in env.items() if k not in PER_TRIAL}
