/*
 * aorta-tui's rocprofiler-sdk collector: GPU start/end timestamps of every HIP kernel dispatch
 * (and memory copy), handed live to the trace session that started the program, in the same
 * 64-byte records and through the same FIFO as the CUPTI collector (cupti_collector.c).
 *
 * NEVER RUN ON AMD HARDWARE. It is written against the rocprofiler-sdk headers and their
 * documentation (source/docs/api-reference/tool_library.md, buffered_services.md) and compiled
 * against them; no AMD GPU was available to this project. docs/tracing.md ("ROCm") lists what
 * that leaves unproven.
 *
 * Loaded as a rocprofiler-sdk tool library: ROCP_TOOL_LIBRARIES names it, rocprofiler-register
 * (called by the HIP/HSA runtimes at start-up) finds rocprofiler_configure() in it and calls it;
 * then rocprofiler-sdk calls tool_init(), where the context is made.
 *
 * Design, and why (the CUPTI side's choices, mapped onto rocprofiler-sdk):
 * - No callback on the program's thread at all: rocprofiler-sdk's *buffer* tracing records the
 *   HIP launch API calls (correlation id, thread id, host start time) and the kernel dispatches
 *   (correlation id, device start/end) into its own buffers; its background thread hands them
 *   to buffer_completed(), which converts them into a bounded staging area.
 * - The buffer policy is DISCARD: a full buffer drops records (rocprofiler counts them and
 *   passes drop_count, which we add up) and never blocks the program (LOSSLESS could).
 * - All FIFO I/O happens on the collector's own flush thread, SIGPIPE blocked there; it also
 *   calls rocprofiler_flush_buffer() every AORTA_ROCPROF_FLUSH_MS (100 ms), the bounded delay.
 * - Clocks: rocprofiler-sdk stamps records with rocprofiler_get_timestamp()'s clock (CLOCK_BOOTTIME
 *   in rocprofiler-sdk 0.5's source, lib/common/utility.hpp), not bpftrace's CLOCK_MONOTONIC. So
 *   every flush writes a CLOCK record bracketing rocprofiler_get_timestamp() between two
 *   CLOCK_MONOTONIC readings (the session maps kernel times with it, as it does CUPTI's), and the
 *   launch records' host times are mapped onto CLOCK_MONOTONIC here, with the newest bracket,
 *   because the session compares them with eBPF times directly.
 *
 * Build (aorta_tui/trace/device/build.py does it, cached per rocprofiler-sdk version):
 *   cc -O2 -shared -fPIC -pthread -I<rocm include> rocprof_collector.c \
 *      -L<rocm lib> -lrocprofiler-sdk -Wl,-rpath,<rocm lib>
 * With -DAORTA_LAYOUT_PROBE only the record format is compiled, with a main() that prints its
 * layout (tests compare it with records.py; no rocprofiler-sdk headers needed for that).
 */

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

/* ---- record format (mirrored by aorta_tui/trace/device/records.py) ---------------------- */
#define REC_MAGIC 0xA07Au
#define REC_VERSION 1
enum {
    REC_HELLO = 1,  /* f0 rocprofiler-sdk runtime version, f1 flush ms, f2 staging slots, f3 0 (no
                       clock choice: times are mapped by CLOCK records), f4 domain (DOMAIN_HIP),
                       f5 header version built against, f6 HIP launch operations traced */
    REC_CLOCK = 2,  /* f0 mono before, f1 rocprofiler_get_timestamp, f2 mono after */
    REC_LAUNCH = 3, /* f0 tid, f1 correlation id (internal), f2 API start on CLOCK_MONOTONIC,
                       f3 0 (buffer records carry no stream), f4 operation|domain<<32 */
    REC_KERNEL = 4, /* f0 correlation id, f1 start, f2 end, f3 device index, f4 queue handle,
                       f5 0 (no graph id), f6 kernel id */
    REC_MEMCPY = 5, /* f0 correlation id, f1 start, f2 end, f3 dst device index, f5 bytes, f6 op */
    REC_MEMSET = 6, /* not written here */
    REC_STATS = 7,  /* f0 launch API records, f1 0 (no ring), f2 dropped (pipe), f3 dropped
                       (rocprofiler drop_count), f4 device records, f5 buffers, f6 dropped (staging) */
    REC_ERROR = 8,  /* f0 rocprofiler_status_t, f1 where (enum below) */
    REC_BYE = 9,    /* as STATS, written by the finalizer */
    /* the CUPTI collector's latency-timestamp kernel, stream and buffer-pool records share the
       numbering (records.py Rec); not written here */
    REC_KERNEL_LAT = 10,
    REC_STREAM = 11,
    REC_POOL = 12,
};
#define DOMAIN_HIP 3 /* records.py DOMAIN_HIP: beside CUPTI's driver (1) and runtime (2) */
/* where: 6 is shared with the CUPTI side (records.py ERROR_WHERE) */
enum {
    AT_FIFO = 6,
    AT_CREATE_CONTEXT = 11,
    AT_CREATE_BUFFER = 12,
    AT_KERNEL_DISPATCH = 13,
    AT_HIP_API = 14,
    AT_MEMORY_COPY = 15,
    AT_CALLBACK_THREAD = 16,
    AT_START_CONTEXT = 17,
    AT_FLUSH = 18,
    AT_NO_LAUNCH_OPS = 19,
};

