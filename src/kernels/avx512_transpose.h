// In-register dword transposes for the AVX-512 kernels (their panels and query blocks).
#pragma once

#include "x86_simd.h"

#if TRANSCRIBE_X86_SIMD

#include <cstddef>
#include <cstdint>

namespace transcribe {

#define TRANSPOSE_TARGET __attribute__((target("avx512f")))

// The first two steps of a dword transpose, in place on N registers (N a multiple of 4): afterwards,
// in each 128-bit lane l, v[4i + j] holds dword 4l + j of the lane's 4 rows 4i..4i+3 (v[4i + k] held row k).
template <int N> TRANSPOSE_TARGET inline void transpose_4x4_in_lanes(__m512i (&v)[N]) {
    __m512i t[N];
    for (int i = 0; i < N / 2; ++i) {
        t[2 * i]     = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < N / 4; ++i) {
        v[4 * i]     = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        v[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        v[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        v[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
}

// The 16 dwords at P of each of 16 rows ROW_BYTES apart, transposed: out[g] holds dword g of rows
// 0..15. Each row's 64 bytes are one load.
TRANSPOSE_TARGET inline void transpose_16x16(const uint8_t * p, size_t row_bytes, __m512i out[16]) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; ++i) {
        r[i] = _mm512_loadu_si512(p + size_t(i) * row_bytes);
    }
    transpose_4x4_in_lanes(r); // r[4i + j]: in each 128-bit lane l, dword 4l + j of rows 4i..4i+3
    // t[8i + j]: lanes 0 and 2 of rows 8i..8i+3 and 8i+4..8i+7 (dwords j, 8 + j); t[8i + 4 + j]: lanes 1, 3
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 4; ++j) {
            t[8 * i + j]     = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
        }
    }
    for (int j = 0; j < 4; ++j) {
        out[j]      = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        out[j + 8]  = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
        out[j + 4]  = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0x88);
        out[j + 12] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0xdd);
    }
}

} // namespace transcribe

#endif
