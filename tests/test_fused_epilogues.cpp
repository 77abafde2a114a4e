// What the products' epilogues and the layer norm fuse (ops::Epilogue, ops::layer_norm with FEEDS,
// ops::to_bf16) against the same graph with them as ggml's separate ops: the same bits. The product's
// sums are the same kernel's either way, and each fused step is the separate op's arithmetic in the
// same order (ReLU and SiLU as ggml's, the scale then the residual add, ggml's Q8_0 quantizer and BF16
// rounding), so any difference is a fusion bug.
#include "kernels/avx512_exp.h"
#include "kernels/avx512_gemm.h"
#include "ops/matmul.h"
#include "ops/norms.h"
#include "support.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

using namespace transcribe;

namespace {

using test::compute_bytes_on_cpu;

// A layer's operands: W1 [K, M] and W2 [M, K] of TYPE (in the panel layout where PANELS), biases, X
// [K, N] and a residual R [M, N], on a 2-thread CPU backend.
struct Layer {
    ggml_backend_t        cpu = nullptr;
    ggml_context *        ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_tensor *         w1 = nullptr, * w2 = nullptr, * b1 = nullptr, * b2 = nullptr, * x = nullptr, * r = nullptr;
    ggml_tensor *         ln_w = nullptr, * ln_b = nullptr;

    Layer(ggml_type type, int64_t K, int64_t M, int64_t N, bool panels) {
        cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, 2);
        ggml_init_params p = {ggml_tensor_overhead() * 16, nullptr, true};
        ctx  = ggml_init(p);
        w1   = ggml_new_tensor_2d(ctx, type, K, M);
        w2   = ggml_new_tensor_2d(ctx, type, M, K);
        b1   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, M);
        b2   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K);
        x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
        r    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, M, N);
        ln_w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K);
        ln_b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K);
        buf  = ggml_backend_alloc_ctx_tensors(ctx, cpu);
        std::mt19937 rng(uint32_t(K * 7 + M * 3 + N + type));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        auto fill = [&](ggml_tensor * t, float spread, float offset) {
            std::vector<float> v(size_t(ggml_nelements(t)));
            for (float & f : v) {
                f = offset + spread * normal(rng);
            }
            if (t->type == GGML_TYPE_F32) {
                ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
            } else {
                std::vector<uint8_t> q(ggml_nbytes(t));
                ggml_quantize_chunk(t->type, v.data(), q.data(), 0, t->ne[1], t->ne[0], nullptr);
                ggml_backend_tensor_set(t, q.data(), 0, q.size());
            }
        };
        fill(w1, 0.05f, 0.0f);
        fill(w2, 0.05f, 0.0f);
        fill(b1, 0.5f, 0.0f);
        fill(b2, 0.5f, 0.0f);
        fill(x, 2.0f, 0.0f);
        fill(r, 1.0f, 0.0f);
        fill(ln_w, 0.3f, 1.0f);
        fill(ln_b, 0.2f, 0.0f);
        if (panels) {
            to_panel_layout(w1, 2);
            to_panel_layout(w2, 2);
        }
    }
    ~Layer() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        ggml_backend_free(cpu);
    }
};

struct Case {
    ggml_type type;
    bool      panels; // else the file layout (F32: our GEMM a chunk of K at a time)
    int64_t   K, M, N;
};

class FusedEpilogue : public ::testing::TestWithParam<Case> {};

ops::Epilogue epilogue(bool relu, bool silu, ggml_tensor * residual, float scale, ggml_tensor * feeds) {
    ops::Epilogue e;
    e.relu     = relu;
    e.silu     = silu;
    e.residual = residual;
    e.scale    = scale;
    e.feeds    = feeds;
    return e;
}

} // namespace