typedef struct {
    uint16_t magic;
    uint8_t version;
    uint8_t type;
    uint32_t pid;
    uint64_t f[7];
} aorta_rec;
_Static_assert(sizeof(aorta_rec) == 64, "records are 64 bytes");
_Static_assert(offsetof(aorta_rec, type) == 3 && offsetof(aorta_rec, pid) == 4, "header layout");
_Static_assert(offsetof(aorta_rec, f) == 8, "fields start at byte 8");

#ifdef AORTA_LAYOUT_PROBE
#include <stdio.h>
int main(void) {
    printf("{\"size\": %zu, \"magic\": [%zu, %zu], \"version\": [%zu, %zu], \"type\": [%zu, %zu], "
           "\"pid\": [%zu, %zu], \"f\": [%zu, %zu], \"MAGIC\": %u, \"VERSION\": %u, \"DOMAIN_HIP\": %d, ",
           sizeof(aorta_rec), offsetof(aorta_rec, magic), sizeof(uint16_t), offsetof(aorta_rec, version),
           sizeof(uint8_t), offsetof(aorta_rec, type), sizeof(uint8_t), offsetof(aorta_rec, pid),
           sizeof(uint32_t), offsetof(aorta_rec, f), sizeof(((aorta_rec *)0)->f), REC_MAGIC, REC_VERSION,
           DOMAIN_HIP);
    printf("\"types\": {\"HELLO\": %d, \"CLOCK\": %d, \"LAUNCH\": %d, \"KERNEL\": %d, \"MEMCPY\": %d, "
           "\"MEMSET\": %d, \"STATS\": %d, \"ERROR\": %d, \"BYE\": %d, \"KERNEL_LAT\": %d, "
           "\"STREAM\": %d, \"POOL\": %d}, ",
           REC_HELLO, REC_CLOCK, REC_LAUNCH, REC_KERNEL, REC_MEMCPY, REC_MEMSET, REC_STATS, REC_ERROR, REC_BYE,
           REC_KERNEL_LAT, REC_STREAM, REC_POOL);
    printf("\"where\": {\"%d\": \"fifo\", \"%d\": \"rocprofiler_create_context\", \"%d\": "
           "\"rocprofiler_create_buffer\", \"%d\": \"kernel dispatch\", \"%d\": \"hip api\", \"%d\": "
           "\"memory copy\", \"%d\": \"callback thread\", \"%d\": \"rocprofiler_start_context\", \"%d\": "
           "\"rocprofiler_flush_buffer\", \"%d\": \"no launch ops\"}}\n",
           AT_FIFO, AT_CREATE_CONTEXT, AT_CREATE_BUFFER, AT_KERNEL_DISPATCH, AT_HIP_API, AT_MEMORY_COPY,
           AT_CALLBACK_THREAD, AT_START_CONTEXT, AT_FLUSH, AT_NO_LAUNCH_OPS);
    return 0;
}
#else /* the collector itself */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* rocprofiler.h pulls in the HIP and HSA API-argument headers (C++ .hpp files on some
 * versions); a full ROCm installation has them. Without them, the headers this collector uses
 * are included one by one, and the three utility functions declared with rocprofiler.h's own
 * prototypes (an identical redeclaration where both are seen). */
