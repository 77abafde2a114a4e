#include "q8_0_gemm.h"

#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRANSCRIBE_Q8_0_GEMM 1
#include <immintrin.h>
// GCC 12 takes the undefined first operand inside some AVX-512 intrinsics for an uninitialised read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace transcribe {

#if TRANSCRIBE_Q8_0_GEMM

namespace {

#define Q8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

constexpr int    QK          = 32;         // values per Q8_0 block
constexpr size_t BLOCK_BYTES = 2 + QK;     // F16 scale, 32 signed bytes
constexpr int    PANEL_ROWS  = 32;         // weight rows per panel: two 16-lane vectors
constexpr int    GROUPS      = QK / 4;     // VPDPBUSD takes 4 bytes per lane
constexpr size_t PANEL_BLOCK_BYTES = size_t(PANEL_ROWS) * QK; // one block of 32 rows, repacked

// Per-thread scratch, grown to the largest shape seen and reused (no allocation per call after that).
struct Scratch {
    std::vector<uint8_t> panel_storage; // [block][group][half] 64-byte vectors, + alignment slack
    std::vector<float>   w_scale;       // [block][32 rows]
    std::vector<float>   x_scale;       // [column][block]
    std::vector<int32_t> x_bias;        // [column][block]: -128 * sum of the block's bytes

    uint8_t * panel(size_t bytes) {
        if (panel_storage.size() < bytes + 64) {
            panel_storage.resize(bytes + 64);
        }
        const uintptr_t p = reinterpret_cast<uintptr_t>(panel_storage.data());
        return reinterpret_cast<uint8_t *>((p + 63) & ~uintptr_t(63));
    }
};

thread_local Scratch scratch;

Q8_TARGET inline float half_to_float(const uint8_t * p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof(h));
    return _cvtsh_ss(h);
}

// VPDPBUSD multiplies unsigned by signed bytes. The weights are made unsigned (w + 128, i.e. the sign
// bit flipped) and the activations stay signed; each block's sum then carries 128 * sum(x), which the
// accumulator starts from minus (x_bias), so the integer result is exactly sum(w * x).
Q8_TARGET void prepare_activations(const Q8_0GemmArgs & a, Scratch & s) {
    const int64_t nb = a.K / QK;
    s.x_scale.resize(size_t(a.N * nb));
    s.x_bias.resize(size_t(a.N * nb));
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t n = 0; n < a.N; ++n) {
        const uint8_t * row = static_cast<const uint8_t *>(a.x) + size_t(n) * a.x_row_bytes;
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * blk = row + size_t(b) * BLOCK_BYTES;
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 2));
            // sum of signed bytes: (1 unsigned) x (q signed), 4 at a time, then across the 8 lanes
            const __m256i part = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, q);
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(part), _mm256_extracti128_si256(part, 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
            s.x_bias[size_t(n * nb + b)]  = -128 * _mm_cvtsi128_si32(t);
            s.x_scale[size_t(n * nb + b)] = half_to_float(blk);
        }
    }
}

// Rows [m0, m0 + 32) into VNNI order: for each block and each group of 4 values, 64 bytes holding the
// group's 4 bytes of rows m0..m0+15, then 64 bytes for rows m0+16..m0+31.
Q8_TARGET void pack_panel(const Q8_0GemmArgs & a, int64_t m0, uint8_t * panel, float * w_scale) {
    const int64_t nb = a.K / QK;
    const __m512i row_offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                   _mm512_set1_epi32(int(a.w_row_bytes)));
    const __m512i sign = _mm512_set1_epi8(char(0x80));
    const uint8_t * base = static_cast<const uint8_t *>(a.w) + size_t(m0) * a.w_row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t * out = panel + size_t(b) * PANEL_BLOCK_BYTES;
        for (int half = 0; half < 2; ++half) {
            const uint8_t * blk = base + size_t(half) * 16 * a.w_row_bytes + size_t(b) * BLOCK_BYTES;
            for (int g = 0; g < GROUPS; ++g) {
                const __m512i v = _mm512_i32gather_epi32(row_offsets, blk + 2 + 4 * g, 1);
                _mm512_store_si512(reinterpret_cast<__m512i *>(out + (size_t(g) * 2 + size_t(half)) * 64),
                                   _mm512_xor_si512(v, sign));
            }
            // The scales: 16 F16 values gathered as the low halves of 32-bit loads.
            const __m512i d = _mm512_i32gather_epi32(row_offsets, blk, 1);
            _mm512_storeu_ps(w_scale + b * PANEL_ROWS + half * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));
        }
    }
}

