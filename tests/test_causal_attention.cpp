// The prefill's and decode's causal attention ops (kernels/causal_attention.h) against
// ggml_flash_attn_ext with a causal mask, built as the Qwen3 block builds it, on the same queries and
// cache values. Both compute in F32; the sums run in another order and e^x is the same polynomial, so they agree to a few F32
// roundings (bound 1e-5 of the largest output).
#include "kernels/causal_attention.h"
#include "ops/attention.h"
#include "support.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

using namespace transcribe;

namespace {

struct Case {
    int64_t   head_dim, heads, kv_heads, T;
    ggml_type cache;
};

class CausalAttention : public ::testing::TestWithParam<Case> {};

// Normal values times SPREAD into T (F16 or F32); rows from FIRST_NAN_ROW on hold NaN instead.
void fill(ggml_tensor * t, std::mt19937 & rng, float spread, int64_t first_nan_row = INT64_MAX) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> f(static_cast<size_t>(ggml_nelements(t)));
    for (size_t i = 0; i < f.size(); ++i) {
        f[i] = int64_t(i) / t->ne[0] >= first_nan_row ? NAN : spread * normal(rng);
    }
    if (t->type == GGML_TYPE_F16) {
        std::vector<ggml_fp16_t> h(f.size());
        ggml_fp32_to_fp16_row(f.data(), h.data(), int64_t(f.size()));
        ggml_backend_tensor_set(t, h.data(), 0, h.size() * sizeof(h[0]));
    } else {
        ggml_backend_tensor_set(t, f.data(), 0, f.size() * sizeof(float));
    }
}

// ggml's reference reads an F32 copy of the caches: below 64 queries its flash attention rounds Q to
// F16 and sums V in F16 for an F16 cache (errors of 1e-3 of the output), which ours does not.
ggml_tensor * reference(ggml_context * g, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * mask,
                        int64_t keys, float scale) {
    const int64_t hd = q->ne[0], kv_heads = k->ne[0] / hd;
    ggml_tensor * k32 = k->type == GGML_TYPE_F32 ? k : ggml_cast(g, k, GGML_TYPE_F32);
    ggml_tensor * v32 = v->type == GGML_TYPE_F32 ? v : ggml_cast(g, v, GGML_TYPE_F32);
    ggml_tensor * kv  = ggml_view_3d(g, k32, hd, kv_heads, keys, size_t(hd) * 4, k32->nb[1], 0);
    ggml_tensor * vv  = ggml_view_3d(g, v32, hd, kv_heads, keys, size_t(hd) * 4, v32->nb[1], 0);
    ggml_tensor * o   = ggml_flash_attn_ext(g, ggml_permute(g, q, 0, 2, 1, 3), ggml_permute(g, kv, 0, 2, 1, 3),
                                            ggml_permute(g, vv, 0, 2, 1, 3), mask, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
    return o;
}

// Queries [head_dim, heads, T] and K/V caches of POSITIONS rows in a CPU backend buffer, filled with
// normal values (cache rows from NAN_FROM on hold NaN: they must not be read); the mask, if any, and the
// position input are allocated with them.
struct Operands {
    ggml_backend_t        cpu = ggml_backend_cpu_init();
    ggml_context *        ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_tensor *         q = nullptr, * k = nullptr, * v = nullptr, * mask = nullptr, * pos = nullptr;
    float                 scale;

    Operands(int64_t head_dim, int64_t heads, int64_t kv_heads, int64_t T, int64_t positions, ggml_type cache,
             int64_t nan_from, bool with_mask, uint32_t seed) : scale(1.0f / std::sqrt(float(head_dim))) {
        ggml_backend_cpu_set_n_threads(cpu, 2);
        ggml_init_params p = {ggml_tensor_overhead() * 8, nullptr, true};
        ctx  = ggml_init(p);
        q    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, head_dim, heads, T);
        k    = ggml_new_tensor_2d(ctx, cache, head_dim * kv_heads, positions);
        v    = ggml_new_tensor_2d(ctx, cache, head_dim * kv_heads, positions);
        mask = with_mask ? ggml_new_tensor_2d(ctx, GGML_TYPE_F16, T, T) : nullptr;
        pos  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
        buf  = ggml_backend_alloc_ctx_tensors(ctx, cpu);
        EXPECT_TRUE(buf);
        std::mt19937 rng(seed);
        fill(q, rng, 2.0f); // scores of a few units: a softmax that is neither flat nor one-hot
        fill(k, rng, 1.0f, nan_from);
        fill(v, rng, 1.0f, nan_from);
    }
    ~Operands() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(cpu);
    }

    // OURS against REF, both built over these operands: within 1e-5 of the largest |o|, which must
    // exceed MIN_TOP (outputs of a size the bound means something for).
    void expect_matches(const std::function<ggml_tensor *(ggml_context *)> & ref_op,
                        const std::function<ggml_tensor *(ggml_context *)> & ours_op, float min_top) {
        const std::vector<float> ref  = test::compute_on_cpu(cpu, ref_op);
        const std::vector<float> ours = test::compute_on_cpu(cpu, ours_op);
        ASSERT_EQ(ours.size(), ref.size());
        const float top = test::max_abs(ref), diff = test::max_abs_diff(ours, ref);
        EXPECT_GT(top, min_top);
        EXPECT_LE(diff, 1e-5f * top) << "max |diff| " << diff << " of max |o| " << top;
    }
};

} // namespace