#if defined(__has_include) && __has_include(<hip/hip_runtime_api.h>) && !defined(AORTA_ROCP_SUBSET)
#include <rocprofiler-sdk/rocprofiler.h>
#else
#include <rocprofiler-sdk/buffer.h>
#include <rocprofiler-sdk/buffer_tracing.h>
#include <rocprofiler-sdk/context.h>
#include <rocprofiler-sdk/internal_threading.h>
#include <rocprofiler-sdk/version.h>
ROCPROFILER_EXTERN_C_INIT
rocprofiler_status_t rocprofiler_get_timestamp(rocprofiler_timestamp_t *ts) ROCPROFILER_API ROCPROFILER_NONNULL(1);
ROCPROFILER_EXTERN_C_FINI
#endif
#include <rocprofiler-sdk/registration.h>

#ifndef ROCPROFILER_VERSION
#error "rocprofiler-sdk/version.h defines no ROCPROFILER_VERSION: not an installed rocprofiler-sdk"
#endif

static _Atomic uint64_t n_launches, n_drop_pipe, n_drop_rocp, n_device, n_buffers, n_drop_staging;

static int out_fd = -1;
static uint32_t my_pid;
static int flush_ms = 100;
static uint32_t runtime_version;
static uint64_t n_launch_ops;
static rocprofiler_context_id_t ctx;
static rocprofiler_buffer_id_t buf;
static pthread_t flusher;
static _Atomic int stopping;
static _Atomic int active;
/* rocprofiler clock minus CLOCK_MONOTONIC, ns (newest bracket): maps launch times */
static _Atomic int64_t rocp_minus_mono;

static inline uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void fill(aorta_rec *r, uint8_t type) {
    memset(r, 0, sizeof *r);
    r->magic = REC_MAGIC;
    r->version = REC_VERSION;
    r->type = type;
    r->pid = my_pid;
}

/* ---- staging (filled on rocprofiler's thread, written by ours) --------------------------- */
#define STAGING_MAX (1u << 20) /* records (64 MiB) before new ones are dropped and counted */
static pthread_mutex_t staging_mu = PTHREAD_MUTEX_INITIALIZER;
static aorta_rec *staging;
static size_t staging_len, staging_cap;

static void stage(const aorta_rec *r) {
    if (staging_len == staging_cap) {
        size_t cap = staging_cap ? staging_cap * 2 : 4096;
        aorta_rec *p = cap <= STAGING_MAX ? realloc(staging, cap * sizeof *p) : NULL;
        if (!p) {
            atomic_fetch_add_explicit(&n_drop_staging, 1, memory_order_relaxed);
            return;
        }
        staging = p;
        staging_cap = cap;
    }
    staging[staging_len++] = *r;
}

static void report_error(rocprofiler_status_t res, int where) {
    aorta_rec r;
    fill(&r, REC_ERROR);
    r.f[0] = (uint64_t)res;
    r.f[1] = (uint64_t)where;
    pthread_mutex_lock(&staging_mu);
    stage(&r);
    pthread_mutex_unlock(&staging_mu);
}

/* ---- output: whole records, at most PIPE_BUF bytes a write, never blocking --------------- */
#define CHUNK_RECS (4096 / sizeof(aorta_rec))
static aorta_rec chunk[CHUNK_RECS];
static size_t chunk_len;
#define WRITE_WAIT_MS 1000 /* how long the flush thread waits for the reader before dropping */

static void chunk_flush(void) {
    if (chunk_len == 0)
        return;
    if (out_fd >= 0) {
        ssize_t w = write(out_fd, chunk, chunk_len * sizeof(aorta_rec));
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {out_fd, POLLOUT, 0};
            if (poll(&pfd, 1, WRITE_WAIT_MS) > 0 && (pfd.revents & POLLOUT))
                w = write(out_fd, chunk, chunk_len * sizeof(aorta_rec));
        }
        if (w < 0) {
            atomic_fetch_add_explicit(&n_drop_pipe, chunk_len, memory_order_relaxed);
            if (errno == EPIPE) { /* the session went away: stop writing, keep the program running */
                close(out_fd);
                out_fd = -1;
            }
        }
    } else {
        atomic_fetch_add_explicit(&n_drop_pipe, chunk_len, memory_order_relaxed);
    }
    chunk_len = 0;
}

static void emit(const aorta_rec *r) {
    chunk[chunk_len++] = *r;
    if (chunk_len == CHUNK_RECS)
        chunk_flush();
}

