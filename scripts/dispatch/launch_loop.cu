// A launch-bound loop in plain CUDA C++ (no Python): N empty-kernel launches round-robin over K
// streams, for the exact-count check at >= 100k launches/s. Prints one JSON line.
//   nvcc -O2 -o launch_loop launch_loop.cu && ./launch_loop 400000 4 [SPIN_NS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_kernel(int *p) {
    if (p && threadIdx.x == 1024) *p = 0;  // never true: keeps the kernel from being elided
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 400000;
    int k = argc > 2 ? atoi(argv[2]) : 4;
    long spin_ns = argc > 3 ? atol(argv[3]) : 0;  // busy wait between launches: caps the rate
    std::vector<cudaStream_t> s(k);
    for (auto &x : s) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s[i % k]>>>(nullptr);  // warm-up
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; i++) {
        auto next = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
        empty_kernel<<<1, 32, 0, s[i % k]>>>(nullptr);
        while (spin_ns && std::chrono::steady_clock::now() < next) {
        }
    }
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    auto t2 = std::chrono::steady_clock::now();
    double issue = std::chrono::duration<double, std::nano>(t1 - t0).count();
    double wall = std::chrono::duration<double, std::nano>(t2 - t0).count();
    printf("{\"streams\": {");
    for (int i = 0; i < k; i++)
        printf("%s\"0x%llx\": %ld", i ? ", " : "", (unsigned long long)(uintptr_t)s[i], n / k + (i < n % k));
    printf("}, \"measured_launches\": %ld, \"warmup_launches\": 1000, \"issue_ns\": %.0f, \"wall_ns\": %.0f, "
           "\"host_ns_per_launch\": %.2f, \"error\": \"%s\"}\n",
           n, issue, wall, issue / n, cudaGetErrorString(cudaGetLastError()));
    return 0;
}
