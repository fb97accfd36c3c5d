"""The catalogue of environment variables a snapshot records, each with a category.

A variable's category decides how a difference in it is ranked by ``env diff``
(see ``CATEGORY_RANK``): ``numerics`` categories change which kernel, library or precision
runs (so results can change), ``scheduling`` categories change where and how concurrently work
runs (so timing can change), ``informational`` ones only change logging or paths of caches.

The ROCm/RCCL/hipBLASLt/rocBLAS/Tensile/MIOpen/FBGEMM names cover every knob upstream AORTA
0.3.0 records (schema 1.17); the CUDA, cuBLAS, cuDNN, NCCL, PyTorch, Triton, XLA/JAX,
TensorFlow and CPU-math names are this project's additions. Every listed variable is
recorded, set or not; an unset one is ``{"value": null, "set": false}``.
"""

from __future__ import annotations

import os

from aorta_tui.envsnap.fields import Leaf

CATEGORY_RANK: dict[str, str] = {
    "precision": "numerics",  # TF32 / reduced-precision / emulated math
    "determinism": "numerics",  # deterministic algorithm / workspace choices
    "gemm_selection": "numerics",  # which GEMM library / solution / kernel runs
    "gemm_numerics": "numerics",  # alternate arithmetic implementations inside a GEMM library
    "numeric_checks": "numerics",  # extra scan kernels and syncs: can hide or expose races
    "conv_selection": "numerics",  # which convolution algorithm runs
    "attention_backend": "numerics",  # which SDPA / attention implementation runs
    "collective_algorithm": "numerics",  # reduction order of collectives
    "codegen": "numerics",  # compiler / JIT code generation
    "library_loading": "numerics",  # which shared library is actually loaded
    "embedding_backend": "numerics",  # FBGEMM kernel variants
    "device_visibility": "scheduling",  # which GPUs the process sees, in which order
    "launch": "scheduling",  # launch blocking, queues, connections, serialization
    "runtime": "scheduling",  # HSA / CUDA runtime behaviour that changes timing
    "memory": "scheduling",  # allocators and workspaces
    "collective_transport": "scheduling",  # NCCL/RCCL channels, fabric, transports
    "cpu_threads": "scheduling",  # OpenMP / MKL / BLAS thread counts and pinning
    "gemm_launch_geometry": "scheduling",  # Stream-K / workgroup mapping / StaggerU
    "diagnostics": "informational",  # logging, tracing, markers, benchmark printing
    "cache_paths": "informational",  # where JIT caches live
}