/* Writes from a thread other than the flush thread (start-up, the finalizer): SIGPIPE blocked
 * around the write and a pending one consumed, so it is never delivered to the program. */
static void chunk_flush_guarded(void) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    chunk_flush();
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void emit_clock(void) {
    aorta_rec r;
    rocprofiler_timestamp_t ts = 0;
    fill(&r, REC_CLOCK);
    r.f[0] = mono_ns();
    rocprofiler_get_timestamp(&ts);
    r.f[2] = mono_ns();
    r.f[1] = ts;
    atomic_store(&rocp_minus_mono, (int64_t)ts - (int64_t)((r.f[0] + r.f[2]) / 2));
    emit(&r);
}

static void emit_stats(uint8_t type) {
    aorta_rec r;
    fill(&r, type);
    r.f[0] = atomic_load(&n_launches);
    r.f[1] = 0;
    r.f[2] = atomic_load(&n_drop_pipe);
    r.f[3] = atomic_load(&n_drop_rocp);
    r.f[4] = atomic_load(&n_device);
    r.f[5] = atomic_load(&n_buffers);
    r.f[6] = atomic_load(&n_drop_staging);
    emit(&r);
}

static void drain(void) {
    pthread_mutex_lock(&staging_mu);
    aorta_rec *batch = staging;
    size_t n = staging_len;
    staging = NULL;
    staging_len = staging_cap = 0;
    pthread_mutex_unlock(&staging_mu);
    for (size_t i = 0; i < n; i++)
        emit(&batch[i]);
    free(batch);
}

/* ---- rocprofiler-sdk records -> our records ------------------------------------------------ */
/* Agents are opaque 64-bit handles; the session wants a small device number (gpu_idle keys). */
#define MAX_AGENTS 64
static uint64_t agent_handles[MAX_AGENTS];
static unsigned n_agents;

static uint64_t device_index(rocprofiler_agent_id_t agent) {
    for (unsigned i = 0; i < n_agents; i++)
        if (agent_handles[i] == agent.handle)
            return i;
    if (n_agents == MAX_AGENTS)
        return 0xFFFF;
    agent_handles[n_agents] = agent.handle;
    return n_agents++;
}

static void hip_api_record(const rocprofiler_buffer_tracing_hip_api_record_t *h) {
    aorta_rec r;
    fill(&r, REC_LAUNCH);
    r.f[0] = h->thread_id;
    r.f[1] = h->correlation_id.internal;
    r.f[2] = (uint64_t)((int64_t)h->start_timestamp - atomic_load(&rocp_minus_mono));
    r.f[3] = 0;
    r.f[4] = (uint64_t)(uint32_t)h->operation | ((uint64_t)DOMAIN_HIP << 32);
    atomic_fetch_add_explicit(&n_launches, 1, memory_order_relaxed);
    stage(&r);
}

static void kernel_record(const rocprofiler_buffer_tracing_kernel_dispatch_record_t *k) {
    aorta_rec r;
    fill(&r, REC_KERNEL);
    r.f[0] = k->correlation_id.internal;
    r.f[1] = k->start_timestamp;
    r.f[2] = k->end_timestamp;
    r.f[3] = device_index(k->dispatch_info.agent_id);
    r.f[4] = k->dispatch_info.queue_id.handle;
    r.f[5] = 0;
    r.f[6] = k->dispatch_info.kernel_id;
    atomic_fetch_add_explicit(&n_device, 1, memory_order_relaxed);
    stage(&r);
}

static void copy_record(const rocprofiler_buffer_tracing_memory_copy_record_t *m) {
    aorta_rec r;
    fill(&r, REC_MEMCPY);
    r.f[0] = m->correlation_id.internal;
    r.f[1] = m->start_timestamp;
    r.f[2] = m->end_timestamp;
    r.f[3] = device_index(m->dst_agent_id);
    r.f[5] = m->bytes;
    r.f[6] = (uint64_t)m->operation;
    atomic_fetch_add_explicit(&n_device, 1, memory_order_relaxed);
    stage(&r);
}

