#include "quantize_q8_k.h"

#include "quant_blocks.h" // and x86_simd.h

#include <cstring>

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

bool quantize_q8_k_available() { return cpu_has_avx512(); }

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void quantize_q8_k(const float * x, void * y, int64_t K) {
    constexpr int VECTORS = QK_K / 16;
    uint8_t * out = static_cast<uint8_t *>(y);
    const __m512 sign_off = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < K / QK_K; ++b, x += QK_K, out += Q8_K_BYTES) {
        __m512 v[VECTORS];
        __m512 amax_v = _mm512_setzero_ps();
        for (int i = 0; i < VECTORS; ++i) {
            v[i]   = _mm512_loadu_ps(x + 16 * i);
            amax_v = _mm512_max_ps(amax_v, _mm512_and_ps(v[i], sign_off));
        }
        const float amax = _mm512_reduce_max_ps(amax_v);
        if (!(amax > 0.0f)) {
            std::memset(out, 0, Q8_K_BYTES);
            continue;
        }
        // The first value of that magnitude, sign included (the reference keeps the first it meets).
        float max = 0.0f;
        for (int i = 0; i < VECTORS; ++i) {
            const __mmask16 at = _mm512_cmp_ps_mask(_mm512_and_ps(v[i], sign_off), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (at) {
                max = x[16 * i + __builtin_ctz(at)];
                break;
            }
        }
        const float  iscale = -127.0f / max;
        const __m512 scale  = _mm512_set1_ps(iscale);
        int8_t *     qs     = reinterpret_cast<int8_t *>(out + 4);
        int16_t      sums[16];
        for (int i = 0; i < VECTORS; ++i) {
            // The reference rounds by adding 1.5 * 2^23, which for |value| < 2^22 is the conversion's
            // own rounding to nearest, ties to even.
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], scale)), _mm512_set1_epi32(127));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(qs + 16 * i), _mm512_cvtepi32_epi8(q));
            sums[i] = int16_t(_mm512_reduce_add_epi32(q));
        }
        const float d = 1.0f / iscale;
        std::memcpy(out, &d, sizeof(d));
        std::memcpy(out + 4 + QK_K, sums, sizeof(sums));
    }
}

#else

bool quantize_q8_k_available() { return false; }
void quantize_q8_k(const float *, void *, int64_t) {}

#endif

} // namespace transcribe
