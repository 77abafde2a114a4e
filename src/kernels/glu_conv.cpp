#include "glu_conv.h"

#include "avx512_exp.h" // and x86_simd.h

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define GLU_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,fma")))

constexpr int MAX_TAPS = 31;
constexpr int RING     = 32; // the gated inputs a block's outputs read: the last K time steps

// 1 / (1 + e^-x), from e^-|x| so that the exponential never overflows.
GLU_TARGET inline __m512 sigmoid(__m512 x) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
    const __m512 r = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    return _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), e, r);
}

// a * sigmoid(g) for channels c0..c0+15 of step T of Y [2d, steps]; zeros outside the steps.
GLU_TARGET inline __m512 gated(const ggml_tensor * y, int64_t d, int64_t c0, int64_t t) {
    if (t < 0 || t >= y->ne[1]) {
        return _mm512_setzero_ps();
    }
    const float * col = reinterpret_cast<const float *>(static_cast<const char *>(y->data) + size_t(t) * y->nb[1]);
    return _mm512_mul_ps(_mm512_loadu_ps(col + c0), sigmoid(_mm512_loadu_ps(col + d + c0)));
}

// Channels c0..c0+15 over all T steps. The gated input of step t lands in ring slot t % RING, ahead of
// the output that first reads it; steps outside 0..T-1 are zeros (the convolution's padding).
GLU_TARGET void block(const ggml_tensor * dst, int64_t c0) {
    const ggml_tensor * y = dst->src[0], *kernel = dst->src[1], *bias = dst->src[2];
    const int64_t d = dst->ne[0], T = dst->ne[1], K = kernel->ne[0], half = K / 2;
    const auto * w = static_cast<const float *>(kernel->data);
    const __m512i taps_of_lane = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                    _mm512_set1_epi32(int(K)));
    __m512 tap[MAX_TAPS];
    for (int64_t k = 0; k < K; ++k) {
        tap[k] = _mm512_i32gather_ps(taps_of_lane, w + c0 * K + k, 4);
    }
    const __m512 b = _mm512_loadu_ps(static_cast<const float *>(bias->data) + c0);
    alignas(64) float ring[RING][16];
    for (int64_t t = -half; t < half; ++t) {
        _mm512_store_ps(ring[t & (RING - 1)], gated(y, d, c0, t));
    }
    for (int64_t t = 0; t < T; ++t) {
        _mm512_store_ps(ring[(t + half) & (RING - 1)], gated(y, d, c0, t + half));
        __m512 acc = b;
        for (int64_t k = 0; k < K; ++k) {
            acc = _mm512_fmadd_ps(tap[k], _mm512_load_ps(ring[(t - half + k) & (RING - 1)]), acc);
        }
        float * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + size_t(t) * dst->nb[1]) + c0;
        _mm512_storeu_ps(out, _mm512_mul_ps(acc, sigmoid(acc)));
    }
}

// src: y, kernel, bias. Blocks of 16 channels are dealt to the threads in turn.
void run(ggml_tensor * dst, int ith, int nth, void *) {
    for (int64_t c0 = int64_t(ith) * 16; c0 < dst->ne[0]; c0 += int64_t(nth) * 16) {
        block(dst, c0);
    }
}

} // namespace

bool glu_conv_kernel_takes(const ggml_tensor * y, const ggml_tensor * kernel, const ggml_tensor * bias) {
    const int64_t d = kernel->ne[1], K = kernel->ne[0];
    return cpu_has_avx512() && y->type == GGML_TYPE_F32 && kernel->type == GGML_TYPE_F32 && bias->type == GGML_TYPE_F32 &&
           d % 16 == 0 && K % 2 == 1 && K <= MAX_TAPS && y->ne[0] == 2 * d && y->ne[2] == 1 && y->ne[3] == 1 &&
           y->nb[0] == sizeof(float) && y->nb[1] % sizeof(float) == 0 && ggml_is_contiguous(kernel) &&
           ggml_nelements(kernel) == K * d && ggml_is_contiguous(bias) && ggml_nelements(bias) == d;
}

ggml_tensor * glu_conv_op(ggml_context * ctx, ggml_tensor * y, ggml_tensor * kernel, ggml_tensor * bias) {
    ggml_tensor * args[] = {y, kernel, bias};
    ggml_tensor * o = ggml_custom_4d(ctx, GGML_TYPE_F32, kernel->ne[1], y->ne[1], 1, 1, args, 3, run, GGML_N_TASKS_MAX, nullptr);
    return ggml_set_name(o, "glu_conv");
}

#else

bool glu_conv_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *) { return false; }
ggml_tensor * glu_conv_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *) { return nullptr; }

#endif

} // namespace transcribe