static void buffer_completed(rocprofiler_context_id_t context, rocprofiler_buffer_id_t buffer_id,
                             rocprofiler_record_header_t **headers, size_t num_headers, void *data,
                             uint64_t drop_count) {
    (void)context;
    (void)buffer_id;
    (void)data;
    atomic_fetch_add_explicit(&n_buffers, 1, memory_order_relaxed);
    if (drop_count)
        atomic_fetch_add_explicit(&n_drop_rocp, drop_count, memory_order_relaxed);
    pthread_mutex_lock(&staging_mu);
    for (size_t i = 0; i < num_headers; i++) {
        const rocprofiler_record_header_t *h = headers[i];
        if (h->category != ROCPROFILER_BUFFER_CATEGORY_TRACING)
            continue;
        switch (h->kind) {
        case ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API:
            hip_api_record((const rocprofiler_buffer_tracing_hip_api_record_t *)h->payload);
            break;
        case ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH:
            kernel_record((const rocprofiler_buffer_tracing_kernel_dispatch_record_t *)h->payload);
            break;
        case ROCPROFILER_BUFFER_TRACING_MEMORY_COPY:
            copy_record((const rocprofiler_buffer_tracing_memory_copy_record_t *)h->payload);
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&staging_mu);
}

/* ---- which HIP API operations are launches: by name, since ids change between versions ---- */
/* the entry points the eBPF `hip` set probes (aorta_tui/trace/probes/hip.py LAUNCHES) */
static const char *const launch_names[] = {
    "hipLaunchKernel",  "hipLaunchKernel_spt",        "hipExtLaunchKernel",       "hipLaunchCooperativeKernel",
    "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch",       "hipGraphLaunch_spt",
};
#define MAX_OPS 16
static rocprofiler_tracing_operation_t launch_ops[MAX_OPS];

static int collect_launch_op(rocprofiler_buffer_tracing_kind_t kind, rocprofiler_tracing_operation_t op,
                             void *data) {
    (void)data;
    const char *name = NULL;
    uint64_t len = 0;
    if (rocprofiler_query_buffer_tracing_kind_operation_name(kind, op, &name, &len) != ROCPROFILER_STATUS_SUCCESS ||
        !name)
        return 0;
    for (size_t i = 0; i < sizeof launch_names / sizeof *launch_names; i++)
        if (strcmp(name, launch_names[i]) == 0 && n_launch_ops < MAX_OPS)
            launch_ops[n_launch_ops++] = op;
    return 0; /* 0: keep iterating */
}

/* ---- the flush thread and the finalizer ---------------------------------------------------- */
static void *flush_loop(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE); /* a vanished reader gives EPIPE here, never a signal to the program */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct timespec period = {flush_ms / 1000, (long)(flush_ms % 1000) * 1000000L};
    while (!atomic_load(&stopping)) {
        nanosleep(&period, NULL);
        rocprofiler_status_t res = rocprofiler_flush_buffer(buf);
        if (res != ROCPROFILER_STATUS_SUCCESS && res != ROCPROFILER_STATUS_ERROR_BUFFER_BUSY)
            report_error(res, AT_FLUSH);
        emit_clock(); /* before drain: launch times staged later use this bracket */
        drain();
        emit_stats(REC_STATS);
        chunk_flush();
    }
    return NULL;
}

static void finish(void) {
    if (!atomic_exchange(&active, 0))
        return;
    atomic_store(&stopping, 1);
    pthread_join(flusher, NULL);
    rocprofiler_flush_buffer(buf);
    emit_clock();
    drain();
    emit_stats(REC_BYE);
    chunk_flush_guarded();
}

static void tool_fini(void *tool_data) {
    (void)tool_data;
    finish();
}

static void after_fork_child(void) {
    /* the flush thread does not exist in a forked child */
    atomic_store(&active, 0);
    if (out_fd >= 0) {
        close(out_fd);
        out_fd = -1;
    }
}

static void write_hello(void) {
    aorta_rec r;
    fill(&r, REC_HELLO);
    r.f[0] = runtime_version;
    r.f[1] = (uint64_t)flush_ms;
    r.f[2] = STAGING_MAX;
    r.f[3] = 0;
    r.f[4] = DOMAIN_HIP;
    r.f[5] = ROCPROFILER_VERSION;
    r.f[6] = n_launch_ops;
    emit(&r);
}

#define TRY(call, where)                                                                          \
    do {                                                                                          \
        rocprofiler_status_t res_ = (call);                                                       \
        if (res_ != ROCPROFILER_STATUS_SUCCESS) {                                                 \
            report_error(res_, (where));                                                          \
            return -1;                                                                            \
        }                                                                                         \
    } while (0)

