/* A stand-in for libamdhip64 with the real hipLaunchKernel signature: dim3 is passed by value
 * (12 bytes, two registers), so the stream is the second stack slot at entry. */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct { uint32_t x, y, z; } dim3;
typedef void *hipStream_t;
typedef int hipError_t;

static void spin_us(uintptr_t us) {
    /* sleep rather than spin: a sleeping call does not compete for a CPU on a busy machine */
    struct timespec d = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&d, &d) != 0) {
    }
}

hipError_t hipLaunchKernel(const void *function_address, dim3 numBlocks, dim3 dimBlocks,
                           void **args, size_t sharedMemBytes, hipStream_t stream) {
    (void)numBlocks; (void)dimBlocks; (void)args; (void)sharedMemBytes; (void)stream;
    spin_us((uintptr_t)function_address);
    return 0;
}

/* HSA runtime entry point the hsa probe set counts (a doorbell store): signal by value. */
typedef struct { uint64_t handle; } hsa_signal_t;
typedef int64_t hsa_signal_value_t;

void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
    (void)signal; (void)value;
}
