/* A stand-in for libcuda.so.1 exporting driver API entry points with their real signatures.
 * Kernel launches sleep for as many microseconds as the CUfunction handle's value, so a
 * test knows the exact call duration it should measure. */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int CUresult;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    void *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

static void spin_us(uintptr_t us) {
    /* sleep rather than spin: a sleeping call does not compete for a CPU on a busy machine */
    struct timespec d = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&d, &d) != 0) {
    }
}

static CUdeviceptr next_ptr = 0x7e0000000000ULL;

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sharedMemBytes;
    (void)hStream; (void)kernelParams; (void)extra;
    spin_us((uintptr_t)f);
    return 0;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra) {
    (void)config; (void)kernelParams; (void)extra;
    spin_us((uintptr_t)f);
    return 0;
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream hStream) {
    (void)hStream;
    spin_us((uintptr_t)g);
    return 0;
}

CUresult cuStreamSynchronize(CUstream hStream) { (void)hStream; spin_us(50); return 0; }

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    (void)dst; (void)src; (void)n; (void)s;
    return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    (void)bytesize;
    *dptr = next_ptr;
    next_ptr += 0x100000;
    return 0;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { (void)dptr; return 0; }

CUresult cuDriverGetVersion(int *driverVersion) {
    *driverVersion = 13000;
    return 0;
}
