// A launch-bound loop in plain CUDA C++ (no Python): N empty-kernel launches round-robin over K
// streams, for the exact-count check at >= 100k launches/s and the cost per launch. One JSON line.
//   nvcc -O2 -o launch_loop launch_loop.cu && ./launch_loop 400000 4 [SPIN_NS [SEGMENTS]]
// SEGMENTS > 1 also times the loop in that many equal parts ("segment_ns_per_launch"): a part
// the scheduler preempted then moves one sample, not the process's whole figure
// (benchmarks/dispatch_overhead.py takes the median part).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_kernel(int *p) {
    if (p && threadIdx.x == 1024) *p = 0;  // never true: keeps the kernel from being elided
}

using clk = std::chrono::steady_clock;

static double ns_between(clk::time_point a, clk::time_point b) {
    return std::chrono::duration<double, std::nano>(b - a).count();
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 400000;
    int k = argc > 2 ? atoi(argv[2]) : 4;
    long spin_ns = argc > 3 ? atol(argv[3]) : 0;  // busy wait between launches: caps the rate
    long segments = argc > 4 ? atol(argv[4]) : 1;
    if (n < 1 || k < 1) return 2;
    if (segments < 1 || segments > n) segments = 1;
    long seg_len = n / segments;
    std::vector<double> seg_ns;
    std::vector<cudaStream_t> s(k);
    for (auto &x : s) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s[i % k]>>>(nullptr);  // warm-up
    cudaDeviceSynchronize();
    auto t0 = clk::now();
    auto seg_t0 = t0;
    for (long i = 0; i < n; i++) {
        if (segments > 1 && i && i % seg_len == 0 && (long)seg_ns.size() < segments - 1) {
            auto now = clk::now();
            seg_ns.push_back(ns_between(seg_t0, now) / seg_len);
            seg_t0 = now;
        }
        auto next = clk::now() + std::chrono::nanoseconds(spin_ns);
        empty_kernel<<<1, 32, 0, s[i % k]>>>(nullptr);
        while (spin_ns && clk::now() < next) {
        }
    }
    auto t1 = clk::now();
    if (segments > 1) seg_ns.push_back(ns_between(seg_t0, t1) / (n - seg_len * (segments - 1)));
    cudaDeviceSynchronize();
    auto t2 = clk::now();
    double issue = ns_between(t0, t1);
    double wall = ns_between(t0, t2);
    printf("{\"streams\": {");
    for (int i = 0; i < k; i++)
        printf("%s\"0x%llx\": %ld", i ? ", " : "", (unsigned long long)(uintptr_t)s[i], n / k + (i < n % k));
    printf("}, \"segment_ns_per_launch\": [");
    for (size_t i = 0; i < seg_ns.size(); i++) printf("%s%.2f", i ? ", " : "", seg_ns[i]);
    printf("], \"measured_launches\": %ld, \"warmup_launches\": 1000, \"issue_ns\": %.0f, \"wall_ns\": %.0f, "
           "\"host_ns_per_launch\": %.2f, \"error\": \"%s\"}\n",
           n, issue, wall, issue / n, cudaGetErrorString(cudaGetLastError()));
    return 0;
}
