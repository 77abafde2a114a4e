// The exact-erf GELU kernel (kernels/gelu.h) against 0.5 x (1 + erf(x / sqrt 2)) in double precision, and
// against ggml's GELU_ERF (scalar erff) on the same tensor. The kernel's fit keeps an absolute error
// below 5e-7 and a relative one below 3e-6 wherever |GELU| > 1e-6 (measured over [-12, 12]: 3.8e-7 and
// 2.1e-6); ggml's 1 + erff(x) cancels in the negative tail, so there the two agree absolutely only.
#include "kernels/gelu.h"
#include "ops/activations.h"
#include "support.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace transcribe;

namespace {

double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

} // namespace

TEST(GeluErf, Within_its_stated_error_of_the_exact_function_over_every_tail_length) {
    std::vector<float> x;
    for (int i = -1200000; i <= 1200000; ++i) {
        x.push_back(float(i) * 1e-5f);
    }
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 30.0f, -30.0f, 1e4f, -1e4f}) {
        x.push_back(v);
    }
    double worst_abs = 0, worst_rel = 0;
    for (size_t len : {x.size(), x.size() - 1, size_t(17), size_t(15), size_t(1)}) { // full vectors and masked tails
        std::vector<float> y(len, std::numeric_limits<float>::quiet_NaN());
        gelu_erf_row(x.data() + (x.size() - len), y.data(), int64_t(len));
        for (size_t i = 0; i < len; ++i) {
            const double want = gelu_exact(double(x[x.size() - len + i])), err = std::abs(double(y[i]) - want);
            ASSERT_TRUE(std::isfinite(y[i])) << x[x.size() - len + i];
            worst_abs = std::max(worst_abs, err);
            if (std::abs(want) > 1e-6) {
                worst_rel = std::max(worst_rel, err / std::abs(want));
            }
        }
    }
    EXPECT_LE(worst_abs, 5e-7);
    EXPECT_LE(worst_rel, 3e-6);
    std::vector<float> big = {1e4f, -1e4f, 30.0f}, out(3);
    gelu_erf_row(big.data(), out.data(), 3);
    EXPECT_EQ(out[0], 1e4f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_EQ(out[2], 30.0f);
}

TEST(GeluErf, Graph_op_agrees_with_ggmls_gelu_erf_on_every_thread_split) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1500, 37); // rows that do not split into 16s per thread
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    std::vector<float> v(size_t(ggml_nelements(x)));
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = float(int(i * 7919 % 20001) - 10000) * 8e-4f; // [-8, 8]
    }
    ggml_backend_tensor_set(x, v.data(), 0, v.size() * sizeof(float));
    if (!gelu_erf_kernel_takes(x)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    const std::vector<float> ref  = test::compute_on_cpu(cpu, [&](ggml_context * g) { return ggml_gelu_erf(g, x); });
    const std::vector<float> ours = test::compute_on_cpu(cpu, [&](ggml_context * g) { return gelu_erf_op(g, x); });
    ASSERT_EQ(ours.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_NEAR(ours[i], ref[i], 1e-6f) << "x = " << v[i];
        ASSERT_NEAR(ours[i], gelu_exact(v[i]), 5e-7) << "x = " << v[i];
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}