_CATALOGUE: dict[str, str] = {
    "precision": """
        NVIDIA_TF32_OVERRIDE TORCH_ALLOW_TF32_CUBLAS_OVERRIDE DISABLE_TF32
        HIPBLASLT_OVERRIDE_COMPUTE_TYPE_XF32 CUBLAS_EMULATE_SINGLE_PRECISION
        CUBLAS_EMULATION_STRATEGY TRITON_F32_DEFAULT JAX_DEFAULT_MATMUL_PRECISION JAX_ENABLE_X64
        ONEDNN_DEFAULT_FPMATH_MODE DNNL_DEFAULT_FPMATH_MODE TORCHINDUCTOR_EMULATE_PRECISION_CASTS
        TF_ENABLE_ONEDNN_OPTS
    """,
    "determinism": """
        CUBLAS_WORKSPACE_CONFIG TF_DETERMINISTIC_OPS TF_CUDNN_DETERMINISTIC PYTHONHASHSEED
        MKL_CBWR ROCBLAS_DEFAULT_ATOMICS_MODE
    """,
    "gemm_selection": """
        TORCH_BLAS_PREFER_HIPBLASLT TORCH_BLAS_PREFER_CUBLASLT TORCH_HIPBLASLT_TUNING_FILE
        TORCH_HIPBLASLT_TUNING_OVERRIDE_FILE PYTORCH_TUNABLEOP_ENABLED PYTORCH_TUNABLEOP_TUNING
        PYTORCH_TUNABLEOP_FILENAME PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE
        TORCHINDUCTOR_MAX_AUTOTUNE TORCHINDUCTOR_MAX_AUTOTUNE_GEMM
        TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE CUBLASLT_HEURISTICS_CACHE_CAPACITY
        ROCBLAS_USE_HIPBLASLT ROCBLAS_USE_HIPBLASLT_BATCHED HIPBLASLT_USE_ROCROLLER
        HIPBLASLT_ROCROLLER_NO_CUSTOM_KERNEL HIPBLASLT_TUNING_OVERRIDE_FILE
        HIPBLASLT_TENSILE_LIBPATH HIPBLASLT_EXT_OP_LIBRARY_PATH HIPBLASLT_PRELOAD_KERNELS
        TENSILE_MAX_DECOMPRESSED_BYTES ROCBLAS_TENSILE_LIBPATH ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH
        TENSILE_SOLUTION_INDEX TENSILE_SOLUTION_SELECTION_METHOD TENSILE_EXPERIMENTAL_SELECTION
        TENSILE_TAM_SELECTION_ENABLE TENSILE_NAIVE_SEARCH TENSILE_METRIC TENSILE_PREDICTION_LIB
        TENSILE_GRIDBASED_KDTREE TENSILE_GRIDBASED_BATCH_EXP ANALYTICAL_GEMM_HEURISTICS
        ANALYTICAL_GEMM_HEURISTICS_VARIANCE GRIDBASED_TOPSOLS TENSILE_ADAPTIVE_GEMM_NTAB_ALGO
        TENSILE_DB2
    """,
    "gemm_numerics": """
        ROCBLAS_INTERNAL_FP16_ALT_IMPL ROCBLAS_INTERNAL_FP16_ALT_IMPL_RNZ
        ROCBLAS_INTERNAL_FORCE_VALU_FOR_DGEMM
    """,
    "numeric_checks": """
        HIPBLASLT_CHECK_NUMERICS HIPBLASLT_CHECK_NUMERICS_SCAN_EVERY
        HIPBLASLT_CHECK_NUMERICS_SCAN_FROM HIPBLASLT_CHECK_NUMERICS_SCAN_UNTIL
        HIPBLASLT_CHECK_NUMERICS_STOP_ON_FIRST ROCBLAS_CHECK_NUMERICS TORCH_USE_CUDA_DSA
    """,
    "conv_selection": """
        MIOPEN_FIND_MODE MIOPEN_DEBUG_DISABLE_FIND_DB MIOPEN_SYSTEM_DB_PATH MIOPEN_USER_DB_PATH
        CUDNN_CONV_WSCAP_DBG TORCH_CUDNN_V8_API_DISABLED TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT
    """,
    "attention_backend": """
        TORCH_ROCM_FA_PREFER_CK TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL TORCH_CUDNN_SDPA_ENABLED
    """,
    "collective_algorithm": """
        NCCL_ALGO NCCL_PROTO NCCL_NVLS_ENABLE NCCL_COLLNET_ENABLE RCCL_MSCCL_ENABLE
        RCCL_LL128_FORCE_ENABLE RCCL_DISABLE_RAIL_TREES
    """,
    "codegen": """
        AMDGCN_USE_BUFFER_OPS PYTORCH_ROCM_ARCH TORCH_CUDA_ARCH_LIST CUDA_FORCE_PTX_JIT
        CUDA_DISABLE_PTX_JIT XLA_FLAGS TRITON_INTERPRET TRITON_ALWAYS_COMPILE TRITON_PTXAS_PATH
        TORCH_COMPILE_DISABLE TORCHDYNAMO_DISABLE TORCHINDUCTOR_FREEZING PYTORCH_JIT
        HSA_OVERRIDE_GFX_VERSION
    """,
    "library_loading": """
        LD_LIBRARY_PATH LD_PRELOAD CUDA_HOME CUDA_PATH ROCM_PATH ROCM_HOME HIP_PATH
        TRITON_LIBCUDA_PATH NCCL_NET_PLUGIN NCCL_NET
    """,
    "embedding_backend": """
        FBGEMM_NO_JK FBGEMM_TBE_V2 FBGEMM_TBE_ROCM_HIP_BACKWARD_KERNEL
        FBGEMM_BOUNDS_CHECK_INDICES_V2
    """,
    "device_visibility": """
        CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER NVIDIA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES
        ROCR_VISIBLE_DEVICES GPU_DEVICE_ORDINAL JAX_PLATFORMS
    """,
    "launch": """
        CUDA_LAUNCH_BLOCKING HIP_LAUNCH_BLOCKING CUDA_DEVICE_MAX_CONNECTIONS GPU_MAX_HW_QUEUES
        CUDA_MODULE_LOADING CUDA_MODULE_DATA_LOADING CUDA_SCALE_LAUNCH_QUEUES AMD_SERIALIZE_KERNEL
        AMD_SERIALIZE_COPY HIP_FORCE_DEV_KERNARG CUDA_MPS_PIPE_DIRECTORY
        CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
        TORCH_NCCL_HIGH_PRIORITY
    """,
    "runtime": """
        HSA_XNACK HSA_KERNARG_POOL_SIZE HSA_NO_SCRATCH_RECLAIM HSA_TOOLS_DISABLE_REGISTER
        HSA_ENABLE_SDMA HSA_ENABLE_INTERRUPT HSA_CU_MASK HSA_ENABLE_SCRATCH_ASYNC_RECLAIM
        CUDA_AUTO_BOOST CUDA_DEVICE_WAITS_ON_EXCEPTION CUDA_ENABLE_COREDUMP_ON_EXCEPTION
        CUDA_MANAGED_FORCE_DEVICE_ALLOC PYTORCH_NVML_BASED_CUDA_CHECK
    """,
    "memory": """
        PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF PYTORCH_HIP_ALLOC_CONF
        PYTORCH_NO_CUDA_MEMORY_CACHING PYTORCH_NO_HIP_MEMORY_CACHING CUBLASLT_WORKSPACE_SIZE
        ROCBLAS_DEVICE_MEMORY_SIZE ROCBLAS_INTERNAL_TRSM_REG_KERNEL_MEM_LIMIT
        ROCBLAS_STREAM_ORDER_ALLOC XLA_PYTHON_CLIENT_PREALLOCATE XLA_PYTHON_CLIENT_MEM_FRACTION
        XLA_PYTHON_CLIENT_ALLOCATOR TF_FORCE_GPU_ALLOW_GROWTH
    """,
    "collective_transport": """
        NCCL_MAX_NCHANNELS NCCL_MIN_NCHANNELS NCCL_NTHREADS NCCL_BUFFSIZE NCCL_P2P_LEVEL
        NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_IB_DISABLE NCCL_NET_GDR_LEVEL NCCL_CROSS_NIC
        NCCL_LAUNCH_MODE NCCL_TOPO_FILE NCCL_GRAPH_FILE NCCL_IB_HCA NCCL_SOCKET_IFNAME
        RCCL_AINIC_ROCE RCCL_CTS_OFFLOAD_ENABLED NCCL_IB_GID_INDEX NCCL_IB_ROCE_VERSION_NUM
        NCCL_IB_TC NCCL_IB_FIFO_TC NCCL_GDR_FLUSH_DISABLE NCCL_GDRCOPY_ENABLE NCCL_IB_USE_INLINE
        NCCL_IB_PCI_RELAXED_ORDERING NCCL_IB_QPS_PER_CONNECTION NCCL_PXN_DISABLE
        NCCL_IGNORE_CPU_AFFINITY NCCL_NET_OPTIONAL_RECV_COMPLETION
        RCCL_GDR_FLUSH_GPU_MEM_NO_RELAXED_ORDERING NCCL_IB_TIMEOUT NCCL_IB_SL
        NCCL_IB_SPLIT_DATA_ON_QPS NCCL_DMABUF_ENABLE NCCL_CUMEM_ENABLE IONIC_LOCKFREE
        NCCL_WORK_FIFO_BYTES RCCL_GFX9_CHEAP_FENCE_OFF NVSHMEM_DISABLE_NVLS
        TORCH_SYMM_MEM_DISABLE_MULTICAST TORCH_NCCL_BLOCKING_WAIT TORCH_NCCL_ASYNC_ERROR_HANDLING
        TORCH_NCCL_USE_COMM_NONBLOCKING TORCH_NCCL_AVOID_RECORD_STREAMS NCCL_BLOCKING_WAIT
        NCCL_ASYNC_ERROR_HANDLING
    """,
    "cpu_threads": """
        OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS OMP_PROC_BIND OMP_PLACES
        KMP_AFFINITY GOMP_CPU_AFFINITY
    """,
    "gemm_launch_geometry": """
        TENSILE_STREAMK_DYNAMIC_GRID TENSILE_STREAMK_FIXED_GRID TENSILE_STREAMK_MAX_CUS
        TENSILE_STREAMK_DATA_PARALLEL TENSILE_STREAMK_DYNAMIC_WGM TENSILE_STREAMK_FULL_TILES
        TENSILE_STREAMK_GRID_MULTIPLIER TENSILE_FIXED_WGM TENSILE_FIXED_WGMXCC
        TENSILE_FIXED_WGMXCCCHUNK TENSILE_DISABLE_STAGGERU TENSILE_FIXED_STAGGERU
        TENSILE_FIXED_STAGGERU_MAPPING TENSILE_FIXED_STAGGERU_STRIDE_SHIFT
        TENSILE_STREAMK5_FORCE_MODE TENSILE_STREAMK_TILES TENSILE_STREAMK_SPLIT
    """,
    "diagnostics": """
        ANALYTICAL_GEMM_DEBUG ORIGAMI_LOG_FILE HIPBLASLT_LOG_FILE HIPBLASLT_LOG_LEVEL
        HIPBLASLT_LOG_MASK HIPBLASLT_BENCH_PERF HIPBLASLT_BENCH_PERF_ALL
        HIPBLASLT_BENCH_PRINT_COMMAND HIPBLASLT_ENABLE_MARKER TENSILE_ENABLE_MARKER ROCBLAS_LAYER
        ROCBLAS_LOG_PATH ROCBLAS_LOG_TRACE_PATH ROCBLAS_LOG_BENCH_PATH ROCBLAS_LOG_PROFILE_PATH
        ROCBLAS_VERBOSE_HIPBLASLT_ERROR ROCBLAS_VERBOSE_TENSILE_ERROR TENSILE_DB
        TENSILE_ADAPTIVE_GEMM_LOG TENSILE_AUTO_GSU_ALGO TENSILE_SOLUTION_SELECTION_TRACE
        TENSILE_BENCHMARK AMD_LOG_LEVEL CUBLASLT_LOG_LEVEL CUBLASLT_LOG_MASK CUBLASLT_LOG_FILE
        CUBLAS_LOGINFO_DBG CUBLAS_LOGDEST_DBG CUDNN_LOGINFO_DBG CUDNN_LOGDEST_DBG
        CUDNN_LOGLEVEL_DBG CUDNN_FRONTEND_LOG_INFO NCCL_DEBUG NCCL_DEBUG_SUBSYS TORCH_LOGS
        TORCH_COMPILE_DEBUG TORCH_SHOW_CPP_STACKTRACES TORCH_CPP_LOG_LEVEL TRITON_DEBUG
        TRITON_PRINT_AUTOTUNING PYTORCH_TUNABLEOP_VERBOSE TF_CPP_MIN_LOG_LEVEL
        TORCH_NCCL_ENABLE_MONITORING CUDA_COREDUMP_FILE
    """,
    "cache_paths": """
        CUDA_CACHE_DISABLE CUDA_CACHE_PATH CUDA_CACHE_MAXSIZE TRITON_CACHE_DIR
        TORCHINDUCTOR_CACHE_DIR TORCHINDUCTOR_FX_GRAPH_CACHE TORCHINDUCTOR_FORCE_DISABLE_CACHES
        CUDA_MPS_LOG_DIRECTORY
    """,
}


def _build() -> dict[str, str]:
    catalogue: dict[str, str] = {}
    for category, names in _CATALOGUE.items():
        for name in names.split():
            if name in catalogue:
                raise AssertionError(f"{name} is catalogued twice")  # caught by the tests
            catalogue[name] = category
    return dict(sorted(catalogue.items()))


KNOBS: dict[str, str] = _build()  # variable name -> category, sorted by name


def rank_of_variable(name: str) -> str:
    category = KNOBS.get(name)
    return CATEGORY_RANK[category] if category else "informational"


def capture_env_vars(environ: dict[str, str] | None = None) -> dict[str, Leaf]:
    env = os.environ if environ is None else environ
    out: dict[str, Leaf] = {}
    for name, category in KNOBS.items():
        value = env.get(name)
        out[name] = {
            "value": value,
            "state": "ok",
            "source": f"env:{name}",
            "set": value is not None,
            "category": category,
        }
    return out
