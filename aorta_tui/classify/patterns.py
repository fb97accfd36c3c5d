"""Tier 4: built-in patterns searched in every trial's stdout and stderr.

Each pattern matches within one line (the scanner enforces it) and carries a real-looking
sample line that its regex matches (``more_samples``: one per other spelling it covers);
``aorta-tui sweep list-patterns`` prints them. Named groups become the detection's
``captures``; a group name ending in ``__<n>`` (``op__2``) is captured under the name before
it, so alternatives of one pattern can fill the same capture. Ids are stable: recipes name
them in ``disable_detectors`` and the matrix counts them.
"""

from __future__ import annotations

import re

from aorta_tui.classify.model import Pattern, Severity


def _p(
    id: str,
    regex: str,
    severity: Severity,
    description: str,
    sample: str,
    needles: tuple[str, ...],
    flags: int = 0,
    more_samples: tuple[str, ...] = (),
) -> Pattern:
    rx = re.compile(regex, flags | re.MULTILINE)
    return Pattern(id, rx, severity, description, sample, 4, needles, more_samples)


# Order matters for the verdict's reason: the most specific pattern that fired explains the
# trial, so narrow patterns come first and the generic traceback late.
LOG_PATTERNS: tuple[Pattern, ...] = (
    _p(
        "out_of_memory",
        r"\b(?P<api>CUDA|HIP) out of memory\b|\bOutOfMemoryError\b"
        r"|\b(?:hipError_?OutOfMemory|cudaError_?MemoryAllocation)\b|\b(?:CUDA|HIP) error: out of memory",
        "fail",
        "GPU out of memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 139.81 GiB of which 1.12 GiB is free.",
        ("out of memory", "OutOfMemoryError", "hipErrorOutOfMemory", "cudaErrorMemoryAllocation",
         "hipError_OutOfMemory", "cudaError_MemoryAllocation"),
    ),
    _p(
        "illegal_memory_access",
        r"an illegal memory access was encountered|\b(?:cuda|hip)Error_?IllegalAddress\b"
        r"|\bCUDA_ERROR_ILLEGAL_ADDRESS\b",
        "fail",
        "GPU kernel accessed an illegal address",
        "terminate called after throwing an instance of 'c10::Error': an illegal memory access was encountered",
        ("illegal memory access", "ErrorIllegalAddress", "Error_IllegalAddress",
         "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ),
    _p(
        "device_side_assert",
        r"device-side assert(?:ion)? triggered"
        r"|block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion",
        "fail",
        "GPU kernel assertion failed (device-side assert)",
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
        "block: [0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        ("device-side assert", "] Assertion"),
    ),
    _p(
        "cuda_error",
        # cudaErrorLaunchFailure and cudaError_LaunchFailure; never the type name cudaError_t
        r"\bCUDA error: (?P<message>[^\r\n]*\S)|\b(?P<code>cudaError(?!_t\b)_?[A-Z]\w*)"
        r"|\b(?P<driver_code>CUDA_ERROR_[A-Z_]+)",
        "fail",
        "CUDA runtime or driver error",
        "RuntimeError: CUDA error: misaligned address",
        ("CUDA error: ", "cudaError", "CUDA_ERROR_"),
        more_samples=("kernel launch returned cudaError_LaunchFailure (719) at attn.cu:88",),
    ),
    _p(
        "hip_error",
        r"\bHIP error: (?P<message>[^\r\n]*\S)|\b(?P<code>hipError(?!_t\b)_?[A-Z]\w*)",
        "fail",
        "HIP runtime error",
        "RuntimeError: HIP error: invalid device function",
        ("HIP error: ", "hipError"),
        more_samples=("hipMemcpyAsync failed: hipError_InvalidValue (code 1)",),
    ),
    _p(
        "hsa_error",
        r"\b(?P<code>HSA_STATUS_ERROR\w*)",
        "fail",
        "ROCm HSA runtime error",
        "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory "
        "beyond the largest legal address.",
        ("HSA_STATUS_ERROR",),
    ),
    # Upstream's tier4:rocm_error: ROCm tools and the HSA runtime end a failure with
    # "Error code: N". Generic, but upstream fails a trial on it, so this does too.
    _p(
        "rocm_error",
        r"\bError code: (?P<code>\d+)",
        "fail",
        "ROCm error code ('Error code: N')",
        "hsa api call failure at: /src/rocminfo.cc:1193  Error code: 4104",
        ("Error code: ",),
    ),
    _p(
        "gpu_memory_access_fault",
        r"Memory access fault by GPU node-(?P<node>\d+)",
        "fail",
        "ROCm GPU memory access fault (the runtime aborts the process)",
        "Memory access fault by GPU node-2 (Agent handle: 0x55d0c0a0b0c0) on address "
        "0x7f3a00000000. Reason: Page not present or supervisor privilege.",
        ("Memory access fault by GPU node-",),
    ),
    # Spellings taken from torch's own sources (torch 2.13: libtorch_cpu.so strings and
    # include/torch/csrc/distributed/c10d/NCCLUtils.hpp; the watchdog's from ProcessGroupNCCL.cpp,
    # which RCCL builds share) and checked against real gloo runs under torchrun.
    _p(
        "collective_timeout",
        # NCCL/RCCL watchdog (ProcessGroupNCCL, async error handling)
        r"Watchdog caught collective operation timeout"
        r"(?:[^\r\n]*?OpType=(?P<op>\w+))?(?:[^\r\n]*?Timeout\(ms\)=(?P<timeout_ms>\d+))?"
        # gloo: the blocked transfer of a collective (unbound_buffer.cc)
        r"|Timed out waiting (?P<timeout_ms__2>\d+)ms for (?P<op__2>recv|send) operation"
        # gloo monitored_barrier: names the rank(s) that never arrived
        r"|\bRanks? (?P<ranks>\d+(?:, \d+)*) failed to pass monitoredBarrier in (?P<timeout_ms__3>\d+) ms"
        # NCCL blocking-wait / communicator-init timeout (C10D_CHECK_TIMEOUT)
        r"|\bNCCL timeout in: (?P<where>\S+)",
        "fail",
        "a collective operation timed out (NCCL/RCCL watchdog, gloo transfer or monitored barrier)",
        "[rank1]:[E1129 10:02:11 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
        ("Watchdog caught collective operation timeout", "Timed out waiting ",
         "failed to pass monitoredBarrier", "NCCL timeout in: "),
        more_samples=(
            "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
            "unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete",
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:136] Timed out "
            "waiting 1800000ms for send operation to complete",
            "[rank0]:[E1129 09:50:22.587192290 ProcessGroupGloo.cpp:67] [Rank 0]: Rank 1 failed to "
            "pass monitoredBarrier in 2000 ms",
            "torch.distributed.DistBackendError: NCCL timeout in: "
            "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:101",
        ),
    ),
    _p(
        "nccl_error",
        r"\b(?P<code>nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument"
        r"|InvalidUsage|RemoteError|InProgress))\b|\b(?P<lib>[NR]CCL) (?:error|ERROR)\b",
        "fail",
        "NCCL/RCCL collective library error",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        ("nccl", "CCL error", "CCL ERROR"),
        more_samples=("gpu-node-3:118:204 [2] RCCL ERROR failed to connect to peer 5",),
    ),
    _p(
        "nan_loss",
        # (?<!\w), not (?<![A-Za-z]): a start after a digit or "_" re-scanned the rest of the
        # word at every position - quadratic on a long run of digits (20k: 4 s)
        r"(?<!\w)(?P<name>\w*(?i:loss))(?:\s+(?:(?i:is)\s+)?|\s*[=:]\s*)"
        r"(?P<value>[-+]?(?:nan|NaN|NAN|Nan|inf(?:inity)?|Inf(?:inity)?))\b",
        "fail",
        "non-finite loss (NaN or inf)",
        "step 120 | loss = nan | lr 3.0e-04",
        ("nan", "NaN", "NAN", "Nan", "inf", "Inf"),
        more_samples=("epoch 3 step 40: train_loss NaN, skipping the update",
                      "[trainer] Loss Is NaN at step 812"),
    ),
    _p(
        "gpu_library_error",
        r"\b(?P<code>(?:CUBLAS|CUBLASLT|CUDNN|CUSOLVER|CUSPARSE|CUFFT|HIPBLAS|HIPBLASLT|MIOPEN)"
        r"_STATUS_(?!SUCCESS\b)[A-Z_]+)|\b(?P<rocm_code>rocblas_status_(?!success\b)\w+"
        r"|miopenStatus(?!Success\b)\w+)|\brocBLAS error\b",
        "fail",
        "GPU math library error (cuBLAS, cuDNN, rocBLAS, MIOpen, ...)",
        "RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k)`",
        ("_STATUS_", "rocblas_status_", "miopenStatus", "rocBLAS error"),
    ),
    _p(
        "process_crash",
        r"\bSegmentation fault\b|\bFatal Python error: (?P<message>[^\r\n]*\S)"
        # Only signals that mean a crash. SIGTERM/SIGINT/SIGHUP/SIGKILL are requests to stop:
        # torchrun sends SIGTERM (then SIGKILL) to the surviving ranks once one rank failed, and
        # reports each as "Signal 15 (SIGTERM) received by PID ..." - a consequence, not a crash.
        r"|\bSignal \d+ \((?P<signal>SIG(?:SEGV|BUS|FPE|ILL|ABRT|IOT|SYS|TRAP))\) received by PID \d+",
        "fail",
        "a process of the trial crashed (a launcher such as torchrun may still exit normally)",
        "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -11) local_rank: 3 "
        "(pid: 4242) of binary: /usr/bin/python3 ... Signal 11 (SIGSEGV) received by PID 4242",
        ("Segmentation fault", "Fatal Python error", ") received by PID"),
    ),
    _p(
        "python_traceback",
        r"^Traceback \(most recent call last\):",
        "fail",
        "Python exception traceback",
        "Traceback (most recent call last):",
        ("Traceback (most recent call last):",),
    ),
    _p(
        "nccl_warn",
        r"\bNCCL WARN (?P<message>[^\r\n]*\S)",
        "warn",
        "NCCL/RCCL warning (often the first line of a collective failure)",
        "gpu-node-7:2315:2400 [1] NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory",
        ("NCCL WARN ",),
    ),
)
