#include "first_conv.h"

#include "x86_simd.h"


namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define FC_TARGET __attribute__((target("avx512f")))

// src[0] = x [W, H], src[1] = kernel [3, 3, 1, C], src[2] = bias [C], src[3] = mask [C, 1, OH]. Output
// rows (time) are split over the threads; each output position is C lanes of 9 fused multiply-adds, a
// block of 16 channels at a time with its 9 taps held in registers. Nothing is allocated here: the op
// runs on ggml's worker threads.
FC_TARGET void run_first_conv(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t W = x->ne[0], H = x->ne[1], C = dst->ne[0], OW = dst->ne[1], OH = dst->ne[2];
    const float * xs   = static_cast<const float *>(x->data);
    const float * k    = static_cast<const float *>(dst->src[1]->data);
    const float * b    = static_cast<const float *>(dst->src[2]->data);
    const float * mask = static_cast<const float *>(dst->src[3]->data);
    const __m512i lane9 = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(9));
    for (int64_t oh = ith; oh < OH; oh += nth) {
        const __m512 m = _mm512_set1_ps(mask[oh * C]);
        for (int64_t c = 0; c < C; c += 16) {
            __m512 taps[9]; // kernel element t of channels c..c+15 (stored channel-major, 9 per channel)
            for (int t = 0; t < 9; ++t) {
                taps[t] = _mm512_i32gather_ps(lane9, k + c * 9 + t, 4);
            }
            const __m512 bias = _mm512_loadu_ps(b + c);
            for (int64_t ow = 0; ow < OW; ++ow) {
                __m512 acc = bias;
                for (int kh = 0; kh < 3; ++kh) {
                    const int64_t ih = 2 * oh - 1 + kh;
                    if (ih < 0 || ih >= H) {
                        continue;
                    }
                    for (int kw = 0; kw < 3; ++kw) {
                        const int64_t iw = 2 * ow - 1 + kw;
                        if (iw >= 0 && iw < W) {
                            acc = _mm512_fmadd_ps(_mm512_set1_ps(xs[ih * W + iw]), taps[kh * 3 + kw], acc);
                        }
                    }
                }
                float * out = static_cast<float *>(dst->data) + (oh * OW + ow) * C + c;
                _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_max_ps(acc, _mm512_setzero_ps()), m));
            }
        }
    }
}

} // namespace

bool first_conv_kernel_takes(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * mask) {
    const int64_t C = kernel->ne[3];
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[2] == 1 && x->ne[3] == 1 &&
           kernel->type == GGML_TYPE_F32 && ggml_is_contiguous(kernel) && kernel->ne[0] == 3 && kernel->ne[1] == 3 &&
           kernel->ne[2] == 1 && C % 16 == 0 && mask->type == GGML_TYPE_F32 && ggml_is_contiguous(mask) &&
           mask->ne[0] == C && mask->ne[1] == 1 && mask->ne[2] == (x->ne[1] - 1) / 2 + 1;
}

ggml_tensor * first_conv_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask) {
    ggml_tensor * args[] = {x, kernel, bias, mask};
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, kernel->ne[3], (x->ne[0] - 1) / 2 + 1, (x->ne[1] - 1) / 2 + 1, 1,
                                     args, 4, run_first_conv, GGML_N_TASKS_MAX, nullptr);
    return ggml_set_name(y, "first_conv");
}

#else

bool first_conv_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *) { return false; }
ggml_tensor * first_conv_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *) { return nullptr; }

#endif

} // namespace transcribe