// Each epilogue on its own and the feed-forward chain (SiLU into the next product's activations, the
// residual after it), fused and as separate ops: the same bytes, and the fused graph has fewer nodes.
TEST_P(FusedEpilogue, Same_bits_as_separate_ops) {
    const Case c = GetParam();
    if (!avx512_gemm_handles(c.type) || (c.panels && !avx512_panel_layout_takes(c.type, c.K, c.M))) {
        GTEST_SKIP() << "this CPU has no AVX-512 kernel for " << ggml_type_name(c.type);
    }
    Layer l(c.type, c.K, c.M, c.N, c.panels);
    auto separate = [&](ggml_context * ctx, ggml_tensor * y, const ops::Epilogue & e) {
        y = e.relu ? ggml_relu(ctx, y) : y;
        y = e.silu ? ggml_silu(ctx, y) : y;
        return e.residual ? ggml_add(ctx, e.residual, e.scale == 1.0f ? y : ggml_scale(ctx, y, e.scale)) : y;
    };
    const ops::Epilogue cases[] = {epilogue(true, false, nullptr, 1.0f, nullptr), epilogue(false, true, nullptr, 1.0f, nullptr),
                                   epilogue(false, false, l.r, 0.5f, nullptr), epilogue(false, true, l.r, 1.0f, nullptr)};
    for (const ops::Epilogue & e : cases) {
        int fused_nodes = 0, separate_nodes = 0;
        const auto fused = compute_bytes_on_cpu(l.cpu, [&](ggml_context * ctx) { return ops::matmul(ctx, l.w1, l.x, l.b1, e); }, &fused_nodes);
        const auto want  = compute_bytes_on_cpu(l.cpu, [&](ggml_context * ctx) { return separate(ctx, ops::matmul(ctx, l.w1, l.x, l.b1), e); },
                                         &separate_nodes);
        EXPECT_TRUE(fused == want) << ggml_type_name(c.type) << " relu " << e.relu << " silu " << e.silu << " residual " << (e.residual != nullptr);
        EXPECT_LT(fused_nodes, separate_nodes) << "the epilogue ran as separate ops";
    }
    // x + 0.5 * w2(silu(w1 x + b1)) + b2, the hidden rows made straight into w2's activations.
    const ops::Epilogue silu_for_w2 = epilogue(false, true, nullptr, 1.0f, l.w2), half_residual = epilogue(false, false, l.x, 0.5f, nullptr);
    const auto fused = compute_bytes_on_cpu(l.cpu, [&](ggml_context * ctx) {
        return ops::matmul(ctx, l.w2, ops::matmul(ctx, l.w1, l.x, l.b1, silu_for_w2), l.b2, half_residual);
    });
    const auto want = compute_bytes_on_cpu(l.cpu, [&](ggml_context * ctx) {
        ggml_tensor * h = ggml_silu(ctx, ops::matmul(ctx, l.w1, l.x, l.b1));
        return ggml_add(ctx, l.x, ggml_scale(ctx, ops::matmul(ctx, l.w2, h, l.b2), 0.5f));
    });
    EXPECT_TRUE(fused == want) << ggml_type_name(c.type) << ": the feed-forward chain";
}

// The layer norm made straight into the activations of the products it feeds (q, k, v: three of them),
// against the F32 layer norm then the products' own cast.
TEST_P(FusedEpilogue, Layer_norm_into_activations_same_bits) {
    const Case c = GetParam();
    if (!avx512_gemm_handles(c.type) || (c.panels && !avx512_panel_layout_takes(c.type, c.K, c.M))) {
        GTEST_SKIP() << "this CPU has no AVX-512 kernel for " << ggml_type_name(c.type);
    }
    Layer l(c.type, c.K, c.M, c.N, c.panels);
    if (c.type != GGML_TYPE_F32) { // made in the activation type, not F32
        ggml_init_params p = {ggml_tensor_overhead() * 8, nullptr, true};
        ggml_context * ctx = ggml_init(p);
        ggml_tensor * h = ops::layer_norm(ctx, l.x, l.ln_w, l.ln_b, 1e-5f, {l.w1, l.w1});
        EXPECT_TRUE(is_q8_0_rows(h) || h->type == GGML_TYPE_BF16) << ggml_type_name(c.type);
        ggml_free(ctx);
    }
    auto products = [&](bool fused) {
        return compute_bytes_on_cpu(l.cpu, [&](ggml_context * ctx) {
            ggml_tensor * h = fused ? ops::layer_norm(ctx, l.x, l.ln_w, l.ln_b, 1e-5f, {l.w1, l.w1})
                                    : ops::layer_norm(ctx, l.x, l.ln_w, l.ln_b, 1e-5f);
            const auto ys = ops::matmuls(ctx, {l.w1, l.w1}, h, {l.b1, nullptr});
            return ggml_add(ctx, ys[0], ys[1]);
        });
    };
    EXPECT_TRUE(products(true) == products(false)) << ggml_type_name(c.type);
}

