// e^x on 16 floats for the AVX-512 kernels' softmaxes, and the SiLU of the products' epilogues.
#pragma once

#include "x86_simd.h"

#include <cmath>

#if TRANSCRIBE_X86_SIMD

namespace transcribe {

// e^x for x <= 0: ggml_v_expf's reduction and polynomial (Arm's optimized routines, within 1.5 ulp),
// 2^n applied by VSCALEF, which also takes x below -104 to 0.
__attribute__((target("avx512f,fma"))) inline __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
    const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
    const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, lo), u, _mm512_mul_ps(b, _mm512_set1_ps(0x1.ffffecp-1f)));
    return _mm512_scalef_ps(_mm512_add_ps(j, _mm512_set1_ps(1.0f)), n);
}

// e^x for any x as ggml_v_expf computes it (the same operations in the same order, so the same bits):
// the reduction and polynomial above, 2^n applied by VSCALEF, and past |n| > 192 infinity or zero.
__attribute__((target("avx512f,fma"))) inline __m512 exp_as_ggml(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r), r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
    const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
    const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, lo), u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    const __mmask16 out_of_range = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (out_of_range == 0) {
        return res;
    }
    const __m512 limit = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ), _mm512_set1_ps(INFINITY),
                                              _mm512_setzero_ps());
    return _mm512_mask_blend_ps(out_of_range, res, limit);
}

// x / (1 + e^-x) as ggml's silu computes it for F32 rows (ggml_v_silu).
__attribute__((target("avx512f,fma"))) inline __m512 silu_as_ggml(__m512 x) {
    const __m512 e = exp_as_ggml(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

} // namespace transcribe

#endif
