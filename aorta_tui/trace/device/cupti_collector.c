/*
 * aorta-tui's CUPTI activity collector: GPU start/end timestamps of every kernel, memcpy and
 * memset of a CUDA program, handed live to the trace session that started the program.
 *
 * Loaded by the CUDA driver itself through CUDA_INJECTION64_PATH (the route Nsight Systems,
 * HPCToolkit and Parca's parcagpu take), so any CUDA program is covered with no change to it.
 * The driver calls InitializeInjection() once, from cuInit().
 *
 * Design, and why:
 * - The default (AORTA_CUPTI_DOMAINS=0) has NO per-launch hook at all: with
 *   cuptiActivityEnableLatencyTimestamps(1) set before CUDA starts, every kernel's activity
 *   record carries `queued` (the launch written into the command buffer) and `submitted` (the
 *   buffer handed to the GPU) beside start/end, so launch -> start splits into push (queued ->
 *   submitted) and GPU queue (submitted -> start) from the records alone (issue 34). The stream
 *   handle of a CUPTI stream id comes from the resource callbacks (stream creation: a few calls
 *   per process), never from a launch.
 * - Activity buffers come from a pool that the flush thread allocates and touches (page faults
 *   taken there), handed to CUPTI by buffer_requested, which may run on the launching thread:
 *   it only pops a free list. An empty pool hands CUPTI no buffer; CUPTI counts the records it
 *   then drops, and the collector counts the refusals (dropped, never silently).
 * - With a launch callback (AORTA_CUPTI_DOMAINS=1/2/3: --launch-source collector, cross-check),
 *   the hot path is the launch callback, run on the application's thread inside every launch
 *   call. It takes one clock reading and claims one slot of a lock-free bounded ring (Vyukov's
 *   MPSC queue): no lock, no allocation, no system call. A full ring drops the record and
 *   counts it; it never blocks the application.
 * - All I/O happens on the collector's own flush thread, with SIGPIPE blocked there, so a
 *   trace session that goes away can never kill the traced program.
 * - CUPTI delivers activity buffers to bufferCompleted() (on a thread of its choosing); records
 *   are converted there into a staging area, bounded too, and written by the flush thread.
 * - Records leave through a FIFO named by AORTA_CUPTI_FIFO as fixed 64-byte records, in writes
 *   of at most PIPE_BUF bytes, so records of several processes never interleave mid-record.
 * - Activity timestamps are asked for on CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback),
 *   the clock of bpftrace's nsecs; the alignment is still *measured*: every flush writes a CLOCK
 *   record bracketing cuptiGetTimestamp() between two CLOCK_MONOTONIC readings.
 *
 * Build (aorta_tui/trace/device/build.py does it, cached per CUPTI version):
 *   cc -O2 -shared -fPIC -pthread -DAORTA_KERNEL_T=CUpti_ActivityKernelN ... \
 *      -I<cupti include> cupti_collector.c -L<cupti lib> -lcupti -Wl,-rpath,<cupti lib>
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>
#if AORTA_INCLUDE_META /* newer cupti.h includes it itself, and it has no include guard */
#include <generated_cuda_meta.h>
#endif

#ifndef AORTA_KERNEL_T
#error "define AORTA_KERNEL_T to the newest CUpti_ActivityKernelN of the CUPTI headers"
#endif
#ifndef AORTA_MEMCPY_T
#error "define AORTA_MEMCPY_T to the newest CUpti_ActivityMemcpyN of the CUPTI headers"
#endif
#ifndef AORTA_MEMSET_T
#error "define AORTA_MEMSET_T to the newest CUpti_ActivityMemsetN of the CUPTI headers"
#endif

