#include "subsampling_conv.h"

#include "x86_simd.h"

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define SC_TARGET __attribute__((target("avx512f")))

constexpr int64_t LANES = 16;
// The widest first-convolution output row the fused kernel keeps on its stack (three of them, 16
// channels each): half of up to 256 mel bands.
constexpr int64_t MAX_RING_WIDTH = 128;

int64_t halved(int64_t n) { return (n - 1) / 2 + 1; }

// Kernel element t of channels c..c+15 ([3, 3, 1, C] is stored channel-major, 9 per channel).
SC_TARGET void load_taps(const float * kernel, int64_t c, __m512 taps[9]) {
    const __m512i lane9 = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(9));
    for (int t = 0; t < 9; ++t) {
        taps[t] = _mm512_i32gather_ps(lane9, kernel + c * 9 + t, 4);
    }
}

// Row H of relu(conv(x) + bias) * mask for 16 channels, X a one-channel [W, H_IN] image: OUT[w * 16].
SC_TARGET void first_conv_row(const float * x, int64_t w_in, int64_t h_in, int64_t h, int64_t w_out, const __m512 taps[9],
                              __m512 bias, __m512 mask, float * out) {
    for (int64_t w = 0; w < w_out; ++w) {
        __m512 acc = bias;
        for (int kh = 0; kh < 3; ++kh) {
            const int64_t ih = 2 * h - 1 + kh;
            if (ih < 0 || ih >= h_in) {
                continue;
            }
            for (int kw = 0; kw < 3; ++kw) {
                const int64_t iw = 2 * w - 1 + kw;
                if (iw >= 0 && iw < w_in) {
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(x[ih * w_in + iw]), taps[kh * 3 + kw], acc);
                }
            }
        }
        _mm512_storeu_ps(out + w * LANES, _mm512_mul_ps(_mm512_max_ps(acc, _mm512_setzero_ps()), mask));
    }
}

// One output row of the depthwise convolution for 16 channels: ROWS[kh] is input row 2h - 1 + kh (null:
// padding), its position w at ROWS[kh] + w * STEP; OUT[w * OUT_STEP] for w < W_OUT. Summed as ggml's
// depthwise convolution sums (from zero, kernel rows then columns), then the bias and the mask.
SC_TARGET void depthwise_row(const float * const rows[3], int64_t step, int64_t w_in, int64_t w_out, const __m512 taps[9],
                             __m512 bias, __m512 mask, float * out, int64_t out_step) {
    for (int64_t w = 0; w < w_out; ++w) {
        __m512 acc = _mm512_setzero_ps();
        for (int kh = 0; kh < 3; ++kh) {
            if (!rows[kh]) {
                continue;
            }
            for (int kw = 0; kw < 3; ++kw) {
                const int64_t iw = 2 * w - 1 + kw;
                if (iw >= 0 && iw < w_in) {
                    acc = _mm512_fmadd_ps(_mm512_loadu_ps(rows[kh] + iw * step), taps[kh * 3 + kw], acc);
                }
            }
        }
        _mm512_storeu_ps(out + w * out_step, _mm512_mul_ps(_mm512_add_ps(acc, bias), mask));
    }
}

// src: x [W, H], kernel, bias, mask [C, 1, H'], dw_kernel, dw_bias, dw_mask [C, 1, H'']. Each thread
// takes a stretch of output rows and, 16 channels at a time, keeps the three first-convolution rows its
// current output row reads in a ring on its stack (row r in slot r mod 3), each made once as the rows
// advance. Nothing is allocated: the op runs on ggml's worker threads.
SC_TARGET void run_conv_then_depthwise(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t W = x->ne[0], H = x->ne[1], C = dst->ne[0], W2 = dst->ne[1], H2 = dst->ne[2];
    const int64_t W1 = halved(W), H1 = halved(H);
    const float * xs      = static_cast<const float *>(x->data);
    const float * kernel  = static_cast<const float *>(dst->src[1]->data);
    const float * bias    = static_cast<const float *>(dst->src[2]->data);
    const float * mask    = static_cast<const float *>(dst->src[3]->data);
    const float * dw_k    = static_cast<const float *>(dst->src[4]->data);
    const float * dw_bias = static_cast<const float *>(dst->src[5]->data);
    const float * dw_mask = static_cast<const float *>(dst->src[6]->data);
    float * out           = static_cast<float *>(dst->data);
    const int64_t begin = H2 * ith / nth, end = H2 * (ith + 1) / nth;
    alignas(64) float ring[3][MAX_RING_WIDTH * LANES];
    for (int64_t c = 0; c < C; c += LANES) {
        __m512 taps[9], dw_taps[9];
        load_taps(kernel, c, taps);
        load_taps(dw_k, c, dw_taps);
        const __m512 b = _mm512_loadu_ps(bias + c), dw_b = _mm512_loadu_ps(dw_bias + c);
        int64_t made = 2 * begin - 2; // the last first-convolution row in the ring
        for (int64_t h2 = begin; h2 < end; ++h2) {
            const float * rows[3];
            for (int kh = 0; kh < 3; ++kh) {
                const int64_t h1 = 2 * h2 - 1 + kh;
                rows[kh] = nullptr;
                if (h1 < 0 || h1 >= H1) {
                    continue;
                }
                float * slot = ring[h1 % 3];
                if (h1 > made) {
                    first_conv_row(xs, W, H, h1, W1, taps, b, _mm512_set1_ps(mask[h1 * C]), slot);
                    made = h1;
                }
                rows[kh] = slot;
            }
            depthwise_row(rows, LANES, W1, W2, dw_taps, dw_b, _mm512_set1_ps(dw_mask[h2 * C]), out + h2 * W2 * C + c, C);
        }
    }
}

