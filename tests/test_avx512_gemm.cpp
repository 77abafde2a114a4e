// Our GEMM and GEMV kernels (kernels/avx512_gemm.h, avx512_gemv.h) against ggml's own mul_mat on the
// same operands, for each weight type they take. Both quantize (BF16: round) the activations with ggml's from_float and take the same
// integer dot products per block (BF16: the same products); only the order of the F32 sums differs,
// so the results agree to F32 rounding, which grows with K: the bound below is 1e-5 of the largest |y|
// (measured: up to 6.3e-7 for Q8_0 and 1.4e-6 for Q4_K, 2.1e-6 for BF16 at K = 6144). A wrong layout,
// scale or correction term is off by the size of y itself.
#include "ops/embed.h"
#include "ops/matmul.h"
#include "kernels/avx512_gemm.h"
#include "kernels/avx512_gemv.h"
#include "kernels/measured_shares.h"
#include "support.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

struct Shape {
    ggml_type type;
    int64_t   K, M, N;
    int       threads;
    bool      repacked = false; // W in ggml's CPU repack buffer (Q4_K: 8 rows interleaved) rather than the file layout
};

ggml_backend_buffer_type_t cpu_repack_buffer_type() {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
    for (ggml_backend_buffer_type_t * p = get_extra ? get_extra(dev) : nullptr; p && *p; ++p) {
        if (std::string(ggml_backend_buft_name(*p)) == "CPU_REPACK") {
            return *p;
        }
    }
    return nullptr;
}

class Avx512Gemm : public ::testing::TestWithParam<Shape> {};

// Weights W [K, M] quantized to the shape's type and activations X [K, N], in a CPU backend buffer.
struct Operands {
    ggml_backend_t        cpu = nullptr;
    ggml_context *        ctx = nullptr, * w_ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr, w_buf = nullptr;
    ggml_tensor *         w   = nullptr;
    ggml_tensor *         x   = nullptr;

    Operands(const Shape & s, uint32_t seed) {
        cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, s.threads);
        ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
        ctx   = ggml_init(p);
        w_ctx = ggml_init(p);
        w     = ggml_new_tensor_2d(w_ctx, s.type, s.K, s.M);
        x     = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, s.K, s.N);
        buf   = ggml_backend_alloc_ctx_tensors(ctx, cpu);
        ggml_backend_buffer_type_t repack = s.repacked ? cpu_repack_buffer_type() : nullptr;
        EXPECT_TRUE(repack || !s.repacked);
        w_buf = ggml_backend_alloc_ctx_tensors_from_buft(w_ctx, repack ? repack : ggml_backend_cpu_buffer_type());
        std::mt19937 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> wf(size_t(s.K * s.M)), xf(size_t(s.K * s.N));
        for (size_t i = 0; i < wf.size(); ++i) {
            // rows of different scales, and a few outliers, so block scales vary
            wf[i] = normal(rng) * (0.02f + 0.01f * float((i / size_t(s.K)) % 7)) * (i % 97 == 0 ? 8.0f : 1.0f);
        }
        for (float & v : xf) {
            v = normal(rng) * 3.0f;
        }
        std::vector<uint8_t> wq(ggml_nbytes(w));
        ggml_quantize_chunk(s.type, wf.data(), wq.data(), 0, s.M, s.K, nullptr);
        ggml_backend_tensor_set(w, wq.data(), 0, wq.size()); // the repack buffer converts it here
        ggml_backend_tensor_set(x, xf.data(), 0, xf.size() * sizeof(float));
    }
    ~Operands() {
        ggml_backend_buffer_free(buf);
        ggml_backend_buffer_free(w_buf);
        ggml_free(ctx);
        ggml_free(w_ctx);
        ggml_backend_free(cpu);
    }

    std::vector<float> compute(const std::function<ggml_tensor *(ggml_context *)> & build) { return test::compute_on_cpu(cpu, build); }

    // Our op (OURS builds it) against ggml_mul_mat on these operands: within 1e-5 of the largest |y|.
    void expect_matches_mul_mat(const Shape & s, const std::function<ggml_tensor *(ggml_context *)> & ours_op) {
        const std::vector<float> ref  = compute([&](ggml_context * c) { return ggml_mul_mat(c, w, x); });
        const std::vector<float> ours = compute(ours_op);
        ASSERT_EQ(ours.size(), ref.size());
        const float scale = test::max_abs(ref), diff = test::max_abs_diff(ours, ref);
        ASSERT_GT(scale, 0.1f);
        EXPECT_LE(diff, 1e-5f * scale) << ggml_type_name(s.type) << " K " << s.K << " M " << s.M << " N " << s.N
                                       << ": max |diff| " << diff << " of max |y| " << scale;
    }
};

} // namespace