/* ---- record format (mirrored by aorta_tui/trace/device/records.py) ---------------------- */
#define REC_MAGIC 0xA07Au
#define REC_VERSION 1
enum {
    REC_HELLO = 1,  /* f0 cupti version, f1 flush ms, f2 ring slots, f3 ts callback ok, f4 domains,
                       f5 multiple subscribers allowed, f6 latency timestamps (1, or a CUptiResult) */
    REC_CLOCK = 2,  /* f0 mono before, f1 cuptiGetTimestamp, f2 mono after */
    REC_LAUNCH = 3, /* f0 tid, f1 correlation id, f2 mono ns at callback, f3 stream, f4 cbid|domain<<32 */
    REC_KERNEL = 4, /* f0 correlation id, f1 start, f2 end, f3 device|context<<32, f4 stream id, f5 graph id */
    REC_MEMCPY = 5, /* as KERNEL, f5 bytes, f6 copy kind */
    REC_MEMSET = 6, /* as KERNEL, f5 bytes */
    REC_STATS = 7,  /* f0 launches seen, f1 dropped (ring), f2 dropped (pipe), f3 dropped (CUPTI),
                       f4 activity records, f5 buffers, f6 dropped (staging) */
    REC_ERROR = 8,  /* f0 CUptiResult, f1 where (enum below) */
    REC_BYE = 9,    /* as STATS, written by the exit handler */
    REC_KERNEL_LAT = 10, /* f0 correlation id|graph id<<32, f1 start, f2 end, f3 device|context<<32,
                            f4 stream id, f5 queued, f6 submitted (0: unknown) */
    REC_STREAM = 11,     /* f0 CUPTI stream id (UINT64_MAX: the lookup failed), f1 stream handle,
                            f2 context id, f3 CUptiResult of cuptiGetStreamIdEx */
    REC_POOL = 12,       /* f0 buffers refused (pool empty), f1 buffers in the pool, f2 buffer bytes,
                            f3 latency timestamps enabled (1) or the CUptiResult that refused them,
                            f4 activity kinds asked for: 1 kernel, 2 memcpy, 4 memset */
};
enum { AT_SUBSCRIBE = 1, AT_ENABLE_CB = 2, AT_ACTIVITY = 3, AT_REGISTER = 4, AT_FLUSH = 5, AT_FIFO = 6,
       AT_LATENCY = 7, AT_RESOURCE = 8, AT_STREAM_ID = 9 };

typedef struct {
    uint16_t magic;
    uint8_t version;
    uint8_t type;
    uint32_t pid;
    uint64_t f[7];
} aorta_rec;
_Static_assert(sizeof(aorta_rec) == 64, "records are 64 bytes");

/* ---- lock-free launch ring (bounded MPSC, Vyukov) ---------------------------------------- */
#define RING_SLOTS (1u << 17) /* 131072 launches: > 1 s at 100k launches/s between flushes */
/* One slot is one cache line: the launching thread writes 40 bytes of its own fields and the
 * sequence number, never a whole 64-byte record (the flush thread builds that), and a slot never
 * straddles two lines (a 72-byte slot of seq + record touched two lines per launch). */
typedef struct {
    _Atomic uint64_t seq;
    uint64_t ts;      /* CLOCK_MONOTONIC at the callback */
    uint64_t stream;  /* the launch's stream handle, from its parameters */
    uint32_t tid, corr, cbid, domain;
} __attribute__((aligned(64))) slot_t;
_Static_assert(sizeof(slot_t) == 64, "a launch slot is one cache line");

static slot_t *ring;
static _Atomic uint64_t ring_head;
static uint64_t ring_tail; /* consumer only */

/* Launches seen = slots claimed (ring_head) + launches the full ring dropped: no counter of its
 * own on the hot path (one contended atomic add per launch fewer, on every launching thread). */
static _Atomic uint64_t n_drop_ring, n_drop_pipe, n_drop_cupti, n_activity, n_buffers, n_drop_staging;

