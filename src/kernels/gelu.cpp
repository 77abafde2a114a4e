#include "gelu.h"

#include <algorithm>
#include <cmath>

#include "avx512_exp.h"
#include "x86_simd.h"

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define GELU_TARGET __attribute__((target("avx512f,avx512dq,fma")))

// Numerical Recipes' erfcc: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), for z >= 0.
constexpr float kErfcFit[] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                              0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};

GELU_TARGET inline __m512 gelu16(__m512 x) {
    const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
    const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(kErfcFit[9]);
    for (int k = 8; k >= 0; --k) {
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kErfcFit[k]));
    }
    // -z^2 + P(t) <= 0 for every z >= 0.
    const __m512 erfc = _mm512_mul_ps(t, exp_nonpositive(_mm512_fnmadd_ps(z, z, p)));
    const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 one_plus_erf = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), erfc);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), one_plus_erf);
}

// Elements are split over the threads in runs of whole cache lines.
void run_gelu_erf(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void *) {
    const int64_t n = ggml_nelements(a), per_thread = (n / nth + 15) / 16 * 16;
    const int64_t begin = std::min<int64_t>(n, ith * per_thread), end = std::min<int64_t>(n, begin + per_thread);
    gelu_erf_row(static_cast<const float *>(a->data) + begin, static_cast<float *>(dst->data) + begin, end - begin);
}

} // namespace

GELU_TARGET void gelu_erf_row(const float * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
    }
    if (i < n) {
        const __mmask16 tail = __mmask16((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, tail, gelu16(_mm512_maskz_loadu_ps(tail, x + i)));
    }
}

bool gelu_erf_kernel_takes(const ggml_tensor * x) {
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x);
}

ggml_tensor * gelu_erf_op(ggml_context * ctx, ggml_tensor * x) {
    // In place, as ggml's unary ops may be: no second buffer of an FFN's widest activations.
    return ggml_set_name(ggml_map_custom1_inplace(ctx, x, run_gelu_erf, GGML_N_TASKS_MAX, nullptr), "gelu_erf");
}

#else

void gelu_erf_row(const float * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
    }
}
bool gelu_erf_kernel_takes(const ggml_tensor *) { return false; }
ggml_tensor * gelu_erf_op(ggml_context *, ggml_tensor *) { return nullptr; }

#endif

} // namespace transcribe
