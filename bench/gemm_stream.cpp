// The LM's products as they run in the model: LAYERS layers of Qwen3-1.7B's weight shapes (q, k, v,
// o, gate, up, down; 8 layers are 800 MB at BF16, more than any cache) against COLUMNS activation
// columns (152: jfk's prefill; 1: a decode step), all in one graph, so that every weight streams in
// from memory. Ours (ops::matmul's choice: our GEMM, our GEMV, or ggml's where we have none) and
// ggml's mul_mat run alternately in this one process, on the same weights and threads; it prints both
// and the ratio.
// With LAYOUT "panels", ours reads a copy of the weights stored in the panel layout, as the loader
// stores Q8_0 matmul weights (ggml keeps the file's).
//   gemm-stream-bench [TYPE=bf16|q8_0|q4_K|q6_K|f32] [THREADS=2] [ROUNDS=5] [COLUMNS=152] [LAYERS=8] [LAYOUT=file|panels]
#include "ops/matmul.h"
#include "kernels/avx512_gemm.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

int main(int argc, char ** argv) {
    const char * type_name = argc > 1 ? argv[1] : "bf16";
    const int    threads   = argc > 2 ? std::atoi(argv[2]) : 2;
    const int    rounds    = argc > 3 ? std::atoi(argv[3]) : 5;
    ggml_type    type      = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * name = ggml_type_name(ggml_type(t));
        if (name && std::strcmp(name, type_name) == 0) {
            type = ggml_type(t);
        }
    }
    if (type == GGML_TYPE_COUNT || !transcribe::avx512_gemm_handles(type)) {
        std::fprintf(stderr, "gemm-stream-bench: no kernel of ours for type '%s' on this CPU\n", type_name);
        return 2;
    }
    const int64_t N = argc > 4 ? std::atoi(argv[4]) : 152, layers = argc > 5 ? std::atoi(argv[5]) : 8;
    const bool panels = argc > 6 && std::strcmp(argv[6], "panels") == 0;
    const int64_t shapes[][2] = {{2048, 2048}, {2048, 1024}, {2048, 1024}, {2048, 2048}, {2048, 6144}, {2048, 6144}, {6144, 2048}};

    ggml_init_params wp = {ggml_tensor_overhead() * 256, nullptr, true};
    ggml_context * wctx = ggml_init(wp);
    std::vector<ggml_tensor *> weights, ours_weights;
    for (int64_t l = 0; l < layers; ++l) {
        for (const auto & s : shapes) {
            weights.push_back(ggml_new_tensor_2d(wctx, type, s[0], s[1]));
            ours_weights.push_back(panels ? ggml_new_tensor_2d(wctx, type, s[0], s[1]) : weights.back());
        }
    }
    ggml_tensor * x_narrow = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 2048, N);
    ggml_tensor * x_wide   = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 6144, N);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, threads);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, cpu);
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    // Random weights of the type, by ggml's own quantization of random rows.
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> row(6144);
    std::vector<uint8_t> packed;
    for (ggml_tensor * w : weights) {
        packed.resize(ggml_nbytes(w));
        for (int64_t r = 0; r < w->ne[1]; ++r) {
            for (int64_t i = 0; i < w->ne[0]; ++i) {
                row[size_t(i)] = normal(rng) * 0.02f;
            }
            ggml_quantize_chunk(type, row.data(), packed.data() + size_t(r) * w->nb[1], 0, 1, w->ne[0], nullptr);
        }
        ggml_backend_tensor_set(w, packed.data(), 0, packed.size());
    }
    for (size_t i = 0; panels && i < weights.size(); ++i) {
        if (!transcribe::panel_layout_takes(ours_weights[i])) {
            std::fprintf(stderr, "gemm-stream-bench: no panel layout for %s on this CPU\n", type_name);
            return 2;
        }
        ggml_backend_tensor_copy(weights[i], ours_weights[i]);
        transcribe::to_panel_layout(ours_weights[i], threads);
    }
    for (ggml_tensor * x : {x_narrow, x_wide}) {
        std::vector<float> v(size_t(ggml_nelements(x)));
        for (float & f : v) {
            f = normal(rng);
        }
        ggml_backend_tensor_set(x, v.data(), 0, v.size() * sizeof(float));
    }

    // One graph per side with all the products; each product's output is an output of the graph.
    auto build = [&](bool ours, ggml_context ** ctx_out) {
        ggml_init_params gp = {ggml_tensor_overhead() * 512 + ggml_graph_overhead_custom(1024, false), nullptr, true};
        ggml_context * ctx = ggml_init(gp);
        ggml_cgraph * gf = ggml_new_graph_custom(ctx, 1024, false);
        for (size_t i = 0; i < weights.size(); ++i) {
            ggml_tensor * w = ours ? ours_weights[i] : weights[i];
            ggml_tensor * x = w->ne[0] == 2048 ? x_narrow : x_wide;
            ggml_build_forward_expand(gf, ours ? transcribe::ops::matmul(ctx, w, x) : ggml_mul_mat(ctx, w, x));
        }
        *ctx_out = ctx;
        return gf;
    };
    ggml_context * ctx_ours = nullptr;
    ggml_context * ctx_ggml = nullptr;
    ggml_cgraph * g_ours = build(true, &ctx_ours);
    ggml_cgraph * g_ggml = build(false, &ctx_ggml);
    ggml_gallocr_t alloc_ours = ggml_gallocr_new(ggml_backend_get_default_buffer_type(cpu));
    ggml_gallocr_t alloc_ggml = ggml_gallocr_new(ggml_backend_get_default_buffer_type(cpu));
    if (!ggml_gallocr_alloc_graph(alloc_ours, g_ours) || !ggml_gallocr_alloc_graph(alloc_ggml, g_ggml)) {
        std::fprintf(stderr, "gemm-stream-bench: cannot allocate the graphs\n");
        return 1;
    }
    double flops = 0;
    for (ggml_tensor * w : weights) {
        flops += 2.0 * double(w->ne[0]) * double(w->ne[1]) * double(N);
    }
    auto seconds = [&](ggml_cgraph * g) {
        const auto t0 = std::chrono::steady_clock::now();
        ggml_backend_graph_compute(cpu, g);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    seconds(g_ours); // warm-up: first touch of every buffer
    seconds(g_ggml);
    std::vector<double> ours, theirs;
    for (int r = 0; r < rounds; ++r) { // interleaved, as these machines drift between minutes
        ours.push_back(seconds(g_ours));
        theirs.push_back(seconds(g_ggml));
    }
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    const double o = ours[ours.size() / 2], t = theirs[theirs.size() / 2];
    std::printf("%s%s, %d threads, %lld products (%.0f MB of weights) x %lld columns, median of %d interleaved rounds:\n",
                ggml_type_name(type), panels ? " (ours in the panel layout)" : "", threads, (long long) weights.size(),
                double(ggml_backend_buffer_get_size(wbuf)) / (panels ? 2e6 : 1e6), (long long) N, rounds);
    std::printf("  ours  %8.1f ms  %6.1f GFLOP/s\n  ggml  %8.1f ms  %6.1f GFLOP/s\n  ours / ggml speed: %.2fx\n", o * 1e3,
                flops / o / 1e9, t * 1e3, flops / t / 1e9, t / o);
    ggml_gallocr_free(alloc_ours);
    ggml_gallocr_free(alloc_ggml);
    ggml_free(ctx_ours);
    ggml_free(ctx_ggml);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    return 0;
}
