// Qwen3-ASR's chunk convolutions (ops::conv3x3_s2_single_channel, ops::im2col3x3_s2: our kernels,
// kernels/conv3x3_s2.h, and ggml's ops) against their definitions evaluated here: torch's conv2d(x, w,
// b, stride 2, padding 1) of a one-channel image, and the taps a 3x3 stride-2 convolution reads, laid
// out channels first, taps (kf, kt) outer, channels inner.
#include "kernels/conv3x3_s2.h"
#include "ops/conv.h"
#include "support.h"

#include <gtest/gtest.h>

#include <vector>

using namespace transcribe;

namespace {

int64_t halved(int64_t n) { return (n - 1) / 2 + 1; }

} // namespace

TEST(Conv3x3S2, Single_channel_conv_matches_the_definition) {
    const int64_t T = 37, F = 128, N = 3, C = 32; // odd T: the last output reads the padding
    for (bool kernel : {true, false}) {
        test::CpuOperands o(4, 5);
        ggml_tensor * x = o.add(T, F, N), * k = o.add(3, 3, C), * b = o.add(C);
        o.allocate();
        const std::vector<float> hx = o.fill(x, 1.0f), hk = o.fill(k, 0.5f), hb = o.fill(b, 0.1f);
        const std::vector<float> ours = test::compute_on_cpu(o.cpu, [&](ggml_context * g) {
            ggml_tensor * k4 = ggml_reshape_4d(g, k, 3, 3, 1, C);
            return kernel ? conv3x3_s2_single_channel_op(g, x, k4, b) : ops::conv3x3_s2_single_channel_ggml(g, x, k4, b);
        });
        const int64_t Fo = halved(F), To = halved(T);
        ASSERT_EQ(ours.size(), size_t(C * Fo * To * N));
        std::vector<float> ref(ours.size());
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t to = 0; to < To; ++to) {
                for (int64_t fo = 0; fo < Fo; ++fo) {
                    for (int64_t c = 0; c < C; ++c) {
                        double acc = hb[size_t(c)];
                        for (int kf = 0; kf < 3; ++kf) {
                            for (int kt = 0; kt < 3; ++kt) {
                                const int64_t f = 2 * fo + kf - 1, t = 2 * to + kt - 1;
                                if (f >= 0 && f < F && t >= 0 && t < T) {
                                    acc += double(hx[size_t((n * F + f) * T + t)]) * hk[size_t(c * 9 + kf * 3 + kt)];
                                }
                            }
                        }
                        ref[size_t(((n * To + to) * Fo + fo) * C + c)] = float(acc);
                    }
                }
            }
        }
        EXPECT_LE(test::max_abs_diff(ours, ref), 1e-5f) << (kernel ? "kernel" : "ggml");
    }
}

TEST(Conv3x3S2, Im2col_lays_out_the_taps_channels_first) {
    const int64_t C = 48, F = 15, T = 13, N = 2;
    for (bool kernel : {true, false}) {
        test::CpuOperands o(2, 9);
        ggml_tensor * x = o.add(C, F, T * N);
        o.allocate();
        const std::vector<float> hx = o.fill(x, 1.0f);
        const std::vector<float> ours = test::compute_on_cpu(o.cpu, [&](ggml_context * g) {
            ggml_tensor * x4 = ggml_reshape_4d(g, x, C, F, T, N);
            return kernel ? im2col3x3_s2_op(g, x4) : ops::im2col3x3_s2_ggml(g, x4);
        });
        const int64_t Fo = halved(F), To = halved(T);
        ASSERT_EQ(ours.size(), size_t(9 * C * Fo * To * N));
        std::vector<float> ref(ours.size());
        for (int64_t n = 0; n < N; ++n) {
            for (int64_t to = 0; to < To; ++to) {
                for (int64_t fo = 0; fo < Fo; ++fo) {
                    for (int kf = 0; kf < 3; ++kf) {
                        for (int kt = 0; kt < 3; ++kt) {
                            const int64_t f = 2 * fo + kf - 1, t = 2 * to + kt - 1;
                            for (int64_t c = 0; c < C; ++c) {
                                const bool inside = f >= 0 && f < F && t >= 0 && t < T;
                                ref[size_t((((n * To + to) * Fo + fo) * 9 + kf * 3 + kt) * C + c)] =
                                    inside ? hx[size_t(((n * T + t) * F + f) * C + c)] : 0.0f;
                            }
                        }
                    }
                }
            }
        }
        EXPECT_EQ(ours, ref) << (kernel ? "kernel" : "ggml");
    }
}