static int out_fd = -1;
static uint32_t my_pid;
static int flush_ms = 100;
static int ts_callback_ok;
/* Which launch callbacks to enable (AORTA_CUPTI_DOMAINS): bit 0 driver, bit 1 runtime. A kernel
 * carries the correlation id of the outermost API layer traced, so one layer is enough; the
 * driver layer (default) sees every launch, also those of programs that skip the runtime
 * (Triton, cuda-python). Runtime-only costs less per launch (docs/tracing.md) but misses those.
 * 0 enables none (activity records only: a cost measurement, no join possible). */
static unsigned domains = 1;
static CUpti_SubscriberHandle subscriber;
static pthread_t flusher;
static _Atomic int stopping;
static _Atomic int active;

static __thread uint32_t my_tid;

static inline uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifndef AORTA_HAS_TS_CALLBACK
#define AORTA_HAS_TS_CALLBACK 0
#endif
#if AORTA_HAS_TS_CALLBACK
static uint64_t CUPTIAPI monotonic_timestamp(void) { return mono_ns(); }
#endif

static inline void fill(aorta_rec *r, uint8_t type) {
    memset(r, 0, sizeof *r);
    r->magic = REC_MAGIC;
    r->version = REC_VERSION;
    r->type = type;
    r->pid = my_pid;
}

static inline uint64_t launches_seen(void) {
    return atomic_load_explicit(&ring_head, memory_order_relaxed) +
           atomic_load_explicit(&n_drop_ring, memory_order_relaxed);
}

/* The hot path: claim a slot, write the launch's fields, publish. */
static inline void ring_push(uint32_t tid, uint32_t corr, uint64_t ts, uint64_t stream, uint32_t cbid,
                             uint32_t domain) {
    uint64_t pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
    for (;;) {
        slot_t *s = &ring[pos & (RING_SLOTS - 1)];
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t dif = (int64_t)seq - (int64_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring_head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                s->ts = ts;
                s->stream = stream;
                s->tid = tid;
                s->corr = corr;
                s->cbid = cbid;
                s->domain = domain;
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return;
            }
        } else if (dif < 0) {
            atomic_fetch_add_explicit(&n_drop_ring, 1, memory_order_relaxed);
            return; /* full: count it, never wait */
        } else {
            pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
        }
    }
}

/* The flush thread: the next published launch as a whole LAUNCH record. */
static int ring_pop(aorta_rec *out) {
    slot_t *s = &ring[ring_tail & (RING_SLOTS - 1)];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if ((int64_t)seq - (int64_t)(ring_tail + 1) < 0)
        return 0;
    fill(out, REC_LAUNCH);
    out->f[0] = s->tid;
    out->f[1] = s->corr;
    out->f[2] = s->ts;
    out->f[3] = s->stream;
    out->f[4] = (uint64_t)s->cbid | ((uint64_t)s->domain << 32);
    atomic_store_explicit(&s->seq, ring_tail + RING_SLOTS, memory_order_release);
    ring_tail++;
    return 1;
}

/* ---- staging for activity records (filled on CUPTI's thread, written by ours) ------------ */
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

static void stage_locked(const aorta_rec *r) {
    pthread_mutex_lock(&staging_mu);
    stage(r);
    pthread_mutex_unlock(&staging_mu);
}

static void report_error(CUptiResult res, int where) {
    aorta_rec r;
    fill(&r, REC_ERROR);
    r.f[0] = (uint64_t)res;
    r.f[1] = (uint64_t)where;
    stage_locked(&r);
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
            /* the pipe is full: wait (on our own thread, never the program's) for the reader */
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

/* Writes from a thread other than the flush thread (start-up, the exit handler): SIGPIPE is
 * blocked around the write and a pending one is consumed, so it is never delivered. */
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
    uint64_t cupti_ts = 0;
    fill(&r, REC_CLOCK);
    r.f[0] = mono_ns();
    cuptiGetTimestamp(&cupti_ts);
    r.f[2] = mono_ns();
    r.f[1] = cupti_ts;
    emit(&r);
}