TEST_P(Avx512Gemm, Matches_ggml_mul_mat) {
    const Shape s = GetParam();
    if (!avx512_gemm_handles(s.type)) {
        GTEST_SKIP() << "this CPU has no AVX-512 kernel for " << ggml_type_name(s.type);
    }
    Operands o(s, uint32_t(s.K * 31 + s.M * 7 + s.N + s.type));
    ASSERT_EQ(avx512_gemm_applies(o.w, o.x), s.N >= AVX512_GEMM_MIN_COLS);
    o.expect_matches_mul_mat(s, [&](ggml_context * c) { return avx512_gemm_op(c, o.w, o.x); });
}

// Column tails (N mod 4), a single panel, odd panel counts over the threads, the model's shapes.
constexpr ggml_type Q8 = GGML_TYPE_Q8_0, Q4K = GGML_TYPE_Q4_K, Q6K = GGML_TYPE_Q6_K, BF = GGML_TYPE_BF16, F32 = GGML_TYPE_F32;
INSTANTIATE_TEST_SUITE_P(Shapes, Avx512Gemm,
                         ::testing::Values(Shape {Q8, 32, 32, 1, 1}, Shape {Q8, 64, 32, 2, 2}, Shape {Q8, 64, 96, 3, 2},
                                           Shape {Q8, 256, 64, 5, 3}, Shape {Q8, 128, 160, 8, 2},
                                           Shape {Q8, 1024, 256, 33, 2}, Shape {Q8, 2048, 1024, 152, 2},
                                           Shape {Q8, 6144, 64, 138, 2}, Shape {Q8, 4096, 1024, 17, 4},
                                           Shape {Q4K, 256, 32, 1, 1}, Shape {Q4K, 256, 64, 2, 2},
                                           Shape {Q4K, 512, 96, 3, 2}, Shape {Q4K, 1024, 64, 5, 3},
                                           Shape {Q4K, 2048, 1024, 152, 2}, Shape {Q4K, 6144, 64, 138, 2},
                                           Shape {Q4K, 4096, 256, 17, 4}, Shape {Q4K, 256, 32, 9, 1, true},
                                           Shape {Q4K, 2048, 1024, 152, 2, true},
                                           Shape {Q4K, 6144, 96, 138, 3, true}, Shape {BF, 32, 32, 1, 1},
                                           Shape {BF, 64, 64, 7, 2}, Shape {BF, 256, 96, 15, 3},
                                           Shape {BF, 2048, 1024, 152, 2}, Shape {BF, 6144, 64, 138, 2},
                                           Shape {BF, 1024, 256, 9, 4}, Shape {Q6K, 256, 32, 1, 1},
                                           Shape {Q6K, 512, 96, 7, 2}, Shape {Q6K, 6144, 2048, 152, 2},
                                           Shape {Q6K, 2048, 64, 138, 3}, Shape {F32, 32, 32, 1, 1},
                                           Shape {F32, 2048, 128, 152, 2}, Shape {F32, 128, 2048, 152, 2},
                                           Shape {F32, 256, 96, 13, 3}));

