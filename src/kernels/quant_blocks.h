// ggml's quantized block layouts (ggml-common.h) as our GEMM and GEMV kernels read them, and what both
// derive from them the same way.
#pragma once

#include "x86_simd.h"

#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace transcribe {

constexpr int    QK8_0      = 32;
constexpr size_t Q8_0_BYTES = 2 + QK8_0;                           // F16 scale, 32 signed bytes
constexpr int    QK_K       = 256;
constexpr size_t Q4_K_BYTES = 2 + 2 + 12 + QK_K / 2;               // F16 d, F16 dmin, 6-bit scales/mins, nibbles
constexpr size_t Q6_K_BYTES = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2; // low 4 bits, high 2 bits, 8-bit scales, F16 d
constexpr size_t Q8_K_BYTES = 4 + QK_K + 2 * 16;                   // F32 scale, 256 signed bytes, 16 sums of 16

// The layouts above are ggml's: checked before any kernel runs.
inline bool quant_layouts_match() {
    return ggml_type_size(GGML_TYPE_BF16) == 2 && ggml_type_size(GGML_TYPE_F32) == 4 &&
           ggml_type_size(GGML_TYPE_Q8_0) == Q8_0_BYTES && ggml_blck_size(GGML_TYPE_Q8_0) == QK8_0 &&
           ggml_type_size(GGML_TYPE_Q4_K) == Q4_K_BYTES && ggml_blck_size(GGML_TYPE_Q4_K) == QK_K &&
           ggml_type_size(GGML_TYPE_Q6_K) == Q6_K_BYTES && ggml_blck_size(GGML_TYPE_Q6_K) == QK_K &&
           ggml_type_size(GGML_TYPE_Q8_K) == Q8_K_BYTES && ggml_blck_size(GGML_TYPE_Q8_K) == QK_K;
}

#if TRANSCRIBE_X86_SIMD

// The F16 at P (a block scale) as F32.
__attribute__((target("f16c"))) inline float half_to_float(const uint8_t * p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof(h));
    return _cvtsh_ss(h);
}

// -128 times the sum of the 32 signed bytes at QS (a Q8_0 activation block's values): what VPDPBUSD
// adds to a block's dot product when the weights are made unsigned (w + 128), taken off beforehand.
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) inline int32_t q8_0_minus_128_sum(const uint8_t * qs) {
    const __m256i part = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs)));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(part), _mm256_extracti128_si256(part, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    return -128 * _mm_cvtsi128_si32(t);
}

#endif

} // namespace transcribe
