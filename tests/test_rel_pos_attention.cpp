// FastConformer's relative-position attention (ops::rel_pos_attention: our kernel where it runs,
// kernels/rel_pos_attention.h, and ggml's ops) against the formula evaluated in double precision here:
// for query i, head h, softmax_j(((q_i + u) . k_j + (q_i + v_bias) . p_{T-1-i+j}) * scale) . v.
// Both compute in F32 with sums in another order: they agree with the double result to a few F32
// roundings of the largest output (bound 1e-5).
#include "kernels/rel_pos_attention.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "support.h"


#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

// X rounded to the nearest BF16 (ties to even), as an F32.
float round_bf16(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&x, &u, sizeof u);
    return x;
}

struct Case {
    int64_t head_dim, heads, T, R; // R: position columns (>= 2T-1); those past 2T-1 hold NaN
};

void PrintTo(const Case & c, std::ostream * os) { *os << c.head_dim << "x" << c.heads << " T " << c.T << " R " << c.R; }

class RelPosAttention : public ::testing::TestWithParam<Case> {};

struct Operands : test::CpuOperands {
    ggml_tensor *      q = nullptr, * k = nullptr, * v = nullptr, * p = nullptr, * u = nullptr, * vb = nullptr;
    std::vector<float> hq, hk, hv, hp, hu, hvb;

    explicit Operands(const Case & c) : CpuOperands(8, 7) {
        q  = add(c.head_dim, c.heads, c.T);
        k  = add(c.head_dim, c.heads, c.T);
        v  = add(c.head_dim, c.heads, c.T);
        p  = add(c.head_dim, c.heads, c.R);
        u  = add(c.head_dim, c.heads);
        vb = add(c.head_dim, c.heads);
        allocate();
        // Scores of a few units (head_dim-scaled): a softmax that is neither flat nor one-hot.
        const float spread = 1.5f / std::sqrt(std::sqrt(float(c.head_dim) / 16.0f));
        hq  = fill(q, spread);
        hk  = fill(k, spread);
        hv  = fill(v, 1.0f);
        hp  = fill(p, spread, 2 * c.T - 1); // position columns past 2T-1 must not be read
        hu  = fill(u, 0.5f);
        hvb = fill(vb, 0.5f);
    }

    // The formula in double: [head_dim, heads, T]. BF16: as the kernel's BF16 scores take it, the keys,
    // positions and queries plus biases (in F32) rounded to BF16 (to nearest even) first.
    std::vector<float> expected(const Case & c, float scale, bool bf16 = false) const {
        const int64_t hd = c.head_dim, H = c.heads, T = c.T;
        auto at = [&](const std::vector<float> & x, int64_t row, int64_t h, int64_t d) { return double(x[size_t((row * H + h) * hd + d)]); };
        auto rd = [&](double x) { return bf16 ? double(round_bf16(float(x))) : x; };
        std::vector<float> out(size_t(hd * H * T));
        std::vector<double> s(static_cast<size_t>(T));
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t i = 0; i < T; ++i) {
                for (int64_t j = 0; j < T; ++j) {
                    double ac = 0, bd = 0;
                    for (int64_t d = 0; d < hd; ++d) {
                        const double qd = at(hq, i, h, d);
                        ac += rd(float(qd + at(hu, 0, h, d))) * rd(at(hk, j, h, d));
                        bd += rd(float(qd + at(hvb, 0, h, d))) * rd(at(hp, T - 1 - i + j, h, d));
                    }
                    s[size_t(j)] = (ac + bd) * double(scale);
                }
                test::softmax_weighted_sum(s, hd, [&](int64_t j, int64_t d) { return at(hv, j, h, d); },
                                           [&](int64_t d, double o) { out[size_t((i * H + h) * hd + d)] = float(o); });
            }
        }
        return out;
    }
};

// Outputs of a size the bound means something for.
void expect_close(const std::vector<float> & ours, const std::vector<float> & ref) { test::expect_close_to(ours, ref, 1e-5f, 0.2f); }

// The kernel against the formula for case C (skipped where this CPU does not run it).
void expect_kernel_matches(const Case & c) {
    Operands o(c);
    if (!rel_pos_attention_op_applies(o.q, o.k, o.v, o.p, o.u, o.vb)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return rel_pos_attention_op(g, o.q, o.k, o.v, o.p, o.u, o.vb, scale); }),
                 o.expected(c, scale));
}