#define BUFFER_BYTES (16u << 20)
#define WATERMARK_BYTES (8u << 20)

/* Services: HIP launch API records, kernel dispatches, memory copies, one buffer, its own
 * callback thread (so rocprofiler's default thread, shared with other tools, is not held). */
static int configure(void) {
    TRY(rocprofiler_create_context(&ctx), AT_CREATE_CONTEXT);
    TRY(rocprofiler_create_buffer(ctx, BUFFER_BYTES, WATERMARK_BYTES, ROCPROFILER_BUFFER_POLICY_DISCARD,
                                  buffer_completed, NULL, &buf),
        AT_CREATE_BUFFER);
    TRY(rocprofiler_configure_buffer_tracing_service(ctx, ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, NULL, 0, buf),
        AT_KERNEL_DISPATCH);
    TRY(rocprofiler_iterate_buffer_tracing_kind_operations(ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API,
                                                           collect_launch_op, NULL),
        AT_HIP_API);
    if (n_launch_ops == 0) { /* tracing every HIP call would cost every call: refuse instead */
        report_error(ROCPROFILER_STATUS_ERROR_OPERATION_NOT_FOUND, AT_NO_LAUNCH_OPS);
        return -1;
    }
    TRY(rocprofiler_configure_buffer_tracing_service(ctx, ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API, launch_ops,
                                                     n_launch_ops, buf),
        AT_HIP_API);
    TRY(rocprofiler_configure_buffer_tracing_service(ctx, ROCPROFILER_BUFFER_TRACING_MEMORY_COPY, NULL, 0, buf),
        AT_MEMORY_COPY);
    rocprofiler_callback_thread_t thr;
    TRY(rocprofiler_create_callback_thread(&thr), AT_CALLBACK_THREAD);
    TRY(rocprofiler_assign_callback_thread(buf, thr), AT_CALLBACK_THREAD);
    TRY(rocprofiler_start_context(ctx), AT_START_CONTEXT);
    return 0;
}

/* Called by rocprofiler-sdk once every tool is configured. No HIP or HSA call is allowed here
 * (tool_library.md: it deadlocks); none is made. Returns 0: a failure is reported through an
 * ERROR record and the program runs on untraced. */
static int tool_init(rocprofiler_client_finalize_t fini_func, void *tool_data) {
    (void)fini_func;
    (void)tool_data;
    emit_clock();
    int ok = configure() == 0;
    write_hello();
    emit_clock();
    drain(); /* errors staged above */
    chunk_flush_guarded();
    if (!ok)
        return 0;
    pthread_atfork(NULL, NULL, after_fork_child);
    atomic_store(&active, 1);
    if (pthread_create(&flusher, NULL, flush_loop, NULL) != 0) {
        atomic_store(&active, 0);
        rocprofiler_stop_context(ctx);
    }
    return 0;
}

static rocprofiler_tool_configure_result_t configure_result = {sizeof(rocprofiler_tool_configure_result_t),
                                                               tool_init, tool_fini, NULL};

/* Found by rocprofiler-register (ROCP_TOOL_LIBRARIES) when the HIP/HSA runtime starts. Returns
 * NULL (take no part) without a FIFO to write to, as the CUPTI side runs on untraced. */
__attribute__((visibility("default"))) rocprofiler_tool_configure_result_t *
rocprofiler_configure(uint32_t version, const char *runtime_version_string, uint32_t priority,
                      rocprofiler_client_id_t *client_id) {
    (void)runtime_version_string;
    (void)priority;
    static int done;
    if (done++)
        return NULL;
    client_id->name = "aorta-tui rocprofiler collector";
    runtime_version = version;
    my_pid = (uint32_t)getpid();
    const char *path = getenv("AORTA_ROCPROF_FIFO");
    const char *ms = getenv("AORTA_ROCPROF_FLUSH_MS");
    if (ms && atoi(ms) >= 10 && atoi(ms) <= 10000)
        flush_ms = atoi(ms);
    if (!path)
        return NULL;
    /* O_NONBLOCK: the session opened the read end first; if it is gone this fails at once */
    out_fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (out_fd < 0)
        return NULL;
    return &configure_result;
}

#endif /* AORTA_LAYOUT_PROBE */