TEST_P(CausalAttention, Matches_ggml_flash_attention_with_a_causal_mask) {
    const Case c = GetParam();
    // cache rows past the prompt hold NaN: they must not be read
    Operands o(c.head_dim, c.heads, c.kv_heads, c.T, c.T + 40, c.cache, c.T, true, 11);
    if (!causal_attention_op_applies(o.q, o.k, o.v)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    std::vector<ggml_fp16_t> m(static_cast<size_t>(c.T * c.T));
    for (int64_t i = 0; i < c.T; ++i) {
        for (int64_t j = 0; j < c.T; ++j) {
            m[size_t(i * c.T + j)] = ggml_fp32_to_fp16(j <= i ? 0.0f : -INFINITY);
        }
    }
    ggml_backend_tensor_set(o.mask, m.data(), 0, m.size() * sizeof(m[0]));
    o.expect_matches([&](ggml_context * g) { return reference(g, o.q, o.k, o.v, o.mask, c.T, o.scale); },
                     [&](ggml_context * g) { return causal_attention_op(g, o.q, o.k, o.v, o.scale); }, 0.5f);
}

// Qwen3-1.7B's heads over jfk's prompt; a partial last block of queries; a forced aligner's long piece
// (past 1024 keys) and the longest prompt it takes; the shortest prompt; one
// cache head for all; an F32 cache; the test fixture's heads.
INSTANTIATE_TEST_SUITE_P(Shapes, CausalAttention,
                         ::testing::Values(Case {128, 16, 8, 152, GGML_TYPE_F16}, Case {128, 16, 8, 17, GGML_TYPE_F32},
                                           Case {128, 2, 1, 2500, GGML_TYPE_F32}, Case {64, 2, 2, 4096, GGML_TYPE_F16},
                                           Case {128, 2, 2, 2, GGML_TYPE_F16}, Case {64, 4, 1, 33, GGML_TYPE_F16},
                                           Case {64, 6, 3, 70, GGML_TYPE_F32}, Case {16, 4, 2, 60, GGML_TYPE_F16}));

// ---- Decode: one query per head at a position given at run time ----

namespace {
struct DecodeCase {
    int64_t   head_dim, heads, kv_heads, pos;
    ggml_type cache;
};
class DecodeAttention : public ::testing::TestWithParam<DecodeCase> {};
} // namespace

TEST_P(DecodeAttention, Matches_ggml_flash_attention_over_the_positions_so_far) {
    const DecodeCase c = GetParam();
    // rows past the position hold NaN: they must not be read
    Operands o(c.head_dim, c.heads, c.kv_heads, 1, c.pos + 1 + 40, c.cache, c.pos + 1, false, 13);
    if (!decode_attention_op_applies(o.q, o.k, o.v, o.pos, nullptr)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    const int32_t at = int32_t(c.pos);
    ggml_backend_tensor_set(o.pos, &at, 0, sizeof(at));
    // Every one of the pos + 1 keys is seen: no mask.
    o.expect_matches([&](ggml_context * g) { return reference(g, o.q, o.k, o.v, nullptr, c.pos + 1, o.scale); },
                     [&](ggml_context * g) { return decode_attention_op(g, o.q, o.k, o.v, o.pos, nullptr, o.scale); }, 0.1f);
}

// Qwen3-1.7B's heads after jfk's prompt; the first position; past one and two steps of the running
// softmax (256 keys each); heads that share a cache head in threes (a pair and a single), not at all,
// all of them; an F32 cache; the test fixture's heads.
INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttention,
                         ::testing::Values(DecodeCase {128, 16, 8, 152, GGML_TYPE_F16}, DecodeCase {128, 16, 8, 0, GGML_TYPE_F16},
                                           DecodeCase {128, 16, 8, 300, GGML_TYPE_F16}, DecodeCase {128, 16, 8, 700, GGML_TYPE_F32},
                                           DecodeCase {64, 6, 2, 90, GGML_TYPE_F16}, DecodeCase {64, 4, 4, 40, GGML_TYPE_F16},
                                           DecodeCase {64, 4, 1, 257, GGML_TYPE_F32}, DecodeCase {16, 4, 2, 60, GGML_TYPE_F16}));

// ---- Decode of several sequences in one op: each query reads its own stretch of the cache ----

TEST(DecodeAttentionBatch, Each_query_reads_only_its_own_stretch_of_the_cache) {
    constexpr int64_t kB = 3, kStride = 320, kHeadDim = 128, kHeads = 16, kKvHeads = 8;
    const int32_t positions[kB] = {152, 0, 300}; // after jfk's prompt; a sequence's first token; past one running-softmax step
    Operands o(kHeadDim, kHeads, kKvHeads, kB, kB * kStride, GGML_TYPE_F16, INT64_MAX, false, 29);
    ggml_init_params p = {ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * pos  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, kB);
    ggml_tensor * rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, kB);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, o.cpu);
    ASSERT_TRUE(buf);
    std::vector<int64_t> at(kB);
    for (int64_t b = 0; b < kB; ++b) {
        at[size_t(b)] = b * kStride + positions[b];
        // Every row of the stretch past the query's own, and so every other sequence's unused rows, holds NaN.
        const std::vector<ggml_fp16_t> nan_row(size_t(kHeadDim * kKvHeads), ggml_fp32_to_fp16(NAN));
        for (int64_t r = at[size_t(b)] + 1; r < (b + 1) * kStride; ++r) {
            ggml_backend_tensor_set(o.k, nan_row.data(), size_t(r) * o.k->nb[1], o.k->nb[1]);
            ggml_backend_tensor_set(o.v, nan_row.data(), size_t(r) * o.v->nb[1], o.v->nb[1]);
        }
    }
    ggml_backend_tensor_set(pos, positions, 0, sizeof(positions));
    ggml_backend_tensor_set(rows, at.data(), 0, at.size() * sizeof(int64_t));
    if (!decode_attention_op_applies(o.q, o.k, o.v, pos, rows)) {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    // The reference: each query alone against its own stretch's first pos + 1 rows.
    auto ref = [&](ggml_context * g) {
        ggml_tensor * out = nullptr;
        for (int64_t b = 0; b < kB; ++b) {
            ggml_tensor * qb = ggml_view_3d(g, o.q, kHeadDim, kHeads, 1, o.q->nb[1], o.q->nb[2], size_t(b) * o.q->nb[2]);
            const size_t first = size_t(b * kStride) * o.k->nb[1];
            ggml_tensor * kb = ggml_view_2d(g, o.k, o.k->ne[0], positions[b] + 1, o.k->nb[1], first);
            ggml_tensor * vb = ggml_view_2d(g, o.v, o.v->ne[0], positions[b] + 1, o.v->nb[1], first);
            ggml_tensor * ob = reference(g, ggml_cont(g, qb), kb, vb, nullptr, positions[b] + 1, o.scale);
            out = out ? ggml_concat(g, out, ob, 2) : ob;
        }
        return out;
    };
    o.expect_matches(ref, [&](ggml_context * g) { return decode_attention_op(g, o.q, o.k, o.v, pos, rows, o.scale); }, 0.1f);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}