// src: x [C, W, H], kernel, bias, mask [C, 1, H']. Output rows split over the threads.
SC_TARGET void run_depthwise(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t W = x->ne[1], H = x->ne[2], C = dst->ne[0], W2 = dst->ne[1], H2 = dst->ne[2];
    const float * xs     = static_cast<const float *>(x->data);
    const float * kernel = static_cast<const float *>(dst->src[1]->data);
    const float * bias   = static_cast<const float *>(dst->src[2]->data);
    const float * mask   = static_cast<const float *>(dst->src[3]->data);
    float * out          = static_cast<float *>(dst->data);
    const int64_t begin = H2 * ith / nth, end = H2 * (ith + 1) / nth;
    for (int64_t c = 0; c < C; c += LANES) {
        __m512 taps[9];
        load_taps(kernel, c, taps);
        const __m512 b = _mm512_loadu_ps(bias + c);
        for (int64_t h2 = begin; h2 < end; ++h2) {
            const float * rows[3];
            for (int kh = 0; kh < 3; ++kh) {
                const int64_t h = 2 * h2 - 1 + kh;
                rows[kh] = h >= 0 && h < H ? xs + h * W * C + c : nullptr;
            }
            depthwise_row(rows, C, W, W2, taps, b, _mm512_set1_ps(mask[h2 * C]), out + h2 * W2 * C + c, C);
        }
    }
}

bool is_kernel_3x3(const ggml_tensor * k, int64_t C) {
    return k->type == GGML_TYPE_F32 && ggml_is_contiguous(k) && k->ne[0] == 3 && k->ne[1] == 3 && k->ne[2] == 1 && k->ne[3] == C;
}

bool is_row_mask(const ggml_tensor * m, int64_t C, int64_t rows) {
    return m->type == GGML_TYPE_F32 && ggml_is_contiguous(m) && m->ne[0] == C && m->ne[1] == 1 && m->ne[2] == rows;
}

} // namespace

bool conv_then_depthwise_kernel_takes(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * mask,
                                      const ggml_tensor * dw_kernel, const ggml_tensor * dw_mask) {
    const int64_t C = kernel->ne[3];
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[2] == 1 && x->ne[3] == 1 &&
           halved(x->ne[0]) <= MAX_RING_WIDTH && C % LANES == 0 && is_kernel_3x3(kernel, C) && is_kernel_3x3(dw_kernel, C) &&
           is_row_mask(mask, C, halved(x->ne[1])) && is_row_mask(dw_mask, C, halved(halved(x->ne[1])));
}

ggml_tensor * conv_then_depthwise_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias,
                                     ggml_tensor * mask, ggml_tensor * dw_kernel, ggml_tensor * dw_bias, ggml_tensor * dw_mask) {
    ggml_tensor * args[] = {x, kernel, bias, mask, dw_kernel, dw_bias, dw_mask};
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, kernel->ne[3], halved(halved(x->ne[0])), halved(halved(x->ne[1])), 1,
                                     args, 7, run_conv_then_depthwise, GGML_N_TASKS_MAX, nullptr);
    return ggml_set_name(y, "conv_then_depthwise");
}

bool depthwise_conv_kernel_takes(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * mask) {
    const int64_t C = x->ne[0];
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[3] == 1 && C % LANES == 0 &&
           is_kernel_3x3(kernel, C) && is_row_mask(mask, C, halved(x->ne[2]));
}

ggml_tensor * depthwise_conv_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask) {
    ggml_tensor * args[] = {x, kernel, bias, mask};
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], halved(x->ne[1]), halved(x->ne[2]), 1, args, 4,
                                     run_depthwise, GGML_N_TASKS_MAX, nullptr);
    return ggml_set_name(y, "depthwise_conv");
}

#else

bool conv_then_depthwise_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *, const ggml_tensor *,
                                      const ggml_tensor *) {
    return false;
}
ggml_tensor * conv_then_depthwise_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *,
                                     ggml_tensor *, ggml_tensor *) {
    return nullptr;
}
bool depthwise_conv_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *) { return false; }
ggml_tensor * depthwise_conv_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *) { return nullptr; }

#endif

} // namespace transcribe
