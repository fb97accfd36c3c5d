/* Drives a fake (or real) GPU runtime: N launches round-robin over K streams.
 * usage: driver cuda|cudaex|graph|hip|realhip|hsa|alloc|ioctl LIB N DELAY_US STREAM1 [STREAM2...]
 * Each launch passes DELAY_US (times the stream's position + 1) as the function handle, which
 * the fake library sleeps for. Prints "done N" at the end. With DRIVER_TIMES=path set, writes
 * "stream_index start_ns duration_ns" per call (CLOCK_MONOTONIC, measured around the call), the
 * ground truth a test compares the tracer with. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

typedef struct { uint32_t x, y, z; } dim3;
typedef struct {
    unsigned int gx, gy, gz, bx, by, bz, shm;
    void *hStream;
    void *attrs;
    unsigned int numAttrs;
} LaunchConfig;
typedef int (*cu_launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
typedef int (*cu_launch_ex_t)(const LaunchConfig *, void *, void **, void **);
typedef int (*cu_graph_t)(void *, void *);
typedef int (*hip_launch_t)(const void *, dim3, dim3, void **, size_t, void *);
typedef int (*alloc_t)(unsigned long long *, size_t);
typedef int (*free_t)(unsigned long long);
typedef void (*hsa_store_t)(uint64_t, int64_t);

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage\n"); return 2; }
    const char *mode = argv[1];
    long n = atol(argv[3]);
    long delay = atol(argv[4]);
    int k = argc - 5;
    void *streams[64];
    for (int i = 0; i < k && i < 64; i++) streams[i] = (void *)(uintptr_t)strtoull(argv[5 + i], NULL, 0);
    if (strcmp(mode, "ioctl") == 0) {
        int fds[2];
        if (pipe(fds) != 0) return 1;
        int avail = 0;
        for (long i = 0; i < n; i++) ioctl(fds[0], FIONREAD, &avail);
        printf("done %ld\n", n);
        return 0;
    }
    FILE *times = getenv("DRIVER_TIMES") ? fopen(getenv("DRIVER_TIMES"), "w") : NULL;
    void *h = dlopen(argv[2], RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    for (long i = 0; i < n; i++) {
        int s = (int)(i % k);
        void *f = (void *)(uintptr_t)(delay * (s + 1));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (strcmp(mode, "cuda") == 0) {
            ((cu_launch_t)dlsym(h, "cuLaunchKernel"))(f, 1, 1, 1, 32, 1, 1, 0, streams[s], NULL, NULL);
        } else if (strcmp(mode, "cudaex") == 0) {
            LaunchConfig c = {1, 1, 1, 32, 1, 1, 0, streams[s], NULL, 0};
            ((cu_launch_ex_t)dlsym(h, "cuLaunchKernelEx"))(&c, f, NULL, NULL);
        } else if (strcmp(mode, "graph") == 0) {
            ((cu_graph_t)dlsym(h, "cuGraphLaunch"))(f, streams[s]);
        } else if (strcmp(mode, "hip") == 0 || strcmp(mode, "realhip") == 0) {
            dim3 g = {1, 1, 1}, b = {64, 1, 1};
            void *fn = strcmp(mode, "hip") == 0 ? f : (void *)&main;
            ((hip_launch_t)dlsym(h, "hipLaunchKernel"))(fn, g, b, NULL, 0, streams[s]);
        } else if (strcmp(mode, "hsa") == 0) {
            ((hsa_store_t)dlsym(h, "hsa_signal_store_screlease"))((uint64_t)(uintptr_t)streams[s], i);
        } else if (strcmp(mode, "alloc") == 0) {
            unsigned long long p = 0;
            ((alloc_t)dlsym(h, "cuMemAlloc_v2"))(&p, (size_t)(delay * (s + 1)));
            ((free_t)dlsym(h, "cuMemFree_v2"))(p);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (times)
            fprintf(times, "%d %lld %lld\n", s, (long long)t0.tv_sec * 1000000000LL + t0.tv_nsec,
                    (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    }
    if (times) fclose(times);
    printf("done %ld\n", n);
    return 0;
}