// The kernel with BF16 keys and positions against the formula on BF16-rounded operands (the same bound:
// what is left is the order of the F32 sums).
void expect_bf16_kernel_matches(const Case & c) {
    Operands o(c);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    bool runs = false;
    const std::vector<float> got = test::compute_on_cpu(o.cpu, [&](ggml_context * g) {
        ggml_tensor * k16 = ggml_cast(g, o.k, GGML_TYPE_BF16), * p16 = ggml_cast(g, o.p, GGML_TYPE_BF16);
        runs = rel_pos_attention_op_applies(o.q, k16, o.v, p16, o.u, o.vb);
        return runs ? rel_pos_attention_op(g, o.q, k16, o.v, p16, o.u, o.vb, scale) : ggml_scale(g, o.q, 1.0f);
    });
    if (!runs) {
        GTEST_SKIP() << "this CPU has no AVX-512 BF16";
    }
    expect_close(got, o.expected(c, scale, true));
    // And the rounding is what the bound is about: against the F32 formula the error is far larger
    // (but for one key, whose weight is 1 whatever its score).
    if (c.T > 1) {
        EXPECT_GT(test::max_abs_diff(got, o.expected(c, scale)), 1e-4f);
    }
}

} // namespace

TEST_P(RelPosAttention, Kernel_matches_the_formula) { expect_kernel_matches(GetParam()); }

TEST_P(RelPosAttention, Bf16_scores_match_the_formula_on_bf16_operands) { expect_bf16_kernel_matches(GetParam()); }

TEST_P(RelPosAttention, Ggml_ops_match_the_formula) {
    const Case c = GetParam();
    Operands o(c);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return ops::rel_pos_attention_ggml(g, o.q, o.k, o.v, o.p, o.u, o.vb, scale); }),
                 o.expected(c, scale));
}

// Canary-Qwen's and Parakeet's encoder shape (8 heads of 128) at 31 s of audio, padded position rows
// as the encoder passes them; the fixtures' head sizes; one key; a query block cut short.
INSTANTIATE_TEST_SUITE_P(Shapes, RelPosAttention,
                         ::testing::Values(Case {128, 8, 388, 784}, Case {16, 4, 37, 73}, Case {32, 2, 138, 288},
                                           Case {64, 2, 1, 1}, Case {64, 3, 17, 48}),
                         [](const ::testing::TestParamInfo<Case> & i) {
                             return "hd" + std::to_string(i.param.head_dim) + "_heads" + std::to_string(i.param.heads) +
                                    "_T" + std::to_string(i.param.T);
                         });

// Over 1024 keys: two minutes of audio (Parakeet's window), and the kernel's limit.
TEST(RelPosAttentionLong, Kernel_matches_the_formula_at_1500_keys) { expect_kernel_matches({128, 1, 1500, 2999}); }
TEST(RelPosAttentionLong, Bf16_scores_match_the_formula_at_1500_keys) { expect_bf16_kernel_matches({128, 1, 1500, 2999}); }
TEST(RelPosAttentionLong, Kernel_matches_the_formula_at_its_limit) {
    expect_kernel_matches({16, 1, REL_POS_ATTENTION_MAX_KEYS, 2 * REL_POS_ATTENTION_MAX_KEYS - 1});
}

// Positions handed over already rounded to BF16 (a kept table's) give the bits of F32 positions that the
// op rounds itself.
TEST(RelPosAttentionBf16Positions, Given_rounded_or_rounded_by_the_op_the_output_is_the_same) {
    const Case c {64, 2, 40, 80};
    Operands o(c);
    const float scale = 0.125f;
    const std::vector<uint8_t> own = test::compute_bytes_on_cpu(o.cpu, [&](ggml_context * g) {
        return ops::rel_pos_attention(g, o.q, o.k, o.v, o.p, o.u, o.vb, scale, true);
    });
    if (ops::rel_pos_position_type(c.head_dim, c.heads, c.T, o.u, o.vb, true) != GGML_TYPE_BF16) {
        GTEST_SKIP() << "this CPU's kernel takes no BF16 positions";
    }
    const std::vector<uint8_t> given = test::compute_bytes_on_cpu(o.cpu, [&](ggml_context * g) {
        return ops::rel_pos_attention(g, o.q, o.k, o.v, ops::to_bf16(g, o.p), o.u, o.vb, scale, true);
    });
    EXPECT_EQ(own, given);
}