// The bias is added in the kernel's epilogue: the same as ggml_add after ggml's mul_mat.
TEST(Avx512GemmBias, Fused_bias_matches_ggml_add) {
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_BF16, GGML_TYPE_F32}) {
        if (!avx512_gemm_handles(type)) {
            continue;
        }
        const Shape s {type, 512, 96, 19, 2};
        Operands o(s, 7);
        ggml_init_params p = {ggml_tensor_overhead(), nullptr, true};
        ggml_context * bctx = ggml_init(p);
        ggml_tensor * b = ggml_new_tensor_1d(bctx, GGML_TYPE_F32, s.M);
        ggml_backend_buffer_t bbuf = ggml_backend_alloc_ctx_tensors(bctx, o.cpu);
        std::vector<float> bias(size_t(s.M));
        for (size_t i = 0; i < bias.size(); ++i) {
            bias[i] = float(i % 13) - 6.5f;
        }
        ggml_backend_tensor_set(b, bias.data(), 0, bias.size() * sizeof(float));
        const std::vector<float> ref  = o.compute([&](ggml_context * c) { return ggml_add(c, ggml_mul_mat(c, o.w, o.x), b); });
        const std::vector<float> ours = o.compute([&](ggml_context * c) { return ops::matmul(c, o.w, o.x, b); });
        EXPECT_LE(test::max_abs_diff(ours, ref), 1e-5f * test::max_abs(ref)) << ggml_type_name(type);
        ggml_backend_buffer_free(bbuf);
        ggml_free(bctx);
    }
}

TEST(Avx512GemmPolicy, Taken_for_host_q8_0_and_q4_k_weights_and_enough_columns_only) {
    if (!avx512_gemm_handles(GGML_TYPE_Q8_0) || !avx512_gemm_handles(GGML_TYPE_Q4_K)) {
        GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
    }
    Operands wide({GGML_TYPE_Q8_0, 256, 64, AVX512_GEMM_MIN_COLS, 1}, 1);
    Operands narrow({GGML_TYPE_Q8_0, 256, 64, AVX512_GEMM_MIN_COLS - 1, 1}, 2);
    Operands q4k({GGML_TYPE_Q4_K, 256, 64, AVX512_GEMM_MIN_COLS, 1}, 3);
    Operands q5k({GGML_TYPE_Q5_K, 256, 64, AVX512_GEMM_MIN_COLS, 1}, 4);
    EXPECT_TRUE(avx512_gemm_applies(wide.w, wide.x));
    EXPECT_TRUE(avx512_gemm_applies(q4k.w, q4k.x));
    EXPECT_FALSE(avx512_gemm_applies(narrow.w, narrow.x)); // a GEMV: ggml's, bound by reading W
    EXPECT_FALSE(avx512_gemm_applies(wide.x, wide.x));     // 8 rows of weights: not a whole 32-row panel
    EXPECT_FALSE(avx512_gemm_applies(q5k.w, q5k.x));       // no kernel for Q5_K
    ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * y = ops::matmul(ctx, wide.w, wide.x);
    EXPECT_EQ(y->op, GGML_OP_CUSTOM);
    EXPECT_EQ(ops::matmul(ctx, narrow.w, narrow.x)->op, GGML_OP_MUL_MAT);
    ggml_free(ctx);
}

// ---- GEMV (decode: one activation column) ----

class Avx512Gemv : public ::testing::TestWithParam<Shape> {};

TEST_P(Avx512Gemv, Matches_ggml_mul_mat) {
    const Shape s = GetParam();
    if (!avx512_gemv_handles(s.type, s.K)) {
        GTEST_SKIP() << "this CPU has no AVX-512 GEMV for " << ggml_type_name(s.type);
    }
    Operands o(s, uint32_t(s.K * 29 + s.M * 5 + s.type));
    ASSERT_TRUE(avx512_gemv_applies(o.w, o.x));
    o.expect_matches_mul_mat(s, [&](ggml_context * c) { return avx512_gemv_op(c, o.w, o.x); });
}

