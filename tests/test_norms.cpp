// The one-pass norm ops (kernels/norms.h) against ggml's own ops on the same rows. LayerNorm: its mean
// and variance are summed in double, ggml's in double and float: the results agree to a few F32
// roundings of the output (bound 2e-6 of its largest value; measured below 5e-7). RMSNorm takes the
// same F32 squares, mean, scale and products as ggml's rms_norm and mul; only the order of the double
// sum differs, so the results agree to within one F32 rounding (bound 1e-6 of the largest value).
#include "kernels/norms.h"
#include "ops/norms.h"
#include "support.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

using namespace transcribe;

namespace {

// A 2-thread CPU backend, and the test's tensors in a host buffer once allocate() has run.
class Norms : public ::testing::Test {
protected:
    void SetUp() override {
        cpu_ = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu_, 2);
        ggml_init_params p = {ggml_tensor_overhead() * 8, nullptr, true};
        ctx_ = ggml_init(p);
    }
    void TearDown() override {
        if (buf_) {
            ggml_backend_buffer_free(buf_);
        }
        ggml_free(ctx_);
        ggml_backend_free(cpu_);
    }
    ggml_tensor * tensor(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
        return ggml_new_tensor_3d(ctx_, GGML_TYPE_F32, ne0, ne1, ne2);
    }
    void allocate() { buf_ = ggml_backend_alloc_ctx_tensors(ctx_, cpu_); }
    // Element i of T = VALUE(i, a standard normal draw).
    void fill(ggml_tensor * t, const std::function<float(size_t, float)> & value) {
        std::vector<float> v(static_cast<size_t>(ggml_nelements(t)));
        for (size_t i = 0; i < v.size(); ++i) {
            v[i] = value(i, normal_(rng_));
        }
        ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
    }
    // Max |ours - ggml's| over the largest |ggml's| must stay within BOUND.
    void expect_close(const std::function<ggml_tensor *(ggml_context *, bool ours)> & build, float bound) {
        const std::vector<float> ref  = test::compute_on_cpu(cpu_, [&](ggml_context * g) { return build(g, false); });
        const std::vector<float> ours = test::compute_on_cpu(cpu_, [&](ggml_context * g) { return build(g, true); });
        ASSERT_EQ(ours.size(), ref.size());
        const float scale = test::max_abs(ref), diff = test::max_abs_diff(ours, ref);
        EXPECT_GT(scale, 1.0f);
        EXPECT_LE(diff, bound * scale) << "max |diff| " << diff << " of max |y| " << scale;
    }

private:
    ggml_backend_t                  cpu_ = nullptr;
    ggml_context *                  ctx_ = nullptr;
    ggml_backend_buffer_t           buf_ = nullptr;
    std::mt19937                    rng_ {5};
    std::normal_distribution<float> normal_ {0.0f, 1.0f};
};

} // namespace

TEST_F(Norms, LayerNorm_one_pass_op_matches_ggml_norm_mul_add) {
    const int64_t n = 1024;
    ggml_tensor * x = tensor(n, 37);
    ggml_tensor * w = tensor(n);
    ggml_tensor * b = tensor(n);
    allocate();
    if (!layer_norm_op_applies(x, w, b)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    fill(x, [&](size_t i, float r) { return 3.0f + r * (1.0f + float(i / size_t(n))); }); // rows of different mean and spread
    fill(w, [](size_t, float r) { return 1.0f + 0.1f * r; });
    fill(b, [](size_t, float r) { return 0.1f * r; });
    expect_close([&](ggml_context * g, bool ours) {
        return ours ? layer_norm_op(g, x, w, b, 1e-5f) : ggml_add(g, ggml_mul(g, ggml_norm(g, x, 1e-5f), w), b);
    }, 2e-6f);
}

TEST_F(Norms, RmsNorm_one_pass_op_matches_ggml_rms_norm_mul) {
    // Qwen3's per-head q/k norms (rows of 128 in a 3-D tensor) and its hidden-size norms
    ggml_tensor * heads = tensor(128, 16, 7);
    ggml_tensor * head_w = tensor(128);
    ggml_tensor * wide = tensor(2048, 7);
    ggml_tensor * wide_w = tensor(2048);
    allocate();
    if (!rms_norm_op_applies(heads, head_w)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    for (auto [x, w] : {std::pair {heads, head_w}, std::pair {wide, wide_w}}) {
        fill(x, [](size_t i, float r) { return r * (0.1f + float(i % 97)); }); // rows of different scale
        fill(w, [](size_t, float r) { return 1.0f + 0.2f * r; });
        expect_close([&, x = x, w = w](ggml_context * g, bool ours) {
            return ours ? rms_norm_op(g, x, w, 1e-6f) : ggml_mul(g, ggml_rms_norm(g, x, 1e-6f), w);
        }, 1e-6f);
    }
}