// NR columns starting at n0 against the packed panel of rows m0..m0+31.
template <int NR>
Q8_TARGET void panel_tile(const Q8_0GemmArgs & a, const uint8_t * panel, const float * w_scale, const Scratch & s,
                          int64_t m0, int64_t n0) {
    const int64_t nb = a.K / QK;
    __m512 acc[NR][2];
    const uint8_t * xq[NR];
    for (int c = 0; c < NR; ++c) {
        acc[c][0] = _mm512_setzero_ps();
        acc[c][1] = _mm512_setzero_ps();
        xq[c] = static_cast<const uint8_t *>(a.x) + size_t(n0 + c) * a.x_row_bytes + 2;
    }
    const int32_t * bias  = s.x_bias.data() + n0 * nb;
    const float *   scale = s.x_scale.data() + n0 * nb;
    for (int64_t b = 0; b < nb; ++b) {
        __m512i dot[NR][2];
        for (int c = 0; c < NR; ++c) {
            dot[c][0] = dot[c][1] = _mm512_set1_epi32(bias[c * nb + b]);
        }
        const uint8_t * p = panel + size_t(b) * PANEL_BLOCK_BYTES;
        const size_t    xo = size_t(b) * BLOCK_BYTES;
        for (int g = 0; g < GROUPS; ++g) {
            const __m512i w0 = _mm512_load_si512(reinterpret_cast<const __m512i *>(p + g * 128));
            const __m512i w1 = _mm512_load_si512(reinterpret_cast<const __m512i *>(p + g * 128 + 64));
            for (int c = 0; c < NR; ++c) {
                int32_t x4;
                std::memcpy(&x4, xq[c] + xo + 4 * g, sizeof(x4));
                const __m512i xb = _mm512_set1_epi32(x4);
                dot[c][0] = _mm512_dpbusd_epi32(dot[c][0], w0, xb);
                dot[c][1] = _mm512_dpbusd_epi32(dot[c][1], w1, xb);
            }
        }
        const __m512 d0 = _mm512_loadu_ps(w_scale + b * PANEL_ROWS);
        const __m512 d1 = _mm512_loadu_ps(w_scale + b * PANEL_ROWS + 16);
        for (int c = 0; c < NR; ++c) {
            const __m512 dx = _mm512_set1_ps(scale[c * nb + b]);
            acc[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c][0]), _mm512_mul_ps(d0, dx), acc[c][0]);
            acc[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c][1]), _mm512_mul_ps(d1, dx), acc[c][1]);
        }
    }
    for (int c = 0; c < NR; ++c) {
        float * y = a.y + size_t(n0 + c) * a.y_row_floats + m0;
        _mm512_storeu_ps(y, acc[c][0]);
        _mm512_storeu_ps(y + 16, acc[c][1]);
    }
}

constexpr int TILE_COLS = 4;

Q8_TARGET void gemm_avx512(const Q8_0GemmArgs & a, int ith, int nth) {
    Scratch & s = scratch;
    prepare_activations(a, s);
    const int64_t nb = a.K / QK;
    s.w_scale.resize(size_t(nb) * PANEL_ROWS);
    uint8_t * panel = s.panel(size_t(nb) * PANEL_BLOCK_BYTES);
    for (int64_t m0 = int64_t(ith) * PANEL_ROWS; m0 < a.M; m0 += int64_t(nth) * PANEL_ROWS) {
        pack_panel(a, m0, panel, s.w_scale.data());
        int64_t n0 = 0;
        for (; n0 + TILE_COLS <= a.N; n0 += TILE_COLS) {
            panel_tile<TILE_COLS>(a, panel, s.w_scale.data(), s, m0, n0);
        }
        switch (a.N - n0) {
            case 3: panel_tile<3>(a, panel, s.w_scale.data(), s, m0, n0); break;
            case 2: panel_tile<2>(a, panel, s.w_scale.data(), s, m0, n0); break;
            case 1: panel_tile<1>(a, panel, s.w_scale.data(), s, m0, n0); break;
            default: break;
        }
    }
}

} // namespace

bool q8_0_gemm_supported() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
    return ok;
}

void q8_0_gemm(const Q8_0GemmArgs & a, int ith, int nth) { gemm_avx512(a, ith, nth); }

#else

bool q8_0_gemm_supported() { return false; }
void q8_0_gemm(const Q8_0GemmArgs &, int, int) {}

#endif

} // namespace transcribe