// One block; block counts that leave 1-3 blocks past the 4 sums (Q8_0) or the groups of 4 heads (Q4_K);
// rows split unevenly over threads; row counts not a multiple of 4 (a TDT joint: vocab + blank + durations);
// the model's shapes; the longest row the kernel takes.
INSTANTIATE_TEST_SUITE_P(Shapes, Avx512Gemv,
                         ::testing::Values(Shape {Q8, 32, 4, 1, 1}, Shape {Q8, 96, 36, 1, 2}, Shape {Q8, 160, 100, 1, 3},
                                           Shape {Q8, 224, 8, 1, 4}, Shape {Q8, 2048, 1024, 1, 2},
                                           Shape {Q8, 640, 1030, 1, 2}, Shape {Q8, 64, 7, 1, 3}, Shape {Q4K, 256, 5, 1, 2},
                                           Shape {Q6K, 512, 9, 1, 2},
                                           Shape {Q8, 6144, 2048, 1, 2}, Shape {Q8, 16384, 12, 1, 2},
                                           Shape {Q4K, 256, 4, 1, 1}, Shape {Q4K, 512, 20, 1, 2},
                                           Shape {Q4K, 768, 36, 1, 2}, Shape {Q4K, 1280, 52, 1, 3},
                                           Shape {Q4K, 2048, 1024, 1, 2}, Shape {Q4K, 6144, 100, 1, 3},
                                           Shape {Q4K, 16384, 8, 1, 2}, Shape {Q6K, 256, 4, 1, 1},
                                           Shape {Q6K, 768, 36, 1, 2}, Shape {Q6K, 2048, 1024, 1, 2},
                                           Shape {Q6K, 6144, 100, 1, 3}, Shape {Q6K, 16384, 8, 1, 2}));

TEST(Avx512GemvPolicy, Taken_for_one_column_of_host_weights_of_our_types_with_a_fused_bias) {
    if (!avx512_gemv_handles(GGML_TYPE_Q8_0, 256)) {
        GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
    }
    Operands one({GGML_TYPE_Q8_0, 256, 64, 1, 2}, 5);
    Operands two({GGML_TYPE_Q8_0, 256, 64, 2, 2}, 6);
    Operands q5k({GGML_TYPE_Q5_K, 256, 64, 1, 2}, 7);
    Operands odd_rows({GGML_TYPE_Q8_0, 256, 66, 1, 2}, 8);
    EXPECT_TRUE(avx512_gemv_applies(one.w, one.x));
    EXPECT_FALSE(avx512_gemv_applies(two.w, two.x));           // two columns: ggml's
    EXPECT_FALSE(avx512_gemv_applies(q5k.w, q5k.x));           // no GEMV of ours for Q5_K
    EXPECT_TRUE(avx512_gemv_applies(odd_rows.w, odd_rows.x));  // any row count (a transducer joint's 1030)
    EXPECT_FALSE(avx512_gemv_handles(GGML_TYPE_Q8_0, 16384 + 32));

    ggml_init_params p = {ggml_tensor_overhead(), nullptr, true};
    ggml_context * bctx = ggml_init(p);
    ggml_tensor * b = ggml_new_tensor_1d(bctx, GGML_TYPE_F32, 64);
    ggml_backend_buffer_t bbuf = ggml_backend_alloc_ctx_tensors(bctx, one.cpu);
    std::vector<float> bias(64);
    for (size_t i = 0; i < bias.size(); ++i) {
        bias[i] = float(i % 11) - 5.5f;
    }
    ggml_backend_tensor_set(b, bias.data(), 0, bias.size() * sizeof(float));
    const std::vector<float> ref  = one.compute([&](ggml_context * c) { return ggml_add(c, ggml_mul_mat(c, one.w, one.x), b); });
    const std::vector<float> ours = one.compute([&](ggml_context * c) {
        ggml_tensor * y = ops::matmul(c, one.w, one.x, b);
        EXPECT_EQ(y->op, GGML_OP_CUSTOM); // the bias in the kernel, no add
        return y;
    });
    EXPECT_LE(test::max_abs_diff(ours, ref), 1e-5f * test::max_abs(ref));
    ggml_backend_buffer_free(bbuf);
    ggml_free(bctx);
}

// ---- The panel layout (Q8_0 and BF16 weights stored at load the way the GEMM unpacks them) ----

namespace {
class PanelLayout : public ::testing::TestWithParam<Shape> {};
} // namespace

