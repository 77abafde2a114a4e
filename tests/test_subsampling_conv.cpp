// The FastConformer subsampling's 3x3 stride-2 convolutions (ops::conv_then_depthwise, ops::depthwise_conv:
// our kernels where they run, kernels/subsampling_conv.h, ggml's ops otherwise) against the formulas
// evaluated in double precision here, valid-length masks included. Both compute in F32: they agree to a
// few F32 roundings of the largest output (bound 1e-5).
#include "kernels/subsampling_conv.h"
#include "ops/conv.h"
#include "support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

int64_t halved(int64_t n) { return (n - 1) / 2 + 1; }

struct Case {
    int64_t W, H, C, valid; // image width (mels) and height (frames), channels, valid frames
};

void PrintTo(const Case & c, std::ostream * os) { *os << "W " << c.W << " H " << c.H << " C " << c.C << " valid " << c.valid; }

std::string case_name(const ::testing::TestParamInfo<Case> & i) {
    return "W" + std::to_string(i.param.W) + "_H" + std::to_string(i.param.H) + "_C" + std::to_string(i.param.C) + "_valid" +
           std::to_string(i.param.valid);
}

// A mask [C, 1, rows]: 1 for the first VALID rows, 0 after, as FastConformer::set_subsampling_inputs sets it.
std::vector<float> row_mask(ggml_tensor * m, int64_t valid) {
    std::vector<float> v(size_t(ggml_nelements(m)));
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = int64_t(i) / m->ne[0] < valid ? 1.0f : 0.0f;
    }
    ggml_backend_tensor_set(m, v.data(), 0, v.size() * sizeof(float));
    return v;
}

// One output of a depthwise 3x3 stride-2 convolution in double: IN(h, w) the input's value of this
// channel (h < H, w < W), TAP(t) the kernel's 9 values.
template <class In, class Tap> double depthwise_at(In in, Tap tap, int64_t h, int64_t w, int64_t H, int64_t W) {
    double acc = 0;
    for (int kh = 0; kh < 3; ++kh) {
        for (int kw = 0; kw < 3; ++kw) {
            const int64_t ih = 2 * h - 1 + kh, iw = 2 * w - 1 + kw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                acc += in(ih, iw) * tap(kh * 3 + kw);
            }
        }
    }
    return acc;
}

struct FusedOperands : test::CpuOperands {
    ggml_tensor *      x, * k, * b, * m, * dk, * db, * dm;
    std::vector<float> hx, hk, hb, hm, hdk, hdb, hdm;

    explicit FusedOperands(const Case & c) : CpuOperands(8, 11) {
        x  = add(c.W, c.H);
        k  = add(9, c.C);
        b  = add(c.C);
        m  = add(c.C, 1, halved(c.H));
        dk = add(9, c.C);
        db = add(c.C);
        dm = add(c.C, 1, halved(halved(c.H)));
        allocate();
        hx  = fill(x, 2.0f);
        hk  = fill(k, 0.5f);
        hb  = fill(b, 0.3f);
        hdk = fill(dk, 0.5f);
        hdb = fill(db, 0.3f);
        hm  = row_mask(m, halved(c.valid));
        hdm = row_mask(dm, halved(halved(c.valid)));
    }

    // The kernels as the model holds them: [3, 3, 1, C].
    static ggml_tensor * as_kernel(ggml_context * g, ggml_tensor * t) { return ggml_reshape_4d(g, t, 3, 3, 1, t->ne[1]); }

    ggml_tensor * build(ggml_context * g, bool ours) const {
        return ours ? conv_then_depthwise_op(g, x, as_kernel(g, k), b, m, as_kernel(g, dk), db, dm)
                    : ops::conv_then_depthwise(g, x, as_kernel(g, k), b, m, as_kernel(g, dk), db, dm);
    }

    // The formulas in double: [C, W'', H''].
    std::vector<float> expected(const Case & c) const {
        const int64_t W1 = halved(c.W), H1 = halved(c.H), W2 = halved(W1), H2 = halved(H1), C = c.C;
        std::vector<double> first(size_t(C * W1 * H1));
        for (int64_t h = 0; h < H1; ++h) {
            for (int64_t w = 0; w < W1; ++w) {
                for (int64_t ch = 0; ch < C; ++ch) {
                    const double v = hb[size_t(ch)] + depthwise_at([&](int64_t i, int64_t j) { return double(hx[size_t(i * c.W + j)]); },
                                                                   [&](int t) { return double(hk[size_t(ch * 9 + t)]); }, h, w, c.H, c.W);
                    first[size_t((h * W1 + w) * C + ch)] = std::max(v, 0.0) * hm[size_t(h * C)];
                }
            }
        }
        std::vector<float> out(size_t(C * W2 * H2));
        for (int64_t h = 0; h < H2; ++h) {
            for (int64_t w = 0; w < W2; ++w) {
                for (int64_t ch = 0; ch < C; ++ch) {
                    const double v = depthwise_at([&](int64_t i, int64_t j) { return first[size_t((i * W1 + j) * C + ch)]; },
                                                  [&](int t) { return double(hdk[size_t(ch * 9 + t)]); }, h, w, H1, W1);
                    out[size_t((h * W2 + w) * C + ch)] = float((v + hdb[size_t(ch)]) * hdm[size_t(h * C)]);
                }
            }
        }
        return out;
    }
};

