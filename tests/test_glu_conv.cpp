// The Conformer conv module's fused GLU, depthwise convolution and SiLU (ops::glu_conv: our kernel
// where it runs, kernels/glu_conv.h, ggml's ops otherwise) against the formula evaluated in double
// precision here. Both compute in F32 (e^x within 1.5 ulp): they agree to a few F32 roundings of the
// largest output (bound 1e-5).
#include "kernels/glu_conv.h"
#include "ops/conv.h"
#include "support.h"


#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

struct Case {
    int64_t d, T, K;
};

void PrintTo(const Case & c, std::ostream * os) { *os << "d " << c.d << " T " << c.T << " K " << c.K; }

class GluConv : public ::testing::TestWithParam<Case> {};

struct Operands : test::CpuOperands {
    ggml_tensor *      y = nullptr, * w = nullptr, * b = nullptr;
    std::vector<float> hy, hw, hb;

    explicit Operands(const Case & c) : CpuOperands(4, 5) {
        y = add(2 * c.d, c.T);
        w = add(c.K, c.d);
        b = add(c.d);
        allocate();
        hy = fill(y, 3.0f); // gates from saturated to open
        hw = fill(w, 0.4f);
        hb = fill(b, 0.5f);
    }

    // The formula in double: [d, T].
    std::vector<float> expected(const Case & c) const {
        auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
        std::vector<float> out(size_t(c.d * c.T));
        for (int64_t t = 0; t < c.T; ++t) {
            for (int64_t ch = 0; ch < c.d; ++ch) {
                double acc = hb[size_t(ch)];
                for (int64_t k = 0; k < c.K; ++k) {
                    const int64_t s = t + k - c.K / 2;
                    if (s >= 0 && s < c.T) {
                        const double a = hy[size_t(s * 2 * c.d + ch)], g = hy[size_t(s * 2 * c.d + c.d + ch)];
                        acc += double(hw[size_t(ch * c.K + k)]) * a * sigmoid(g);
                    }
                }
                out[size_t(t * c.d + ch)] = float(acc * sigmoid(acc));
            }
        }
        return out;
    }
};

void expect_close(const std::vector<float> & ours, const std::vector<float> & ref) { test::expect_close_to(ours, ref, 1e-5f, 1.0f); }

} // namespace

TEST_P(GluConv, Kernel_matches_the_formula) {
    const Case c = GetParam();
    Operands o(c);
    if (!glu_conv_op_applies(o.y, o.w, o.b)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return glu_conv_op(g, o.y, o.w, o.b); }), o.expected(c));
}

// The encoder's conv module at 31 s of audio; the fixtures' (T shorter than the kernel too); one step;
// the longest kernel the op takes.
INSTANTIATE_TEST_SUITE_P(Shapes, GluConv,
                         ::testing::Values(Case {1024, 388, 9}, Case {64, 138, 9}, Case {64, 5, 9}, Case {16, 1, 3},
                                           Case {32, 40, 31}),
                         [](const ::testing::TestParamInfo<Case> & i) {
                             return "d" + std::to_string(i.param.d) + "_T" + std::to_string(i.param.T) + "_K" +
                                    std::to_string(i.param.K);
                         });

// 24 channels: not whole vectors, so ggml's ops run (as on other backends).
TEST(GluConvGgml, Ops_match_the_formula_where_the_kernel_does_not_run) {
    const Case c {24, 50, 9};
    Operands o(c);
    ASSERT_FALSE(glu_conv_op_applies(o.y, o.w, o.b));
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return ops::glu_conv(g, o.y, o.w, o.b); }), o.expected(c));
}