// ops::matmul over a copy of W converted to the panel layout against ggml_mul_mat over W as the file
// has it, for one column (the panel GEMV), column tails and the decode batches; and the rows ops::embed
// reads from it against ggml_get_rows: the same values exactly (d * q, or the BF16 value widened, either way).
TEST_P(PanelLayout, Products_and_rows_match_the_file_layout) {
    const Shape s = GetParam();
    Operands o(s, uint32_t(s.K * 13 + s.M * 5 + s.N));
    ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * pctx = ggml_init(p);
    ggml_tensor * panels = ggml_new_tensor_2d(pctx, s.type, s.K, s.M);
    ggml_tensor * ids    = ggml_new_tensor_1d(pctx, GGML_TYPE_I32, 5);
    ggml_backend_buffer_t pbuf = ggml_backend_alloc_ctx_tensors(pctx, o.cpu);
    ggml_backend_tensor_copy(o.w, panels);
    if (!panel_layout_takes(panels)) {
        ggml_backend_buffer_free(pbuf);
        ggml_free(pctx);
        GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
    }
    to_panel_layout(panels, s.threads);
    ASSERT_TRUE(in_panel_layout(panels));
    o.expect_matches_mul_mat(s, [&](ggml_context * c) { return ops::matmul(c, panels, o.x); });
    const int32_t rows[5] = {0, int32_t(s.M - 1), 17 % int32_t(s.M), int32_t(s.M / 2), 31 % int32_t(s.M)};
    ggml_backend_tensor_set(ids, rows, 0, sizeof(rows));
    const std::vector<float> want = o.compute([&](ggml_context * c) { return ggml_get_rows(c, o.w, ids); });
    const std::vector<float> got  = o.compute([&](ggml_context * c) { return ops::embed(c, panels, ids); });
    EXPECT_EQ(got, want);
    ggml_backend_buffer_free(pbuf);
    ggml_free(pctx);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PanelLayout,
                         ::testing::Values(Shape {Q8, 32, 32, 1, 1}, Shape {Q8, 64, 96, 1, 2}, Shape {Q8, 256, 64, 3, 2},
                                           Shape {Q8, 2048, 1024, 8, 2}, Shape {Q8, 128, 160, 6, 3},
                                           Shape {Q8, 6144, 64, 1, 2}, Shape {Q8, 1024, 256, 33, 2},
                                           Shape {BF, 32, 32, 1, 1}, Shape {BF, 64, 96, 1, 2}, Shape {BF, 256, 64, 3, 2},
                                           Shape {BF, 2048, 1024, 8, 2}, Shape {BF, 128, 160, 6, 3},
                                           Shape {BF, 6144, 64, 1, 2}, Shape {BF, 1024, 256, 33, 2}));

// ---- Row shares that follow the threads' speeds (kernels/measured_shares.h) ----

// The split, driven by reported times: even at first; a thread reported slower gets fewer rows at the
// next call (half way to the measured speeds), and the shares always cover the rows exactly once, in
// thread order.
TEST(MeasuredShares, Slower_thread_gets_fewer_rows_and_rows_stay_covered) {
    int32_t words[MEASURED_SHARES_WORDS] = {};
    const int64_t M = 1000;
    auto split = [&](int nth) {
        std::vector<int64_t> sizes;
        int64_t expect_begin = 0;
        for (int t = 0; t < nth; ++t) {
            int64_t m0 = -1, m1 = -1;
            MeasuredShares(words, nth).rows(t, M, m0, m1);
            EXPECT_EQ(m0, expect_begin) << "thread " << t;
            EXPECT_LE(m0, m1);
            expect_begin = m1;
            sizes.push_back(m1 - m0);
        }
        EXPECT_EQ(expect_begin, M);
        return sizes;
    };
    EXPECT_EQ(split(2), (std::vector<int64_t> {500, 500}));
    // Thread 1 took twice as long for the same rows: it is half as fast, so 1/3 of the rows would even
    // the times; half way from 1/2 there is 5/12.
    MeasuredShares two(words, 2);
    two.report(1, 2000.0);
    EXPECT_EQ(split(2), (std::vector<int64_t> {500, 500})); // not before every thread has reported
    two.report(0, 1000.0);
    const std::vector<int64_t> after = split(2);
    EXPECT_NEAR(double(after[1]), 1000.0 * 5 / 12, 1.0);
    // Equal times from then on (the split evens them): the shares stay.
    for (int call = 0; call < 3; ++call) {
        MeasuredShares(words, 2).report(0, 1000.0);
        MeasuredShares(words, 2).report(1, 1000.0);
    }
    const std::vector<int64_t> steady = split(2);
    EXPECT_NEAR(double(steady[1]), double(after[1]), 1.0);
    // More threads than the words hold: even shares, and reports change nothing.
    int32_t untouched[MEASURED_SHARES_WORDS] = {};
    for (int t = 0; t < 8; ++t) {
        MeasuredShares(untouched, 8).report(t, 1000.0 * (t + 1));
    }
    for (int32_t w : untouched) {
        EXPECT_EQ(w, 0);
    }
}

