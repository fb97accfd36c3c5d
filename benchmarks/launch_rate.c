/* A paced launch generator for the trace pipeline benchmark (benchmarks/trace_pipeline.py):
 * THREADS threads call cuLaunchKernel of LIB (the tests' fake libcuda, tests/trace/fakelib)
 * N times in all, on a fixed schedule of RATE launches/s in total (launch i of a thread is due at
 * t0 + i * THREADS / RATE; a thread behind schedule launches at once, so RATE 0 = as fast as it
 * can). Stream handles 0x10, 0x20, ... per thread. Prints one JSON line: launches, the loop's
 * wall time, the achieved rate and how far behind schedule the worst thread ended.
 *   gcc -O2 -pthread -o launch_rate launch_rate.c -ldl && ./launch_rate LIB N THREADS RATE
 * Built with -DFAKE_LIBCUDA -O0 -shared -fPIC, the same file is the library: a cuLaunchKernel
 * that returns at once (the tests' fake sleeps, and nanosleep(0) alone costs ~50 us), compiled
 * so that it starts with `push %rbp` as the real libcuda's entry points do (the cheap,
 * emulated uprobe path; docs/tracing.md). */
#ifdef FAKE_LIBCUDA
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shm, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm;
    (void)stream; (void)params; (void)extra;
    return 0;
}
int cuDriverGetVersion(int *v) {
    if (v) *v = 13000;
    return 0;
}
#else
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*cu_launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
static cu_launch_t launch;
static long per_thread;
static double period_ns; /* per thread */
static uint64_t t0;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct { int index; uint64_t end_ns, behind_ns; } job_t;

static void *run(void *arg) {
    job_t *j = arg;
    void *stream = (void *)(uintptr_t)(0x10 * (j->index + 1));
    for (long i = 0; i < per_thread; i++) {
        if (period_ns > 0) {
            uint64_t due = t0 + (uint64_t)(i * period_ns);
            while (now_ns() < due) {
            }
        }
        launch(NULL, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
    }
    j->end_ns = now_ns();
    uint64_t due_end = t0 + (uint64_t)(per_thread * period_ns);
    j->behind_ns = j->end_ns > due_end ? j->end_ns - due_end : 0;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: launch_rate LIB N THREADS RATE\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    launch = (cu_launch_t)dlsym(h, "cuLaunchKernel");
    if (!launch) { fprintf(stderr, "no cuLaunchKernel in %s\n", argv[1]); return 1; }
    long n = atol(argv[2]);
    int k = atoi(argv[3]);
    double rate = atof(argv[4]);
    if (n < 1 || k < 1 || k > 64 || rate < 0) return 2;
    per_thread = n / k;
    period_ns = rate > 0 ? 1e9 * k / rate : 0;
    pthread_t th[64];
    job_t jobs[64];
    t0 = now_ns() + 1000000; /* 1 ms to start every thread */
    for (int i = 0; i < k; i++) {
        jobs[i].index = i;
        pthread_create(&th[i], NULL, run, &jobs[i]);
    }
    uint64_t end = 0, behind = 0;
    for (int i = 0; i < k; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].end_ns > end) end = jobs[i].end_ns;
        if (jobs[i].behind_ns > behind) behind = jobs[i].behind_ns;
    }
    double wall = (double)(end - t0);
    printf("{\"launches\": %ld, \"threads\": %d, \"asked_rate\": %.0f, \"loop_ns\": %.0f, "
           "\"rate\": %.0f, \"behind_ns\": %llu}\n",
           per_thread * k, k, rate, wall, per_thread * k / (wall / 1e9), (unsigned long long)behind);
    return 0;
}
#endif
