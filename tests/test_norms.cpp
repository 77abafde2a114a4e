// The one-pass norm ops (kernels/norms.h) against ggml's own ops on the same rows. LayerNorm: its mean
// and variance are summed in double, ggml's in double and float: the results agree to a few F32
// roundings of the output (bound 2e-6 of its largest value; measured below 5e-7). RMSNorm takes the
// same F32 squares, mean, scale and products as ggml's rms_norm and mul; only the order of the double
// sum differs, so the results agree to within one F32 rounding (bound 1e-6 of the largest value).
#include "kernels/norms.h"
#include "support.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace transcribe;

TEST(LayerNorm, One_pass_op_matches_ggml_norm_mul_add) {
    const int64_t n = 1024, rows = 37;
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, rows);
    ggml_tensor * w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    if (!layer_norm_op_applies(x, w, b)) {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(cpu);
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> xv(static_cast<size_t>(n * rows)), wv(static_cast<size_t>(n)), bv(static_cast<size_t>(n));
    for (size_t i = 0; i < xv.size(); ++i) {
        xv[i] = 3.0f + normal(rng) * (1.0f + float(i / size_t(n))); // rows of different mean and spread
    }
    for (size_t i = 0; i < wv.size(); ++i) {
        wv[i] = 1.0f + 0.1f * normal(rng);
        bv[i] = 0.1f * normal(rng);
    }
    ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
    ggml_backend_tensor_set(w, wv.data(), 0, wv.size() * sizeof(float));
    ggml_backend_tensor_set(b, bv.data(), 0, bv.size() * sizeof(float));

    auto run = [&](bool ours) {
        return test::compute_on_cpu(cpu, [&](ggml_context * g) {
            return ours ? layer_norm_op(g, x, w, b, 1e-5f) : ggml_add(g, ggml_mul(g, ggml_norm(g, x, 1e-5f), w), b);
        });
    };
    const std::vector<float> ref = run(false), ours = run(true);
    const float scale = test::max_abs(ref), diff = test::max_abs_diff(ours, ref);
    EXPECT_GT(scale, 1.0f);
    EXPECT_LE(diff, 2e-6f * scale) << "max |diff| " << diff << " of max |y| " << scale;
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

TEST(RmsNorm, One_pass_op_matches_ggml_rms_norm_mul) {
    const int64_t n = 128, heads = 16, rows = 7; // Qwen3's per-head q/k norm shape, and its hidden size below
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * heads_x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, heads, rows);
    ggml_tensor * heads_w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_tensor * wide_x  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2048, rows);
    ggml_tensor * wide_w  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2048);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    if (!rms_norm_op_applies(heads_x, heads_w)) {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(cpu);
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (ggml_tensor * t : {heads_x, heads_w, wide_x, wide_w}) {
        std::vector<float> v(static_cast<size_t>(ggml_nelements(t)));
        const bool weight = ggml_n_dims(t) == 1;
        for (size_t i = 0; i < v.size(); ++i) {
            v[i] = weight ? 1.0f + 0.2f * normal(rng) : normal(rng) * (0.1f + float(i % 97)); // rows of different scale
        }
        ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
    }
    for (auto [x, w] : {std::pair {heads_x, heads_w}, std::pair {wide_x, wide_w}}) {
        auto run = [&, x = x, w = w](bool ours) {
            return test::compute_on_cpu(cpu, [&](ggml_context * g) {
                return ours ? rms_norm_op(g, x, w, 1e-6f) : ggml_mul(g, ggml_rms_norm(g, x, 1e-6f), w);
            });
        };
        const std::vector<float> ref = run(false), ours = run(true);
        ASSERT_EQ(ref.size(), static_cast<size_t>(ggml_nelements(x)));
        const float scale = test::max_abs(ref), diff = test::max_abs_diff(ours, ref);
        EXPECT_GT(scale, 1.0f);
        EXPECT_LE(diff, 1e-6f * scale) << "max |diff| " << diff << " of max |y| " << scale;
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}