// One graph computed again and again, as decode steps are: the shares move between calls (the threads'
// times differ, if only by noise), and every call's product still matches ggml's, over the file layout
// (Q4_K) and the panel layout (Q8_0).
TEST(MeasuredShares, Repeated_calls_of_one_node_match_ggml) {
    for (ggml_type type : {GGML_TYPE_Q4_K, GGML_TYPE_Q8_0}) {
        const Shape s {type, 2048, 1000 - 1000 % 32, 1, 2};
        if (!avx512_gemv_handles(type, s.K)) {
            GTEST_SKIP() << "this CPU has no AVX-512 GEMV";
        }
        Operands o(s, 5);
        const std::vector<float> ref = o.compute([&](ggml_context * c) { return ggml_mul_mat(c, o.w, o.x); });
        ggml_tensor * w = o.w;
        if (type == GGML_TYPE_Q8_0) {
            ASSERT_TRUE(panel_layout_takes(w));
            to_panel_layout(w, 2);
        }
        ggml_init_params p = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
        ggml_context * ctx = ggml_init(p);
        ggml_cgraph *  gf  = ggml_new_graph(ctx);
        ggml_tensor *  y   = ops::matmul(ctx, w, o.x);
        ggml_build_forward_expand(gf, y);
        ggml_gallocr_t alloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_gallocr_alloc_graph(alloc, gf));
        ggml_tensor * gemv = y; // the op under ops::matmul's reshapes
        while (gemv->op == GGML_OP_RESHAPE || gemv->op == GGML_OP_VIEW) {
            gemv = gemv->src[0];
        }
        ASSERT_EQ(gemv->op, GGML_OP_CUSTOM);
        bool moved = false;
        for (int call = 0; call < 40; ++call) {
            ASSERT_EQ(ggml_backend_graph_compute(o.cpu, gf), GGML_STATUS_SUCCESS);
            std::vector<float> out(size_t(ggml_nelements(y)));
            ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
            ASSERT_LE(test::max_abs_diff(out, ref), 1e-5f * test::max_abs(ref)) << ggml_type_name(type) << " call " << call;
            for (int i = 0; i < MEASURED_SHARES_WORDS; ++i) {
                moved = moved || gemv->op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t) - MEASURED_SHARES_WORDS + i] != 0;
            }
        }
        EXPECT_TRUE(moved) << ggml_type_name(type) << ": the node's shares never left their start";
        ggml_gallocr_free(alloc);
        ggml_free(ctx);
    }
}

// ops::matmuls over weights our GEMV takes: one op for all of them (the results views of its output),
// each result equal to its own ops::matmul exactly (each row is the same kernel's sum either way).
TEST(StackedGemv, Equals_separate_products_exactly) {
    if (!avx512_gemv_handles(GGML_TYPE_Q4_K, 512) || !avx512_gemv_handles(GGML_TYPE_Q6_K, 512)) {
        GTEST_SKIP() << "this CPU has no AVX-512 GEMV";
    }
    Operands q({GGML_TYPE_Q4_K, 512, 64, 1, 2}, 1), k({GGML_TYPE_Q4_K, 512, 32, 1, 2}, 2), v({GGML_TYPE_Q6_K, 512, 96, 1, 2}, 3);
    std::vector<float> separate;
    for (Operands * o : {&q, &k, &v}) {
        const std::vector<float> y = q.compute([&](ggml_context * c) { return ops::matmul(c, o->w, q.x); });
        separate.insert(separate.end(), y.begin(), y.end());
    }
    const std::vector<float> stacked = q.compute([&](ggml_context * c) {
        const std::vector<ggml_tensor *> ys = ops::matmuls(c, {q.w, k.w, v.w}, q.x);
        EXPECT_EQ(ys.size(), 3u);
        for (ggml_tensor * y : ys) {
            EXPECT_EQ(y->op, GGML_OP_VIEW);
            EXPECT_EQ(y->view_src, ys[0]->view_src); // one op
        }
        return ggml_concat(c, ggml_concat(c, ys[0], ys[1], 0), ys[2], 0);
    });
    EXPECT_EQ(stacked, separate);
}

