// A GEMV kernel's speed from cache, on one thread: what the kernel can do when memory is not what
// holds it (decode's products need about half the memory's speed from each of two threads). ROWS x
// 2048 weights of TYPE (default 256 rows: within L2), the product taken again and again; the best of
// 200 rounds of 20, in GB/s of weights read.
//   gemv-cache-bench [TYPE=q4_K|q6_K|q8_0] [ROWS=256]
#include "kernels/avx512_gemv.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

int main(int argc, char ** argv) {
    const char * type_name = argc > 1 ? argv[1] : "q4_K";
    ggml_type    type      = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * name = ggml_type_name(ggml_type(t));
        if (name && std::strcmp(name, type_name) == 0) {
            type = ggml_type(t);
        }
    }
    const int64_t K = 2048, M = argc > 2 ? std::atoll(argv[2]) : 256;
    if (type == GGML_TYPE_COUNT || M <= 0 || !transcribe::avx512_gemv_handles(type, K)) {
        std::fprintf(stderr, "gemv-cache-bench: no GEMV of ours for type '%s' on this CPU\n", type_name);
        return 2;
    }
    ggml_cpu_init();
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> wf(static_cast<size_t>(K * M)), x(static_cast<size_t>(K)), y(static_cast<size_t>(M));
    for (float & v : wf) {
        v = normal(rng);
    }
    for (float & v : x) {
        v = normal(rng);
    }
    const size_t row_bytes = ggml_row_size(type, K);
    std::vector<uint8_t> w(row_bytes * size_t(M));
    ggml_quantize_chunk(type, wf.data(), w.data(), 0, M, K, nullptr);
    transcribe::Avx512GemvArgs a;
    a.type        = type;
    a.w           = w.data();
    a.w_row_bytes = row_bytes;
    a.x           = x.data();
    a.y           = y.data();
    a.K           = K;
    a.M           = M;
    double best = 1e30;
    for (int round = 0; round < 200; ++round) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 20; ++i) {
            transcribe::avx512_gemv(a, 0, 1);
        }
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 20);
    }
    std::printf("%s, %lld x %lld (%.0f KiB), 1 thread: %.1f GB/s of weights, %.1f GFLOP/s\n", type_name, (long long) M,
                (long long) K, double(w.size()) / 1024, double(w.size()) / best / 1e9, 2.0 * double(K * M) / best / 1e9);
    return 0;
}