static void emit_stats(uint8_t type) {
    aorta_rec r;
    fill(&r, type);
    r.f[0] = launches_seen();
    r.f[1] = atomic_load(&n_drop_ring);
    r.f[2] = atomic_load(&n_drop_pipe);
    r.f[3] = atomic_load(&n_drop_cupti);
    r.f[4] = atomic_load(&n_activity);
    r.f[5] = atomic_load(&n_buffers);
    r.f[6] = atomic_load(&n_drop_staging);
    emit(&r);
}

/* ---- the activity buffer pool ---------------------------------------------------------------
 * CUPTI asks for a buffer on whatever thread needs one, often the launching thread, in the middle
 * of a launch. Allocating there costs that launch a page-faulting malloc (cupti-python's 64 MB
 * buffer delayed one launch by 33 ms on the H200): so buffer_requested only pops a free list
 * that the flush thread fills with buffers it allocated and touched itself. */
#define BUFFER_BYTES (4u << 20) /* ~20k kernel records */
#define POOL_TARGET 16          /* buffers kept ready: 64 MiB, > 1 s of records at 140k launches/s */
#define POOL_MAX 64
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool[POOL_MAX];
static int pool_len;
static _Atomic uint64_t n_pool_empty, n_pool_made;

static void pool_fill(int target) {
    for (;;) {
        pthread_mutex_lock(&pool_mu);
        int have = pool_len;
        pthread_mutex_unlock(&pool_mu);
        if (have >= target)
            return;
        uint8_t *b = aligned_alloc(8, BUFFER_BYTES);
        if (!b)
            return;
        memset(b, 0, BUFFER_BYTES); /* the page faults are taken here, on our thread */
        atomic_fetch_add_explicit(&n_pool_made, 1, memory_order_relaxed);
        pthread_mutex_lock(&pool_mu);
        if (pool_len < POOL_MAX)
            pool[pool_len++] = b, b = NULL;
        pthread_mutex_unlock(&pool_mu);
        free(b);
    }
}

/* Kernel records always; memcpy/memset records only where AORTA_CUPTI_KINDS asks for them, or
 * with latency timestamps off. Why: on the H200 (CUPTI 13.0, driver 580.159.04, 2026-12-04) a
 * training loop with latency timestamps AND memcpy or memset records deadlocked inside the driver
 * after 2-8 s (the program in cuMemsetD8Async waiting for a write lock, CUPTI's worker waiting
 * for the read side), with our flush thread or with CUPTI's periodic flush alike; with kernel
 * records only, or latency timestamps off, every run finished (scripts/gpu_collector_stall.sh,
 * benchmarks/results/collector-stall-2026-12-04-h200.log). The copies' launches still come from
 * the eBPF uprobes; only their device start/end are not recorded. */
static int want_memcpy = -1, want_memset = -1; /* -1: decided by the latency timestamps */
static int cupti_flushes; /* AORTA_CUPTI_FLUSH=cupti: CUPTI's worker flushes, never our thread */
static int multi_subscribers; /* 1 when CUPTI accepted allowMultipleSubscribers */
static int latency_state; /* 1 enabled, else the CUptiResult that refused it (or 0: not asked) */

static void emit_pool(void) {
    aorta_rec r;
    fill(&r, REC_POOL);
    r.f[0] = atomic_load(&n_pool_empty);
    pthread_mutex_lock(&pool_mu);
    r.f[1] = (uint64_t)pool_len;
    pthread_mutex_unlock(&pool_mu);
    r.f[2] = BUFFER_BYTES;
    r.f[3] = (uint64_t)(uint32_t)latency_state;
    r.f[4] = 1u | (want_memcpy > 0 ? 2u : 0u) | (want_memset > 0 ? 4u : 0u);
    emit(&r);
}

