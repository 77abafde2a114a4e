// Plain self-attention (ops::self_attention: our kernel where it runs, kernels/self_attention.h, and
// ggml's ops) against the formula evaluated in double precision here: for query i, head h,
// softmax_j(q_i . k_j * scale) . v, j over every key or, windowed (Qwen3-ASR's encoder), over the keys of
// i's window (consecutive windows of W frames, the last maybe shorter). Both compute in F32 with sums in another order: they agree with the
// double result to a few F32 roundings of the largest output (bound 1e-5).
#include "kernels/self_attention.h"
#include "ops/attention.h"
#include "support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

struct Case {
    int64_t head_dim, heads, T, window = 0;
};

void PrintTo(const Case & c, std::ostream * os) { *os << c.head_dim << "x" << c.heads << " T " << c.T << " W " << c.window; }

class SelfAttention : public ::testing::TestWithParam<Case> {};

struct Operands : test::CpuOperands {
    ggml_tensor *      q = nullptr, * k = nullptr, * v = nullptr;
    std::vector<float> hq, hk, hv;

    explicit Operands(const Case & c) : CpuOperands(4, 11) {
        q = add(c.head_dim, c.heads, c.T);
        k = add(c.head_dim, c.heads, c.T);
        v = add(c.head_dim, c.heads, c.T);
        allocate();
        // Scores of a few units (head_dim-scaled): a softmax that is neither flat nor one-hot.
        const float spread = 2.0f / std::sqrt(std::sqrt(float(c.head_dim) / 16.0f));
        hq = fill(q, spread);
        hk = fill(k, spread);
        hv = fill(v, 1.0f);
    }

    // The formula in double: [head_dim, heads, T].
    std::vector<float> expected(const Case & c, float scale) const {
        const int64_t hd = c.head_dim, H = c.heads, T = c.T;
        auto at = [&](const std::vector<float> & x, int64_t row, int64_t h, int64_t d) { return double(x[size_t((row * H + h) * hd + d)]); };
        std::vector<float>  out(size_t(hd * H * T));
        const int64_t W = c.window > 0 ? c.window : T;
        std::vector<double> s;
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t i = 0; i < T; ++i) {
                const int64_t j0 = i / W * W, j1 = std::min(T, j0 + W);
                s.assign(size_t(j1 - j0), 0.0);
                for (int64_t j = j0; j < j1; ++j) {
                    double dot = 0;
                    for (int64_t d = 0; d < hd; ++d) {
                        dot += at(hq, i, h, d) * at(hk, j, h, d);
                    }
                    s[size_t(j - j0)] = dot * double(scale);
                }
                test::softmax_weighted_sum(s, hd, [&](int64_t j, int64_t d) { return at(hv, j0 + j, h, d); },
                                           [&](int64_t d, double o) { out[size_t((i * H + h) * hd + d)] = float(o); });
            }
        }
        return out;
    }
};

void expect_close(const std::vector<float> & ours, const std::vector<float> & ref) { test::expect_close_to(ours, ref, 1e-5f, 0.2f); }

void expect_kernel_matches(const Case & c) {
    Operands o(c);
    if (!self_attention_kernel_takes(o.q, o.k, o.v, c.window)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return self_attention_op(g, o.q, o.k, o.v, scale, c.window); }),
                 o.expected(c, scale));
}

} // namespace

TEST_P(SelfAttention, Kernel_matches_the_formula) { expect_kernel_matches(GetParam()); }

TEST_P(SelfAttention, Ggml_ops_match_the_formula) {
    const Case  c = GetParam();
    Operands    o(c);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return ops::windowed_self_attention_ggml(g, o.q, o.k, o.v, c.window, scale); }),
                 o.expected(c, scale));
}

// Sortformer's Transformer (8 heads of 24: a half vector past the last whole one) at a streaming step's
// length; the fixture's heads; one key; a query block cut short; head sizes of whole vectors.
INSTANTIATE_TEST_SUITE_P(Shapes, SelfAttention,
                         ::testing::Values(Case {24, 8, 609}, Case {8, 2, 37}, Case {16, 1, 1}, Case {40, 3, 17},
                                           Case {64, 2, 100}, Case {128, 1, 33},
                                           // windowed: whole windows and a tail; a window of 16 (a query block);
                                           // Qwen3-ASR-0.6B's heads and window; a window of all frames
                                           Case {32, 2, 143, 26}, Case {16, 1, 40, 16}, Case {64, 14, 250, 104},
                                           Case {8, 2, 37, 37}),
                         [](const ::testing::TestParamInfo<Case> & i) {
                             return "hd" + std::to_string(i.param.head_dim) + "_heads" + std::to_string(i.param.heads) +
                                    "_T" + std::to_string(i.param.T) + (i.param.window ? "_W" + std::to_string(i.param.window) : "");
                         });

TEST(SelfAttentionLong, Kernel_matches_the_formula_at_its_limit) { expect_kernel_matches({8, 1, SELF_ATTENTION_MAX_KEYS}); }

TEST(SelfAttentionLong, Past_its_limit_the_kernel_declines) {
    Operands o({8, 1, SELF_ATTENTION_MAX_KEYS + 1});
    EXPECT_FALSE(self_attention_kernel_takes(o.q, o.k, o.v));
}