struct DepthwiseOperands : test::CpuOperands {
    ggml_tensor *      x, * k, * b, * m;
    std::vector<float> hx, hk, hb, hm;

    explicit DepthwiseOperands(const Case & c) : CpuOperands(5, 12) {
        x = add(c.C, c.W, c.H);
        k = add(9, c.C);
        b = add(c.C);
        m = add(c.C, 1, halved(c.H));
        allocate();
        hx = fill(x, 2.0f);
        hk = fill(k, 0.5f);
        hb = fill(b, 0.3f);
        hm = row_mask(m, halved(c.valid));
    }

    ggml_tensor * build(ggml_context * g, bool ours) const {
        ggml_tensor * kernel = FusedOperands::as_kernel(g, k);
        return ours ? depthwise_conv_op(g, x, kernel, b, m) : ops::depthwise_conv(g, x, kernel, b, m);
    }

    std::vector<float> expected(const Case & c) const {
        const int64_t W2 = halved(c.W), H2 = halved(c.H), C = c.C;
        std::vector<float> out(size_t(C * W2 * H2));
        for (int64_t h = 0; h < H2; ++h) {
            for (int64_t w = 0; w < W2; ++w) {
                for (int64_t ch = 0; ch < C; ++ch) {
                    const double v = depthwise_at([&](int64_t i, int64_t j) { return double(hx[size_t((i * c.W + j) * C + ch)]); },
                                                  [&](int t) { return double(hk[size_t(ch * 9 + t)]); }, h, w, c.H, c.W);
                    out[size_t((h * W2 + w) * C + ch)] = float((v + hb[size_t(ch)]) * hm[size_t(h * C)]);
                }
            }
        }
        return out;
    }
};

// Whether this CPU runs the kernels for C channels (asked with operands of the released models' shapes).
bool kernels_run(int64_t C) {
    ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 128, 9);
    ggml_tensor * k    = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 1, C);
    ggml_tensor * m1   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, C, 1, 5);
    ggml_tensor * m2   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, C, 1, 3);
    const bool runs    = conv_then_depthwise_kernel_takes(x, k, m1, k, m2);
    ggml_free(ctx);
    return runs;
}

void expect_close(const std::vector<float> & ours, const std::vector<float> & ref) { test::expect_close_to(ours, ref, 1e-5f, 1.0f); }

class ConvThenDepthwise : public ::testing::TestWithParam<Case> {};
class DepthwiseConv : public ::testing::TestWithParam<Case> {};

} // namespace

TEST_P(ConvThenDepthwise, Kernel_matches_the_formulas) {
    const Case c = GetParam();
    FusedOperands o(c);
    if (!kernels_run(c.C)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return o.build(g, true); }), o.expected(c));
}

TEST_P(DepthwiseConv, Kernel_matches_the_formula) {
    const Case c = GetParam();
    DepthwiseOperands o(c);
    if (!kernels_run(c.C)) {
        GTEST_SKIP() << "this CPU has no AVX-512";
    }
    expect_close(test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return o.build(g, true); }), o.expected(c));
}

// 11 s of 128 mels into 256 channels (the released models'); the fixtures' 32 channels with frames past
// the valid length; odd and even sizes at every stage; a single frame; 80 mels.
INSTANTIATE_TEST_SUITE_P(Shapes, ConvThenDepthwise,
                         ::testing::Values(Case {128, 1101, 256, 1101}, Case {128, 201, 32, 190}, Case {128, 200, 32, 200},
                                           Case {80, 7, 16, 5}, Case {128, 1, 16, 1}, Case {9, 12, 48, 3}),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Shapes, DepthwiseConv,
                         ::testing::Values(Case {32, 276, 256, 276}, Case {32, 51, 32, 40}, Case {32, 50, 32, 50},
                                           Case {16, 1, 16, 1}, Case {5, 4, 48, 3}),
                         case_name);

// 24 channels: not whole vectors, so ggml's ops run (as on other backends).
TEST(SubsamplingConvGgml, Ops_match_the_formulas_where_the_kernels_do_not_run) {
    const Case fused {40, 33, 24, 30};
    FusedOperands f(fused);
    expect_close(test::compute_on_cpu(f.cpu, [&](ggml_context * g) { return f.build(g, false); }), f.expected(fused));
    const Case dw {10, 17, 24, 15};
    DepthwiseOperands d(dw);
    expect_close(test::compute_on_cpu(d.cpu, [&](ggml_context * g) { return d.build(g, false); }), d.expected(dw));
}