/* One pass of the flush thread: launches from the ring, then staged activity records. */
static void drain(void) {
    aorta_rec r;
    while (ring_pop(&r))
        emit(&r);
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

/* ---- CUPTI callbacks ----------------------------------------------------------------------- */
static uint64_t driver_stream(CUpti_CallbackId cbid, const void *params) {
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        return (uint64_t)(uintptr_t)((const cuLaunchKernel_params *)params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        return (uint64_t)(uintptr_t)((const cuLaunchKernel_ptsz_params *)params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
        const CUlaunchConfig *c = ((const cuLaunchKernelEx_params *)params)->config;
        return c ? (uint64_t)(uintptr_t)c->hStream : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const CUlaunchConfig *c = ((const cuLaunchKernelEx_ptsz_params *)params)->config;
        return c ? (uint64_t)(uintptr_t)c->hStream : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        return (uint64_t)(uintptr_t)((const cuLaunchCooperativeKernel_params *)params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return (uint64_t)(uintptr_t)((const cuLaunchCooperativeKernel_ptsz_params *)params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
        return (uint64_t)(uintptr_t)((const cuGraphLaunch_params *)params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
        return (uint64_t)(uintptr_t)((const cuGraphLaunch_ptsz_params *)params)->hStream;
    default:
        return 0;
    }
}

/* Stream creation (a few calls per process, never per launch): which handle a CUPTI stream id
 * is, so that figures are keyed by the handle the program, the eBPF probes and torch name. A new
 * context also maps its legacy default stream (handle 0). */
static void map_stream(CUcontext ctx, CUstream stream) {
    uint32_t id = 0, ctx_id = 0;
    CUptiResult res = cuptiGetStreamIdEx(ctx, stream, 0, &id);
    cuptiGetContextId(ctx, &ctx_id);
    aorta_rec r;
    fill(&r, REC_STREAM);
    /* a refused lookup is no error of the trace: that stream's figures keep the CUPTI id */
    r.f[0] = res == CUPTI_SUCCESS ? id : UINT64_MAX;
    r.f[1] = (uint64_t)(uintptr_t)stream;
    r.f[2] = ctx_id;
    r.f[3] = (uint64_t)res;
    stage_locked(&r);
}

static void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
    if (!atomic_load_explicit(&active, memory_order_relaxed) || !rd)
        return;
    if (cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED)
        map_stream(rd->context, rd->resourceHandle.stream);
    else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
        map_stream(rd->context, NULL);
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void *data) {
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        on_resource(cbid, (const CUpti_ResourceData *)data);
        return;
    }
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    /* CUPTI calls every enabled callback at API entry and at exit: the exit is one compare */
    if (cb->callbackSite != CUPTI_API_ENTER || !atomic_load_explicit(&active, memory_order_relaxed))
        return;
    uint64_t now = mono_ns(); /* first: the launch's time, as close to its entry as CUPTI lets us */
    if (my_tid == 0)
        my_tid = (uint32_t)syscall(SYS_gettid);
    ring_push(my_tid, cb->correlationId, now,
              domain == CUPTI_CB_DOMAIN_DRIVER_API ? driver_stream(cbid, cb->functionParams) : 0,
              (uint32_t)cbid, (uint32_t)domain);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&pool_mu);
    if (pool_len > 0)
        b = pool[--pool_len];
    pthread_mutex_unlock(&pool_mu);
    if (!b) /* never allocate here: CUPTI drops and counts what it cannot store */
        atomic_fetch_add_explicit(&n_pool_empty, 1, memory_order_relaxed);
    *buffer = b;
    *size = b ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void pool_return(uint8_t *b) {
    pthread_mutex_lock(&pool_mu);
    if (pool_len < POOL_MAX)
        pool[pool_len++] = b, b = NULL;
    pthread_mutex_unlock(&pool_mu);
    free(b); /* not on a launching thread: CUPTI completes buffers on its own or the flush thread */
}

/* The fields kernel, memcpy and memset records share (their struct types differ). */
#define DEVICE_RECORD(r, type, x)                                                                 \
    do {                                                                                          \
        fill(&(r), (type));                                                                       \
        (r).f[0] = (x)->correlationId;                                                            \
        (r).f[1] = (x)->start;                                                                    \
        (r).f[2] = (x)->end;                                                                      \
        (r).f[3] = (uint64_t)(x)->deviceId | ((uint64_t)(x)->contextId << 32);                    \
        (r).f[4] = (x)->streamId;                                                                 \
    } while (0)

static void activity_to_record(const CUpti_Activity *a) {
    aorta_rec r;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const AORTA_KERNEL_T *k = (const AORTA_KERNEL_T *)a;
        /* queued/submitted in f5/f6: the correlation id (32 bits) shares f0 with the graph id */
        DEVICE_RECORD(r, REC_KERNEL_LAT, k);
        r.f[0] = (uint64_t)k->correlationId | ((uint64_t)k->graphId << 32);
        r.f[5] = k->queued;
        r.f[6] = k->submitted;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const AORTA_MEMCPY_T *m = (const AORTA_MEMCPY_T *)a;
        DEVICE_RECORD(r, REC_MEMCPY, m);
        r.f[5] = m->bytes;
        r.f[6] = m->copyKind;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const AORTA_MEMSET_T *m = (const AORTA_MEMSET_T *)a;
        DEVICE_RECORD(r, REC_MEMSET, m);
        r.f[5] = m->bytes;
        break;
    }
    default:
        return;
    }
    atomic_fetch_add_explicit(&n_activity, 1, memory_order_relaxed);
    stage(&r);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid) {
    CUpti_Activity *a = NULL;
    atomic_fetch_add_explicit(&n_buffers, 1, memory_order_relaxed);
    pthread_mutex_lock(&staging_mu);
    while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS)
        activity_to_record(a);
    pthread_mutex_unlock(&staging_mu);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped)
        atomic_fetch_add_explicit(&n_drop_cupti, dropped, memory_order_relaxed);
    (void)size;
    pool_return(buffer);
}