INSTANTIATE_TEST_SUITE_P(Types, FusedEpilogue,
                         ::testing::Values(Case {GGML_TYPE_Q8_0, true, 256, 128, 19}, Case {GGML_TYPE_Q8_0, true, 1024, 64, 33},
                                           Case {GGML_TYPE_BF16, true, 256, 128, 19}, Case {GGML_TYPE_BF16, true, 512, 96, 12},
                                           Case {GGML_TYPE_F32, false, 1024, 64, 19}, Case {GGML_TYPE_Q8_0, false, 256, 64, 17}));

// Rounding to BF16 against ggml's cast, bit for bit: ties to even both ways, values that round up
// into the next binade and to infinity, denormals, zeros of both signs, infinities, quiet and
// signalling NaNs of both signs.
TEST(ToBf16, Same_bits_as_ggmls_cast) {
    if (!avx512_gemm_handles(GGML_TYPE_BF16)) {
        GTEST_SKIP() << "this CPU has no AVX512-BF16";
    }
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f7fffffu, 0x7f7fffffu, 0xff7fffffu, 0x00008000u,
                                0x00018000u, 0x007fffffu, 0x00000001u, 0x80000000u, 0x00000000u, 0x7f800000u, 0xff800000u,
                                0x7fc00000u, 0x7f800001u, 0xffa00000u, 0x7fffffffu, 0x80018000u, 0xbf808000u};
    std::vector<uint32_t> bits(special, special + sizeof(special) / sizeof(special[0]));
    std::mt19937 rng(5);
    while (bits.size() % 16 != 0 || bits.size() < 4096) {
        bits.push_back(uint32_t(rng()));
    }
    test::CpuOperands o(1, 1);
    ggml_tensor * x = o.add(int64_t(bits.size()) / 4, 4);
    o.allocate();
    ggml_backend_tensor_set(x, bits.data(), 0, bits.size() * sizeof(uint32_t));
    const auto ours = compute_bytes_on_cpu(o.cpu, [&](ggml_context * ctx) { return ops::to_bf16(ctx, x); });
    const auto ggml = compute_bytes_on_cpu(o.cpu, [&](ggml_context * ctx) { return ggml_cast(ctx, x, GGML_TYPE_BF16); });
    ASSERT_EQ(ours.size(), bits.size() * 2);
    for (size_t i = 0; i < bits.size(); ++i) {
        ASSERT_TRUE(ours[2 * i] == ggml[2 * i] && ours[2 * i + 1] == ggml[2 * i + 1]) << std::hex << "0x" << bits[i];
    }
}

#if TRANSCRIBE_X86_SIMD
namespace {
__attribute__((target("avx512f,fma"))) void silu_rows(const float * x, float * y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        _mm512_storeu_ps(y + i, silu_as_ggml(_mm512_loadu_ps(x + i)));
    }
}
} // namespace

// The epilogue's SiLU against ggml's silu op over the whole range: tiny and huge magnitudes, where
// e^-x leaves float's range (ggml's branch to infinity or zero), infinities and NaN.
TEST(SiluAsGgml, Same_bits_as_ggmls_silu) {
    if (!cpu_has_avx512()) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    std::vector<float> v = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 89.0f, -89.0f, 104.0f, -104.0f, 140.0f, -140.0f,
                            1e30f, -1e30f, INFINITY, -INFINITY, NAN, 3.5f};
    for (float f = -200.0f; f < 200.0f; f += 0.37f) {
        v.push_back(f);
    }
    while (v.size() % 16) {
        v.push_back(0.5f);
    }
    test::CpuOperands o(1, 1);
    ggml_tensor * x = o.add(int64_t(v.size()));
    o.allocate();
    ggml_backend_tensor_set(x, v.data(), 0, v.size() * sizeof(float));
    const std::vector<float> ggml = test::compute_on_cpu(o.cpu, [&](ggml_context * ctx) { return ggml_silu(ctx, x); });
    std::vector<float> ours(v.size());
    silu_rows(v.data(), ours.data(), v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        EXPECT_EQ(std::memcmp(&ours[i], &ggml[i], sizeof(float)), 0) << "x " << v[i] << ": ours " << ours[i] << ", ggml " << ggml[i];
    }
}
#endif