// The activation rows for Q8_0 weights made in one pass: the bytes ggml's CPU quantizer gives (what a
// ggml cast to Q8_0 stores), and the per-block data avx512_gemm_prepare derives from them. Blocks of
// zeros, of one value (every value at the scale), of values on rounding ties, and of normal values.
TEST(Avx512GemmQ8_0Rows, Same_bytes_as_ggmls_quantizer_and_the_prepare_pass) {
    if (!avx512_gemm_handles(GGML_TYPE_Q8_0)) {
        GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
    }
    constexpr int64_t K = 512, N = 3;
    ASSERT_EQ(avx512_gemm_q8_0_row_bytes(K % 64 ? K : K + 32), 0) << "K not a multiple of 64 is refused";
    const int64_t row_bytes = avx512_gemm_q8_0_row_bytes(K), nb = K / 32;
    ASSERT_EQ(row_bytes, nb * 34 + avx512_gemm_aux_ints(GGML_TYPE_Q8_0, K) * 4);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> x(size_t(K * N));
    for (size_t i = 0; i < x.size(); ++i) {
        const size_t block = i / 32 % size_t(nb), j = i % 32;
        if (block == 0) {
            x[i] = 0.0f;
        } else if (block == 1) {
            x[i] = -3.5f;
        } else if (block == 2) { // scale 1 (127 / 127): every other value halfway between two integers
            x[i] = j == 0 ? 127.0f : float(int(j) - 16) + 0.5f;
        } else {
            x[i] = normal(rng);
        }
    }
    std::vector<uint8_t> ours(size_t(row_bytes * N));
    avx512_gemm_quantize_q8_0_rows(x.data(), size_t(K), K, 0, N, ours.data(), size_t(row_bytes));

    const size_t q8_bytes = size_t(nb) * 34;
    std::vector<uint8_t> ref_q(q8_bytes * size_t(N));
    for (int64_t n = 0; n < N; ++n) {
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(x.data() + n * K, ref_q.data() + size_t(n) * q8_bytes, K);
    }
    std::vector<int32_t> ref_aux(size_t(avx512_gemm_aux_ints(GGML_TYPE_Q8_0, K) * N));
    Avx512GemmArgs a;
    a.type = GGML_TYPE_Q8_0;
    a.w = nullptr;
    a.x = ref_q.data();
    a.x_row_bytes = q8_bytes;
    a.aux = ref_aux.data();
    a.aux_row_ints = size_t(avx512_gemm_aux_ints(GGML_TYPE_Q8_0, K));
    a.K = K;
    a.M = 32;
    a.N = N;
    a.y = nullptr;
    a.y_row_floats = 0;
    avx512_gemm_prepare(a, 0, 1);
    for (int64_t n = 0; n < N; ++n) {
        const uint8_t * row = ours.data() + size_t(n * row_bytes);
        EXPECT_EQ(std::vector<uint8_t>(row, row + q8_bytes),
                  std::vector<uint8_t>(ref_q.begin() + long(n) * long(q8_bytes), ref_q.begin() + long(n + 1) * long(q8_bytes)))
            << "row " << n;
        std::vector<int32_t> aux(size_t(a.aux_row_ints));
        std::memcpy(aux.data(), row + q8_bytes, aux.size() * sizeof(int32_t));
        EXPECT_EQ(aux, std::vector<int32_t>(ref_aux.begin() + long(n) * long(a.aux_row_ints),
                                            ref_aux.begin() + long(n + 1) * long(a.aux_row_ints)))
            << "row " << n;
    }
}