/* ---- the flush thread and the exit handler ------------------------------------------------- */
static void *flush_loop(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE); /* a vanished reader gives EPIPE here, never a signal to the program */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct timespec period = {flush_ms / 1000, (long)(flush_ms % 1000) * 1000000L};
    while (!atomic_load(&stopping)) {
        nanosleep(&period, NULL);
        if (!cupti_flushes) {
            CUptiResult res = cuptiActivityFlushAll(0);
            if (res != CUPTI_SUCCESS)
                report_error(res, AT_FLUSH);
        }
        pool_fill(POOL_TARGET); /* returned buffers come back; new ones are made here only */
        drain();
        emit_clock();
        emit_pool();
        emit_stats(REC_STATS);
        chunk_flush();
    }
    return NULL;
}

/* The last records: stop the flush thread, force out what CUPTI holds, write BYE. Returns 0
 * when the collector was not active (already finished, or never started). */
static int finish(void) {
    if (!atomic_exchange(&active, 0))
        return 0;
    atomic_store(&stopping, 1);
    pthread_join(flusher, NULL);
    /* forced: deliver buffers with records still incomplete too; this is the last chance */
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    drain();
    emit_clock();
    emit_pool();
    emit_stats(REC_BYE);
    chunk_flush_guarded();
    return 1;
}

static void at_exit(void) { (void)finish(); }

/* Called (through ctypes) by a trace session in the traced process itself when its trace ends
 * (`queue run --ebpf-trace`): write the last records, then give CUPTI back, since CUPTI allows
 * one subscriber per process and the program's own profiler (torch.profiler in the queue
 * harness's detail pass) subscribes after us. Returns 1 when it detached, 0 when the collector
 * was not active, negative when CUPTI refused a step (the CUptiResult, negated). */
__attribute__((visibility("default"))) int aorta_cupti_detach(void) {
    if (!finish())
        return 0;
    static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                               CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
    int rc = 1;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        CUptiResult res = cuptiActivityDisable(kinds[i]);
        if (res != CUPTI_SUCCESS)
            rc = -(int)res;
    }
    CUptiResult res = cuptiUnsubscribe(subscriber);
    if (res != CUPTI_SUCCESS)
        rc = -(int)res;
    return rc;
}

