// The CPU's dot-product instruction peak, for reading the GEMM kernels' rates against: THREADS threads
// each issue int8 VPDPBUSD (the Q8_0/Q4_K/Q6_K kernels' product) or BF16 VDPBF16PS (the BF16 kernel's)
// on 16 independent 512-bit accumulators, nothing else, and the rate is counted as the kernels count
// theirs (2 operations a multiply-add).
//   usage: dot-product-peak [THREADS=2] [MILLIONS_OF_ITERATIONS=200]
#include "kernels/x86_simd.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int ACCUMULATORS = 16; // more than an instruction's latency times its issue rate

// Accumulators start apart (SEED) so that the compiler cannot fold them into one.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int int8_loop(long iterations, int seed) {
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
    __m512i acc[ACCUMULATORS];
    for (int i = 0; i < ACCUMULATORS; ++i) {
        acc[i] = _mm512_set1_epi32(seed + i);
    }
    for (long n = 0; n < iterations; ++n) {
#pragma GCC unroll 16
        for (int i = 0; i < ACCUMULATORS; ++i) {
            acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
        }
    }
    __m512i sum = acc[0];
    for (int i = 1; i < ACCUMULATORS; ++i) {
        sum = _mm512_add_epi32(sum, acc[i]);
    }
    return _mm512_reduce_add_epi32(sum);
}

__attribute__((target("avx512f,avx512bf16"))) float bf16_loop(long iterations, int seed) {
    const __m512bh a = (__m512bh) _mm512_set1_epi16(0x3f80), b = a;
    __m512 acc[ACCUMULATORS];
    for (int i = 0; i < ACCUMULATORS; ++i) {
        acc[i] = _mm512_set1_ps(float(seed + i));
    }
    for (long n = 0; n < iterations; ++n) {
#pragma GCC unroll 16
        for (int i = 0; i < ACCUMULATORS; ++i) {
            acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
        }
    }
    __m512 sum = acc[0];
    for (int i = 1; i < ACCUMULATORS; ++i) {
        sum = _mm512_add_ps(sum, acc[i]);
    }
    return _mm512_reduce_add_ps(sum);
}

template <class Loop> double rate(int threads, long iterations, double ops_per_instruction, Loop loop) {
    std::vector<std::thread> pool;
    std::vector<double>      sink(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] { sink[size_t(t)] = double(loop(iterations, t)); });
    }
    for (auto & th : pool) {
        th.join();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return double(threads) * double(iterations) * ACCUMULATORS * ops_per_instruction / s / 1e9;
}

} // namespace

int main(int argc, char ** argv) {
    const int  threads    = argc > 1 ? std::atoi(argv[1]) : 2;
    const long iterations = (argc > 2 ? std::atol(argv[2]) : 200) * 1000000L;
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bf16")) {
        std::fprintf(stderr, "dot-product-peak: this CPU lacks AVX-512 VNNI or BF16\n");
        return 1;
    }
    // VPDPBUSD: 16 lanes x 4 int8 multiply-adds; VDPBF16PS: 16 lanes x 2 BF16 multiply-adds.
    std::printf("int8 VPDPBUSD  %8.1f GOP/s on %d threads\n", rate(threads, iterations, 128, int8_loop), threads);
    std::printf("BF16 VDPBF16PS %8.1f GFLOP/s on %d threads\n", rate(threads, iterations, 64, bf16_loop), threads);
    return 0;
}