static void after_fork_child(void) {
    /* the flush thread does not exist in a forked child, and CUDA is unusable there */
    atomic_store(&active, 0);
    if (out_fd >= 0) {
        close(out_fd);
        out_fd = -1;
    }
}

static int enable_ids(CUpti_CallbackDomain domain, const CUpti_CallbackId *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        CUptiResult res = cuptiEnableCallback(1, subscriber, domain, ids[i]);
        if (res != CUPTI_SUCCESS) {
            report_error(res, AT_ENABLE_CB);
            return -1;
        }
    }
    return 0;
}

static int enable_launch_callbacks(void) {
    static const CUpti_CallbackId driver_ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,            CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    };
    static const CUpti_CallbackId runtime_ids[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    };
    static const CUpti_CallbackId resource_ids[] = {CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                                                    CUPTI_CBID_RESOURCE_STREAM_CREATED};
    if (enable_ids(CUPTI_CB_DOMAIN_RESOURCE, resource_ids, sizeof resource_ids / sizeof *resource_ids))
        return -1;
    if ((domains & 1u) && enable_ids(CUPTI_CB_DOMAIN_DRIVER_API, driver_ids, sizeof driver_ids / sizeof *driver_ids))
        return -1;
    if ((domains & 2u) && enable_ids(CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids, sizeof runtime_ids / sizeof *runtime_ids))
        return -1;
    return 0;
}

static void write_hello(uint32_t version) {
    aorta_rec r;
    fill(&r, REC_HELLO);
    r.f[0] = version;
    r.f[1] = (uint64_t)flush_ms;
    r.f[2] = RING_SLOTS;
    r.f[3] = (uint64_t)ts_callback_ok;
    r.f[4] = domains;
    r.f[5] = (uint64_t)multi_subscribers;
    r.f[6] = (uint64_t)(uint32_t)latency_state;
    emit(&r);
}

/* One subscriber per process, unless CUPTI 13.3+ and an r610+ driver allow several
 * (allowMultipleSubscribers): then a program's own torch.profiler keeps working under the trace.
 * Where the request is refused (older driver) the plain call decides, and a second subscriber
 * meets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, which the session says clearly. */

static CUptiResult subscribe(uint32_t version) {
#if AORTA_HAS_SUBSCRIBE_V2
    if (version >= 130300) {
        CUpti_SubscriberParams p;
        memset(&p, 0, sizeof p);
        p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        p.allowMultipleSubscribers = 1;
        if (cuptiSubscribe_v2(&subscriber, (CUpti_CallbackFunc)on_api, NULL, &p) == CUPTI_SUCCESS) {
            multi_subscribers = 1;
            return CUPTI_SUCCESS;
        }
    }
#else
    (void)version;
#endif
    return cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_api, NULL);
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH). Returns 1 on success, as the driver expects;
 * on any failure the program runs on untraced and the session is told why (an ERROR record). */
__attribute__((visibility("default"))) int InitializeInjection(void) {
    static int done;
    if (done++)
        return 1;
    my_pid = (uint32_t)getpid();
    const char *path = getenv("AORTA_CUPTI_FIFO");
    const char *ms = getenv("AORTA_CUPTI_FLUSH_MS");
    const char *dom = getenv("AORTA_CUPTI_DOMAINS");
    if (ms && atoi(ms) >= 10 && atoi(ms) <= 10000)
        flush_ms = atoi(ms);
    /* 0: no launch callback at all, activity records only (benchmarks/dispatch_overhead.py's
     * "collector-activity": what CUPTI's activity tracing alone costs per launch) */
    if (dom && dom[0] >= '0' && dom[0] <= '3' && dom[1] == '\0')
        domains = (unsigned)(dom[0] - '0');
    /* AORTA_CUPTI_KINDS=kernel or kernel,memcpy: which of the memcpy/memset records to ask for
     * beside the kernels (a cost probe, and the bisect of scripts/gpu_collector_stall.sh) */
    const char *kinds_env = getenv("AORTA_CUPTI_KINDS");
    if (kinds_env) {
        want_memcpy = strstr(kinds_env, "memcpy") != NULL;
        want_memset = strstr(kinds_env, "memset") != NULL;
    }
    const char *flush_env = getenv("AORTA_CUPTI_FLUSH");
    cupti_flushes = flush_env && strcmp(flush_env, "cupti") == 0;
    if (!path)
        return 1;
    /* O_NONBLOCK: the session opened the read end first; if it is gone this fails at once */
    out_fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (out_fd < 0)
        return 1;
    /* the first buffers, before any kernel (the driver's cuInit: no launch waits on this) */
    pool_fill(POOL_TARGET / 2);
    ring = aligned_alloc(64, sizeof(slot_t) * RING_SLOTS);
    if (!ring) {
        close(out_fd);
        out_fd = -1;
        return 1;
    }
    memset(ring, 0, sizeof(slot_t) * RING_SLOTS);
    for (uint64_t i = 0; i < RING_SLOTS; i++)
        atomic_init(&ring[i].seq, i);
    uint32_t version = 0;
    cuptiGetVersion(&version);
#if AORTA_HAS_TS_CALLBACK
    ts_callback_ok = cuptiActivityRegisterTimestampCallback(monotonic_timestamp) == CUPTI_SUCCESS;
#endif
    CUptiResult res = subscribe(version);
    if (res == CUPTI_SUCCESS) {
        /* before any activity is enabled, and before the first kernel: queued/submitted in every
         * kernel record. A CUPTI without it still traces; the parts it cannot give are said. */
#if AORTA_HAS_LATENCY_TS
        /* AORTA_CUPTI_LATENCY=0 leaves them off (benchmarks/trace_perturbation.py: their cost) */
        const char *lat_env = getenv("AORTA_CUPTI_LATENCY");
        CUptiResult lat = (lat_env && lat_env[0] == '0') ? CUPTI_ERROR_NOT_SUPPORTED
                                                         : cuptiActivityEnableLatencyTimestamps(1);
        latency_state = lat == CUPTI_SUCCESS ? 1 : (int)lat; /* in HELLO and POOL: no error record,
                                                                the start times still come */
#else
        latency_state = 22; /* CUPTI_ERROR_NOT_SUPPORTED: the headers have no such call */
#endif
    }
    if (res != CUPTI_SUCCESS) {
        /* e.g. CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another tool got there first */
        report_error(res, AT_SUBSCRIBE);
    } else if (enable_launch_callbacks() == 0) {
        res = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (want_memcpy < 0) /* not asked: only where latency timestamps are off (the deadlock above) */
            want_memcpy = want_memset = latency_state != 1;
        if (res != CUPTI_SUCCESS)
            report_error(res, AT_REGISTER);
        else if ((res = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS ||
                 (want_memcpy && (res = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY)) != CUPTI_SUCCESS) ||
                 (want_memset && (res = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET)) != CUPTI_SUCCESS))
            report_error(res, AT_ACTIVITY);
        else
            atomic_store(&active, 1);
#if AORTA_HAS_FLUSH_PERIOD
        if (cupti_flushes && atomic_load(&active) && (res = cuptiActivityFlushPeriod((uint32_t)flush_ms)) != CUPTI_SUCCESS)
            report_error(res, AT_FLUSH);
#else
        cupti_flushes = 0; /* a CUPTI without the call: the collector's thread flushes */
#endif
    }
    write_hello(version);
    emit_clock();
    drain(); /* errors staged above */
    chunk_flush_guarded();
    if (!atomic_load(&active))
        return 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    if (pthread_create(&flusher, NULL, flush_loop, NULL) != 0) {
        atomic_store(&active, 0);
        return 1;
    }
    atexit(at_exit);
    return 1;
}
