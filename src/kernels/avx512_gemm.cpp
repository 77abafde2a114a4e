#include "avx512_gemm.h"

#include <algorithm>
#include <cstring>

#include "avx512_exp.h"
#include "avx512_transpose.h" // and x86_simd.h
#include "quant_blocks.h"

#include "ggml-cpu.h"

namespace transcribe {

namespace {

constexpr int PANEL_ROWS = 32; // weight rows per panel: two 16-lane vectors

} // namespace

#if TRANSCRIBE_X86_SIMD

namespace {

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,f16c,fma")))

// Each activation row's data for the kernels (avx512_gemm_prepare): SUMS int32 per block, then one
// F32 scale per block.
inline int32_t * row_sums(const Avx512GemmArgs & a, int64_t n) { return a.aux + size_t(n) * a.aux_row_ints; }
template <int BLOCK, int SUMS> inline float * row_scales(const Avx512GemmArgs & a, int64_t n) {
    return reinterpret_cast<float *>(row_sums(a, n) + a.K / BLOCK * SUMS);
}

AVX512_TARGET inline __m512i broadcast4(const uint8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    return _mm512_set1_epi32(v);
}

// The 8 dwords at P of each of 16 rows ROW_BYTES apart, transposed: out[g] holds dword g of rows
// 0..15. Each row is read as one 32-byte load (a gather per output would fetch 16 lines per
// instruction, and rows whose stride is a multiple of 4 KiB all fall in one cache set).
AVX512_TARGET inline void transpose_16x8(const uint8_t * p, size_t row_bytes, __m512i out[8]) {
    __m512i r[8];
    for (int i = 0; i < 8; ++i) { // rows i and i + 8 in the two 256-bit halves
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + size_t(i) * row_bytes));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + size_t(i + 8) * row_bytes));
        r[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    // the AVX2 8x8 dword transpose, in both halves at once
    transpose_4x4_in_lanes(r);
    const __m512i first  = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i second = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int g = 0; g < 4; ++g) { // r[g] holds dwords g and g + 4 of rows 0-3 (8-11), r[g + 4] of rows 4-7 (12-15)
        out[g]     = _mm512_permutex2var_epi64(r[g], first, r[g + 4]);
        out[g + 4] = _mm512_permutex2var_epi64(r[g], second, r[g + 4]);
    }
}

// ---- Pieces of the register tiles: NR activation columns x the panel's 32 rows (2 vectors) ---------

#define TILE_INLINE AVX512_TARGET inline __attribute__((always_inline))

// The tile's starting sums: what y holds so far (a later chunk of blocks), else the bias, else zero.
template <int NR>
TILE_INLINE void tile_begin(const Avx512GemmArgs & a, int64_t m0, int64_t n0, bool accumulate, __m512 (&acc)[NR][2]) {
    if (a.residual) { // the epilogue's lines, a row apart (one L1 set when rows are 4 KiB): in flight while the sums run
        for (int c = 0; c < NR; ++c) {
            const float * r = a.residual + size_t(n0 + c) * a.residual_row_floats + m0;
            _mm_prefetch(reinterpret_cast<const char *>(r), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char *>(r + 16), _MM_HINT_T0);
        }
    }
    for (int c = 0; c < NR; ++c) {
        for (int h = 0; h < 2; ++h) {
            const float * y = a.y + size_t(n0 + c) * a.y_row_floats + m0 + 16 * h;
            acc[c][h] = accumulate ? _mm512_loadu_ps(y) : a.bias ? _mm512_loadu_ps(a.bias + m0 + 16 * h) : _mm512_setzero_ps();
        }
    }
}

// A Q8_0 activation row as avx512_gemm_quantize_q8_0_rows lays it out: its NB blocks, then the GEMM's
// per-block data (SUMS, then DX).
struct Q8_0Row {
    uint8_t * blocks;
    int32_t * sums;
    float *   dx;
};
inline Q8_0Row q8_0_row(void * row, int64_t nb) {
    uint8_t * blocks = static_cast<uint8_t *>(row);
    int32_t * sums   = reinterpret_cast<int32_t *>(blocks + size_t(nb) * Q8_0_BYTES);
    return {blocks, sums, reinterpret_cast<float *>(sums + nb)};
}

// Block B of a Q8_0 row from its 32 values V0, V1 as ggml's AVX quantizer makes it: the largest
// magnitude, d = amax / 127 stored as F16, the values times 127 / amax rounded to nearest even (not
// 1 / d, and not its scalar reference's roundf); then the block's -128 * sum and the F16 scale widened,
// as Q8_0Kernel::prepare_rows makes them.
AVX512_TARGET inline void quantize_q8_0_block(__m512 v0, __m512 v1, const Q8_0Row & row, int64_t b) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), magnitude));
    const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), magnitude));
    const float  amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    const uint16_t d = _cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    const __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    uint8_t * blk = row.blocks + size_t(b) * Q8_0_BYTES;
    std::memcpy(blk, &d, sizeof d);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(blk + 2), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(blk + 18), _mm512_cvtsepi32_epi8(i1));
    row.sums[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    row.dx[b]   = _cvtsh_ss(d);
}

// 16 floats rounded to BF16 as ggml's GGML_FP32_TO_BF16 rounds them: to nearest even, NaNs made quiet.
AVX512_TARGET inline __m256i round_to_bf16(__m512 v) {
    const __m512i u   = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

// The epilogue (Avx512GemmArgs) of columns [n0, n0 + NR)'s rows [m0, m0 + 32), whose sums (bias
// included) are ACC: each step over all the columns before the next, so that their dependency chains
// (SiLU's exponential and division, the quantizer's reductions) overlap.
template <int NR>
AVX512_TARGET __attribute__((noinline)) void epilogue(const Avx512GemmArgs & a, int64_t m0, int64_t n0, const __m512 (&acc)[NR][2]) {
    __m512 h[NR][2];
    for (int c = 0; c < NR; ++c) {
        for (int i = 0; i < 2; ++i) {
            h[c][i] = a.relu ? _mm512_max_ps(acc[c][i], _mm512_setzero_ps()) // x > 0 ? x : 0 (MAXPS gives 0 for -0 and NaN)
                             : acc[c][i];
        }
    }
    if (a.silu) {
        for (int c = 0; c < NR; ++c) {
            for (int i = 0; i < 2; ++i) {
                h[c][i] = silu_as_ggml(h[c][i]);
            }
        }
    }
    if (a.residual) {
        const __m512 scale = _mm512_set1_ps(a.residual_scale);
        for (int c = 0; c < NR; ++c) {
            for (int i = 0; i < 2; ++i) {
                const __m512 r = _mm512_loadu_ps(a.residual + size_t(n0 + c) * a.residual_row_floats + m0 + 16 * i);
                h[c][i] = _mm512_add_ps(r, a.residual_scale == 1.0f ? h[c][i] : _mm512_mul_ps(h[c][i], scale));
            }
        }
    }
    for (int c = 0; c < NR; ++c) {
        uint8_t * row = reinterpret_cast<uint8_t *>(a.y) + size_t(n0 + c) * a.y_row_bytes;
        switch (a.y_type) {
            case GGML_TYPE_Q8_0: quantize_q8_0_block(h[c][0], h[c][1], q8_0_row(row, a.M / QK8_0), m0 / QK8_0); break;
            case GGML_TYPE_BF16:
                for (int i = 0; i < 2; ++i) {
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + 2 * size_t(m0 + 16 * i)), round_to_bf16(h[c][i]));
                }
                break;
            default:
                for (int i = 0; i < 2; ++i) {
                    _mm512_storeu_ps(a.y + size_t(n0 + c) * a.y_row_floats + m0 + 16 * i, h[c][i]);
                }
        }
    }
}

// LAST: the sums are complete (the last chunk of K): then the epilogue runs on them.
template <int NR>
TILE_INLINE void tile_end(const Avx512GemmArgs & a, int64_t m0, int64_t n0, const __m512 (&acc)[NR][2], bool last) {
    if (last && avx512_gemm_has_epilogue(a)) {
        epilogue<NR>(a, m0, n0, acc);
        return;
    }
    for (int c = 0; c < NR; ++c) {
        for (int h = 0; h < 2; ++h) {
            _mm512_storeu_ps(a.y + size_t(n0 + c) * a.y_row_floats + m0 + 16 * h, acc[c][h]);
        }
    }
}

// Column c's activation bytes start at X[c] (OFFSET into each row), its per-row data at SUMS[c], XD[c].
template <int NR> struct TileColumns {
    const uint8_t * x[NR];
    const int32_t * sums[NR];
    const float *   xd[NR];
};

template <int NR, int BLOCK, int SUMS>
TILE_INLINE TileColumns<NR> tile_columns(const Avx512GemmArgs & a, int64_t n0, size_t offset) {
    TileColumns<NR> t;
    for (int c = 0; c < NR; ++c) {
        t.x[c] = static_cast<const uint8_t *>(a.x) + size_t(n0 + c) * a.x_row_bytes + offset;
        if constexpr (SUMS > 0) {
            t.sums[c] = row_sums(a, n0 + c);
            t.xd[c]   = row_scales<BLOCK, SUMS>(a, n0 + c);
        }
    }
    return t;
}

// dot[c][h] += the 4 weights per row in the panel vectors at P (rows 0-15, 16-31) x the 4 activation
// bytes of column c at offset XO.
template <int NR>
TILE_INLINE void dot_group(const uint8_t * p, const TileColumns<NR> & t, size_t xo, __m512i (&dot)[NR][2]) {
    const __m512i w0 = _mm512_load_si512(p), w1 = _mm512_load_si512(p + 64);
    for (int c = 0; c < NR; ++c) {
        const __m512i xb = broadcast4(t.x[c] + xo);
        dot[c][0] = _mm512_dpbusd_epi32(dot[c][0], w0, xb);
        dot[c][1] = _mm512_dpbusd_epi32(dot[c][1], w1, xb);
    }
}

// sum[c][h] += dot[c][h] * the rows' integer sub-block scales at SC.
template <int NR> TILE_INLINE void scale_int(const int32_t * sc, const __m512i (&dot)[NR][2], __m512i (&sum)[NR][2]) {
    const __m512i s0 = _mm512_load_si512(sc), s1 = _mm512_load_si512(sc + 16);
    for (int c = 0; c < NR; ++c) {
        sum[c][0] = _mm512_add_epi32(sum[c][0], _mm512_mullo_epi32(dot[c][0], s0));
        sum[c][1] = _mm512_add_epi32(sum[c][1], _mm512_mullo_epi32(dot[c][1], s1));
    }
}

// acc[c][h] += dot[c][h] * the rows' block scales at D * column c's scale of block B.
template <int NR>
TILE_INLINE void scale_float(const float * d, const TileColumns<NR> & t, int64_t b, const __m512i (&dot)[NR][2],
                             __m512 (&acc)[NR][2]) {
    const __m512 d0 = _mm512_load_ps(d), d1 = _mm512_load_ps(d + 16);
    for (int c = 0; c < NR; ++c) {
        const __m512 dx = _mm512_set1_ps(t.xd[c][b]);
        acc[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c][0]), _mm512_mul_ps(d0, dx), acc[c][0]);
        acc[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c][1]), _mm512_mul_ps(d1, dx), acc[c][1]);
    }
}

// As scale_float, with the rows' block scales as the 32 F16 values at H (the panel layout's).
template <int NR>
TILE_INLINE void scale_half(const uint8_t * h, const TileColumns<NR> & t, int64_t b, const __m512i (&dot)[NR][2],
                            __m512 (&acc)[NR][2]) {
    const __m512 d0 = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i *>(h)));
    const __m512 d1 = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i *>(h + 32)));
    for (int c = 0; c < NR; ++c) {
        const __m512 dx = _mm512_set1_ps(t.xd[c][b]);
        acc[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c][0]), _mm512_mul_ps(d0, dx), acc[c][0]);
        acc[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c][1]), _mm512_mul_ps(d1, dx), acc[c][1]);
    }
}

// Byte offsets of 16 consecutive weight rows, for gathers.
AVX512_TARGET inline __m512i row_offsets(size_t row_bytes) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(int(row_bytes)));
}

// ---- Q8_0 weights x Q8_0 activations -------------------------------------------------------------
//
// VPDPBUSD multiplies unsigned by signed bytes. The weights are made unsigned (w + 128: the sign bit
// flipped) and the activations stay signed; each block's sum then carries 128 * sum(x), which the
// accumulator starts from minus, so the integer result is exactly sum(w * x).
struct Q8_0Kernel {
    static constexpr int    TILE_COLS    = 4; // activation columns per register tile
    static constexpr int    BLOCK        = QK8_0;
    static constexpr size_t PANEL_BLOCK  = size_t(PANEL_ROWS) * QK8_0;  // unpacked bytes per block
    static constexpr size_t SCALES_BLOCK = PANEL_ROWS * sizeof(float);  // row scales per block
    static constexpr int    SUMS         = 1;                           // -128 * the block's activation sum
    static constexpr size_t SOURCE_BLOCK = Q8_0_BYTES;                  // weight bytes per block and row
    // The panel layout (weights stored unpacked, once, at load): per 32 rows and block, the unpacked
    // bytes then the rows' 32 F16 scales, 1088 bytes, as many as the 32 rows' blocks in the file.
    static constexpr size_t STORED_BLOCK = PANEL_BLOCK + PANEL_ROWS * 2;
    static_assert(STORED_BLOCK == PANEL_ROWS * Q8_0_BYTES, "the panel layout takes the file layout's bytes");

    AVX512_TARGET static void prepare_rows(const Avx512GemmArgs & a, int64_t n0, int64_t n1) {
        const int64_t nb = a.K / BLOCK;
        for (int64_t n = n0; n < n1; ++n) {
            int32_t * sums = row_sums(a, n);
            float *   dx   = row_scales<BLOCK, SUMS>(a, n);
            const uint8_t * row = static_cast<const uint8_t *>(a.x) + size_t(n) * a.x_row_bytes;
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t * blk = row + size_t(b) * Q8_0_BYTES;
                sums[b] = q8_0_minus_128_sum(blk + 2);
                dx[b]   = half_to_float(blk);
            }
        }
    }

    // Rows [m0, m0 + 32): per block, for each group of 4 values, 64 bytes with the group of rows
    // m0..m0+15, then 64 bytes for rows m0+16..m0+31; the 32 row scales as F32.
    AVX512_TARGET static void pack_panel(const Avx512GemmArgs & a, int64_t m0, int64_t b0, int64_t b1, uint8_t * panel, uint8_t * scales) {
        const __m512i rows = row_offsets(a.w_row_bytes);
        const __m512i sign = _mm512_set1_epi8(char(0x80));
        const uint8_t * base = static_cast<const uint8_t *>(a.w) + size_t(m0) * a.w_row_bytes;
        for (int64_t b = b0; b < b1; ++b) {
            uint8_t * out = panel + size_t(b - b0) * PANEL_BLOCK;
            float *   d   = reinterpret_cast<float *>(scales + size_t(b - b0) * SCALES_BLOCK);
            for (int half = 0; half < 2; ++half) {
                const uint8_t * blk = base + size_t(half) * 16 * a.w_row_bytes + size_t(b) * Q8_0_BYTES;
                __m512i v[8];
                transpose_16x8(blk + 2, a.w_row_bytes, v);
                for (int g = 0; g < BLOCK / 4; ++g) {
                    _mm512_store_si512(out + (size_t(g) * 2 + size_t(half)) * 64, _mm512_xor_si512(v[g], sign));
                }
                // 16 F16 scales, gathered as the low halves of 32-bit loads
                const __m512i h = _mm512_i32gather_epi32(rows, blk, 1);
                _mm512_store_ps(d + half * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
            }
        }
    }

    // STORED: PANEL holds blocks b0..b1 in the panel layout (SCALES unused); else as pack_panel made them.
    template <int NR, bool STORED = false>
    AVX512_TARGET static void tile(const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t * scales,
                                   int64_t m0, int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
        __m512 acc[NR][2];
        tile_begin<NR>(a, m0, n0, accumulate, acc);
        const TileColumns<NR> t = tile_columns<NR, BLOCK, SUMS>(a, n0, 2);
        for (int64_t b = b0; b < b1; ++b) {
            __m512i dot[NR][2];
            for (int c = 0; c < NR; ++c) {
                dot[c][0] = dot[c][1] = _mm512_set1_epi32(t.sums[c][b]);
            }
            const uint8_t * p = panel + size_t(b - b0) * (STORED ? STORED_BLOCK : PANEL_BLOCK);
            for (int g = 0; g < BLOCK / 4; ++g) {
                dot_group<NR>(p + g * 128, t, size_t(b) * Q8_0_BYTES + 4 * size_t(g), dot);
            }
            if constexpr (STORED) {
                scale_half<NR>(p + PANEL_BLOCK, t, b, dot, acc);
            } else {
                scale_float<NR>(reinterpret_cast<const float *>(scales + size_t(b - b0) * SCALES_BLOCK), t, b, dot, acc);
            }
        }
        tile_end<NR>(a, m0, n0, acc, b1 * BLOCK == a.K);
    }
};

// Q8_K activation rows (for Q4_K and Q6_K weights): each block's F32 scale, and what MAKE_SUMS derives
// from the block's 16 sums of 16 values.
template <int BLOCK, int SUMS, typename MakeSums>
void prepare_q8_k_rows(const Avx512GemmArgs & a, int64_t n0, int64_t n1, MakeSums make_sums) {
    for (int64_t n = n0; n < n1; ++n) {
        const uint8_t * row  = static_cast<const uint8_t *>(a.x) + size_t(n) * a.x_row_bytes;
        int32_t *       sums = row_sums(a, n);
        float *         dx   = row_scales<BLOCK, SUMS>(a, n);
        for (int64_t b = 0; b < a.K / BLOCK; ++b) {
            const uint8_t * blk = row + size_t(b) * Q8_K_BYTES;
            int16_t sums16[16];
            std::memcpy(&dx[b], blk, sizeof(float));
            std::memcpy(sums16, blk + 4 + QK_K, sizeof(sums16));
            make_sums(sums16, sums + b * SUMS);
        }
    }
}

// ---- Q4_K weights x Q8_K activations -------------------------------------------------------------
//
// A Q4_K weight is d * sc_j * q - dmin * m_j, q in 0..15 (unsigned: VPDPBUSD takes it as it is),
// sc_j and m_j 6-bit per 32-value sub-block j of a 256-value block. Per block and activation column:
//   sum(w * x) = dx * (d * sum_j sc_j * dot_j(q, xq) - dmin * sum_j m_j * sum_j(xq))
// with the integer sums exact: dot_j by VPDPBUSD, times sc_j by VPMULLD; the mins term by VPDPWSSD
// over (m_2i, m_2i+1) x (sum_2i, sum_2i+1) pairs of 16-bit values.
struct Q4_KKernel {
    static constexpr int    TILE_COLS    = 4;
    static constexpr int    BLOCK        = QK_K;
    static constexpr size_t PANEL_BLOCK  = size_t(PANEL_ROWS) * QK_K;
    static constexpr size_t SOURCE_BLOCK = Q4_K_BYTES;
    // per block: sc [8][32] int32, min pairs [4][32] int32, d [32] F32, dmin [32] F32
    static constexpr size_t SCALES_BLOCK = (8 + 4 + 1 + 1) * PANEL_ROWS * 4;
    static constexpr int    SUMS         = 4; // (sum_2i, sum_2i+1) pairs of 32-value sums, as int16

    static void prepare_rows(const Avx512GemmArgs & a, int64_t n0, int64_t n1) {
        prepare_q8_k_rows<BLOCK, SUMS>(a, n0, n1, [](const int16_t * sums16, int32_t * out) {
            for (int i = 0; i < SUMS; ++i) { // |sum of 32 bytes| <= 4096: fits 16 bits
                const int32_t lo = sums16[4 * i] + sums16[4 * i + 1], hi = sums16[4 * i + 2] + sums16[4 * i + 3];
                out[i] = int32_t(uint32_t(uint16_t(lo)) | (uint32_t(uint16_t(hi)) << 16));
            }
        });
    }

    // Where block B's unpacked values and row scales go in the panel chunk starting at block B0.
    struct Slot {
        uint8_t * out;
        int32_t * sc, * mins;
        float *   d, * dmin;
    };
    static Slot slot(uint8_t * panel, uint8_t * scales, int64_t b, int64_t b0) {
        Slot t;
        t.out  = panel + size_t(b - b0) * PANEL_BLOCK;
        t.sc   = reinterpret_cast<int32_t *>(scales + size_t(b - b0) * SCALES_BLOCK);
        t.mins = t.sc + 8 * PANEL_ROWS;
        t.d    = reinterpret_cast<float *>(t.mins + 4 * PANEL_ROWS);
        t.dmin = t.d + PANEL_ROWS;
        return t;
    }

    // Group g of sub-blocks 2*pair (low nibbles of V) and 2*pair+1 (high nibbles), rows of HALF.
    AVX512_TARGET static void store_nibbles(const Slot & t, int pair, int g, int half, __m512i v) {
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        _mm512_store_si512(t.out + ((size_t(2 * pair) * 8 + size_t(g)) * 2 + size_t(half)) * 64, _mm512_and_si512(v, low4));
        _mm512_store_si512(t.out + ((size_t(2 * pair + 1) * 8 + size_t(g)) * 2 + size_t(half)) * 64,
                           _mm512_and_si512(_mm512_srli_epi32(v, 4), low4));
    }

    // Row LANE's decoded 6-bit scales S and mins M, and its F16 d and dmin.
    static void store_row_scales(const Slot & t, int lane, const int32_t (&s)[8], const int32_t (&m)[8], const uint8_t * d,
                                 const uint8_t * dmin) {
        for (int j = 0; j < 8; ++j) {
            t.sc[j * PANEL_ROWS + lane] = s[j];
        }
        for (int i = 0; i < 4; ++i) {
            t.mins[i * PANEL_ROWS + lane] = m[2 * i] | (m[2 * i + 1] << 16);
        }
        t.d[lane]    = half_to_float(d);
        t.dmin[lane] = half_to_float(dmin);
    }

    // Rows [m0, m0 + 32): per block, sub-block j and group g of 4 values, 64 bytes of rows m0..m0+15
    // then 64 of rows m0+16..m0+31, one value per byte.
    AVX512_TARGET static void pack_panel(const Avx512GemmArgs & a, int64_t m0, int64_t b0, int64_t b1, uint8_t * panel, uint8_t * scales) {
        if (a.q4_k_x8) {
            pack_panel_x8(a, m0, b0, b1, panel, scales);
            return;
        }
        const uint8_t * base = static_cast<const uint8_t *>(a.w) + size_t(m0) * a.w_row_bytes;
        for (int64_t b = b0; b < b1; ++b) {
            const Slot t = slot(panel, scales, b, b0);
            for (int half = 0; half < 2; ++half) {
                const uint8_t * blk = base + size_t(half) * 16 * a.w_row_bytes + size_t(b) * Q4_K_BYTES;
                for (int pair = 0; pair < 4; ++pair) {
                    __m512i v[8];
                    transpose_16x8(blk + 16 + 32 * pair, a.w_row_bytes, v);
                    for (int g = 0; g < 8; ++g) {
                        store_nibbles(t, pair, g, half, v[g]);
                    }
                }
                for (int r = 0; r < 16; ++r) {
                    const uint8_t * row = blk + size_t(r) * a.w_row_bytes;
                    const uint8_t * q   = row + 4;
                    int32_t scale[8], m[8];
                    for (int j = 0; j < 8; ++j) { // ggml's get_scale_min_k4
                        scale[j] = j < 4 ? q[j] & 63 : (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
                        m[j]  = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
                    }
                    store_row_scales(t, half * 16 + r, scale, m, row, row + 2);
                }
            }
        }
    }

    // The same panel from ggml's CPU repack layout (repack.cpp, make_block_q4_Kx8 with 8-byte
    // interleave), where decode's GEMV reads Q4_K fastest: groups of 8 rows, each group's blocks in
    // order, each block 8 F16 d, 8 F16 dmin, 96 bytes of re-packed scales and mins, then the 8 rows'
    // nibble bytes interleaved 8 at a time.
    static constexpr size_t X8_BYTES = 16 + 16 + 96 + 8 * QK_K / 2;

    AVX512_TARGET static void pack_panel_x8(const Avx512GemmArgs & a, int64_t m0, int64_t b0, int64_t b1, uint8_t * panel, uint8_t * scales) {
        const int64_t nb = a.K / BLOCK;
        const size_t  group_bytes = size_t(nb) * X8_BYTES;
        // lane r: row r % 8 of group r / 8, at its first nibble byte
        const __m512i rows = _mm512_add_epi32(
            _mm512_mullo_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm512_set1_epi32(int(group_bytes))),
            _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 0, 8, 16, 24, 32, 40, 48, 56));
        const uint8_t * base = static_cast<const uint8_t *>(a.w) + size_t(m0 / 8) * group_bytes;
        for (int64_t b = b0; b < b1; ++b) {
            const Slot t = slot(panel, scales, b, b0);
            for (int half = 0; half < 2; ++half) {
                const uint8_t * blk = base + size_t(half) * 2 * group_bytes + size_t(b) * X8_BYTES;
                for (int pair = 0; pair < 4; ++pair) {
                    for (int g = 0; g < 8; ++g) {
                        const int o = 32 * pair + 4 * g; // byte offset in the row's nibbles
                        store_nibbles(t, pair, g, half, _mm512_i32gather_epi32(rows, blk + 128 + (o / 8) * 64 + o % 8, 1));
                    }
                }
                for (int r = 0; r < 16; ++r) {
                    const uint8_t * grp = blk + size_t(r / 8) * group_bytes;
                    const int       k   = r % 8;
                    int32_t scale[8], m[8];
                    for (int j = 0; j < 8; ++j) { // inverse of make_block_q4_Kx8's scale packing
                        const uint8_t * q = grp + 32 + (j < 4 ? j * 12 : 48 + (j - 4) * 12);
                        if (k < 4) {
                            scale[j] = q[k] & 63;
                            m[j]  = q[4 + k] & 63;
                        } else {
                            scale[j] = (q[8 + k - 4] & 15) | ((q[k - 4] >> 6) << 4);
                            m[j]  = (q[8 + k - 4] >> 4) | ((q[4 + k - 4] >> 6) << 4);
                        }
                    }
                    store_row_scales(t, half * 16 + r, scale, m, grp + 2 * k, grp + 16 + 2 * k);
                }
            }
        }
    }

    template <int NR>
    AVX512_TARGET static void tile(const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t * scales,
                                   int64_t m0, int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
        __m512 acc[NR][2];
        tile_begin<NR>(a, m0, n0, accumulate, acc);
        const TileColumns<NR> t = tile_columns<NR, BLOCK, SUMS>(a, n0, 4);
        for (int64_t b = b0; b < b1; ++b) {
            const uint8_t * p    = panel + size_t(b - b0) * PANEL_BLOCK;
            const int32_t * sc   = reinterpret_cast<const int32_t *>(scales + size_t(b - b0) * SCALES_BLOCK);
            const int32_t * mins = sc + 8 * PANEL_ROWS;
            const float *   d    = reinterpret_cast<const float *>(mins + 4 * PANEL_ROWS);
            __m512i sum[NR][2];
            for (int c = 0; c < NR; ++c) {
                sum[c][0] = sum[c][1] = _mm512_setzero_si512();
            }
            for (int j = 0; j < 8; ++j) {
                __m512i dot[NR][2];
                for (int c = 0; c < NR; ++c) {
                    dot[c][0] = dot[c][1] = _mm512_setzero_si512();
                }
                for (int g = 0; g < 8; ++g) {
                    dot_group<NR>(p + (j * 8 + g) * 128, t, size_t(b) * Q8_K_BYTES + 32 * size_t(j) + 4 * size_t(g), dot);
                }
                scale_int<NR>(sc + j * PANEL_ROWS, dot, sum);
            }
            __m512i mn[NR][2];
            for (int c = 0; c < NR; ++c) {
                mn[c][0] = mn[c][1] = _mm512_setzero_si512();
                for (int i = 0; i < 4; ++i) {
                    const __m512i xp = _mm512_set1_epi32(t.sums[c][b * SUMS + i]);
                    mn[c][0] = _mm512_dpwssd_epi32(mn[c][0], _mm512_load_si512(mins + i * PANEL_ROWS), xp);
                    mn[c][1] = _mm512_dpwssd_epi32(mn[c][1], _mm512_load_si512(mins + i * PANEL_ROWS + 16), xp);
                }
                mn[c][0] = _mm512_sub_epi32(_mm512_setzero_si512(), mn[c][0]); // the mins are subtracted
                mn[c][1] = _mm512_sub_epi32(_mm512_setzero_si512(), mn[c][1]);
            }
            scale_float<NR>(d, t, b, sum, acc);
            scale_float<NR>(d + PANEL_ROWS, t, b, mn, acc); // dmin
        }
        tile_end<NR>(a, m0, n0, acc, b1 * BLOCK == a.K);
    }
};

// ---- Q6_K weights x Q8_K activations -------------------------------------------------------------
//
// A Q6_K weight is d * sc_s * (u - 32), u in 0..63 (unsigned, as VPDPBUSD takes it), sc_s a signed
// 8-bit scale per 16-value sub-block s of a 256-value block. Per block and activation column:
//   sum(w * x) = dx * d * sum_s sc_s * (dot_s(u, xq) - 32 * sum_s(xq))
// with each sub-block's dot product started from -32 times its activation sum (Q8_K keeps the sums
// of 16), so that it is exactly sum((u - 32) * xq), then scaled by VPMULLD.
struct Q6_KKernel {
    static constexpr int    TILE_COLS    = 4;
    static constexpr int    BLOCK        = QK_K;
    static constexpr size_t PANEL_BLOCK  = size_t(PANEL_ROWS) * QK_K;
    static constexpr size_t SCALES_BLOCK = (16 + 1) * PANEL_ROWS * 4; // sc [16][32] int32, d [32] F32
    static constexpr int    SUMS         = 16;                        // -32 * sum of each 16 values
    static constexpr size_t SOURCE_BLOCK = Q6_K_BYTES;

    static void prepare_rows(const Avx512GemmArgs & a, int64_t n0, int64_t n1) {
        prepare_q8_k_rows<BLOCK, SUMS>(a, n0, n1, [](const int16_t * sums16, int32_t * out) {
            for (int i = 0; i < SUMS; ++i) {
                out[i] = -32 * int32_t(sums16[i]);
            }
        });
    }

    // Rows [m0, m0 + 32): per block, for each group of 4 values, 64 bytes of rows m0..m0+15 then 64 of
    // rows m0+16..m0+31, u = low 4 bits from ql | high 2 bits from qh, one value per byte.
    AVX512_TARGET static void pack_panel(const Avx512GemmArgs & a, int64_t m0, int64_t b0, int64_t b1, uint8_t * panel, uint8_t * scales) {
        const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
        const uint8_t * base = static_cast<const uint8_t *>(a.w) + size_t(m0) * a.w_row_bytes;
        for (int64_t b = b0; b < b1; ++b) {
            uint8_t * out = panel + size_t(b - b0) * PANEL_BLOCK;
            int32_t * sc  = reinterpret_cast<int32_t *>(scales + size_t(b - b0) * SCALES_BLOCK);
            float *   d   = reinterpret_cast<float *>(sc + 16 * PANEL_ROWS);
            for (int half = 0; half < 2; ++half) {
                const uint8_t * blk = base + size_t(half) * 16 * a.w_row_bytes + size_t(b) * Q6_K_BYTES;
                for (int n = 0; n < 2; ++n) { // each 128 values: ql[64n..], ql[64n+32..], qh[32n..]
                    __m512i lo[8], hi[8], h[8];
                    transpose_16x8(blk + 64 * n, a.w_row_bytes, lo);
                    transpose_16x8(blk + 64 * n + 32, a.w_row_bytes, hi);
                    transpose_16x8(blk + QK_K / 2 + 32 * n, a.w_row_bytes, h);
                    for (int g = 0; g < 8; ++g) {
                        const __m512i u[4] = {
                            _mm512_or_si512(_mm512_and_si512(lo[g], low4), _mm512_and_si512(_mm512_slli_epi32(h[g], 4), bits45)),
                            _mm512_or_si512(_mm512_and_si512(hi[g], low4), _mm512_and_si512(_mm512_slli_epi32(h[g], 2), bits45)),
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(lo[g], 4), low4), _mm512_and_si512(h[g], bits45)),
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(hi[g], 4), low4),
                                            _mm512_and_si512(_mm512_srli_epi32(h[g], 2), bits45)),
                        };
                        for (int k = 0; k < 4; ++k) { // values 128n + 32k + 4g .. +3
                            _mm512_store_si512(out + ((size_t(32 * n + 8 * k + g)) * 2 + size_t(half)) * 64, u[k]);
                        }
                    }
                }
                for (int r = 0; r < 16; ++r) {
                    const uint8_t * row = blk + size_t(r) * a.w_row_bytes;
                    for (int i = 0; i < 16; ++i) {
                        sc[i * PANEL_ROWS + half * 16 + r] = int8_t(row[QK_K / 2 + QK_K / 4 + i]);
                    }
                    d[half * 16 + r] = half_to_float(row + QK_K / 2 + QK_K / 4 + QK_K / 16);
                }
            }
        }
    }

    template <int NR>
    AVX512_TARGET static void tile(const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t * scales,
                                   int64_t m0, int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
        __m512 acc[NR][2];
        tile_begin<NR>(a, m0, n0, accumulate, acc);
        const TileColumns<NR> t = tile_columns<NR, BLOCK, SUMS>(a, n0, 4);
        for (int64_t b = b0; b < b1; ++b) {
            const uint8_t * p  = panel + size_t(b - b0) * PANEL_BLOCK;
            const int32_t * sc = reinterpret_cast<const int32_t *>(scales + size_t(b - b0) * SCALES_BLOCK);
            __m512i sum[NR][2];
            for (int c = 0; c < NR; ++c) {
                sum[c][0] = sum[c][1] = _mm512_setzero_si512();
            }
            for (int j = 0; j < 16; ++j) {
                __m512i dot[NR][2];
                for (int c = 0; c < NR; ++c) {
                    dot[c][0] = dot[c][1] = _mm512_set1_epi32(t.sums[c][b * SUMS + j]);
                }
                for (int g = 0; g < 4; ++g) {
                    dot_group<NR>(p + (j * 4 + g) * 128, t, size_t(b) * Q8_K_BYTES + 16 * size_t(j) + 4 * size_t(g), dot);
                }
                scale_int<NR>(sc + j * PANEL_ROWS, dot, sum);
            }
            scale_float<NR>(reinterpret_cast<const float *>(sc + 16 * PANEL_ROWS), t, b, sum, acc);
        }
        tile_end<NR>(a, m0, n0, acc, b1 * BLOCK == a.K);
    }
};

// ---- BF16 and F32 weights: no scales -------------------------------------------------------------
//
// Each dword holds 2 BF16 values or 1 F32 one. BF16: VDPBF16PS multiplies 2 pairs of BF16 per lane
// and adds them to an F32 accumulator, as ggml's BF16 dot product does (activations rounded to BF16
// by ggml's from_float first). F32 (the LoRA adapters, small convolutions): one FMA per value.
template <ggml_type TYPE> struct DwordKernel {
    static constexpr int    VALUES       = TYPE == GGML_TYPE_BF16 ? 2 : 1; // per dword
    static constexpr int    TILE_COLS    = 8;
    static constexpr int    BLOCK        = 32; // values per panel step
    static constexpr int    DWORDS       = BLOCK / VALUES;
    static constexpr size_t PANEL_BLOCK  = size_t(PANEL_ROWS) * DWORDS * 4;
    static constexpr size_t SCALES_BLOCK = 0;
    static constexpr size_t SOURCE_BLOCK = DWORDS * 4;

    static void prepare_rows(const Avx512GemmArgs &, int64_t, int64_t) {}

    // Rows [m0, m0 + 32): for each dword of values, 64 bytes with that dword of rows m0..m0+15, then
    // 64 bytes for rows m0+16..m0+31.
    //
    // Rows whose length is a multiple of 2 KiB (BF16 rows of 1024, 2048, 6144 values) all start in one
    // or two L1 sets, and 16 loads from one set evict each other before they are used: such rows are
    // first copied a slab at a time, line by line, into a staging buffer of a stride that spreads them
    // over the sets (5x faster unpacking from L2 on Zen 4).
    AVX512_TARGET static void pack_panel(const Avx512GemmArgs & a, int64_t m0, int64_t b0, int64_t b1, uint8_t * panel, uint8_t *) {
        static_assert(DWORDS % 16 == 0, "a block is whole 64-byte lines of each row");
        constexpr int64_t SLAB = 128, STAGE_STRIDE = SLAB * 4 + 64; // dwords per slab, staged row stride in bytes
        alignas(64) uint8_t stage[16 * STAGE_STRIDE];
        const bool staged = a.w_row_bytes % 2048 == 0;
        const uint8_t * base = static_cast<const uint8_t *>(a.w) + size_t(m0) * a.w_row_bytes;
        for (int64_t s0 = b0 * DWORDS; s0 < b1 * DWORDS; s0 += SLAB) {
            const int64_t slab = b1 * DWORDS - s0 < SLAB ? b1 * DWORDS - s0 : SLAB;
            for (int half = 0; half < 2; ++half) {
                const uint8_t * src = base + size_t(half) * 16 * a.w_row_bytes + size_t(s0) * 4;
                size_t stride = a.w_row_bytes;
                if (staged) {
                    for (int r = 0; r < 16; ++r) {
                        for (int64_t l = 0; l < slab * 4; l += 64) {
                            _mm512_store_si512(stage + r * STAGE_STRIDE + l, _mm512_loadu_si512(src + size_t(r) * a.w_row_bytes + l));
                        }
                    }
                    src    = stage;
                    stride = STAGE_STRIDE;
                }
                for (int64_t q0 = 0; q0 < slab; q0 += 16) {
                    __m512i v[16];
                    transpose_16x16(src + q0 * 4, stride, v);
                    for (int g = 0; g < 16; ++g) {
                        _mm512_store_si512(panel + (size_t(s0 + q0 - b0 * DWORDS + g) * 2 + size_t(half)) * 64, v[g]);
                    }
                }
            }
        }
    }

    template <int NR>
    AVX512_TARGET static void tile(const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t *, int64_t m0,
                                   int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
        __m512 acc[NR][2];
        tile_begin<NR>(a, m0, n0, accumulate, acc);
        const TileColumns<NR> t = tile_columns<NR, BLOCK, 0>(a, n0, size_t(b0) * DWORDS * 4);
        for (int64_t q = 0; q < (b1 - b0) * DWORDS; ++q) {
            const __m512i w0 = _mm512_load_si512(panel + q * 128), w1 = _mm512_load_si512(panel + q * 128 + 64);
            for (int c = 0; c < NR; ++c) {
                const __m512i xb = broadcast4(t.x[c] + 4 * q);
                if constexpr (TYPE == GGML_TYPE_BF16) {
                    acc[c][0] = _mm512_dpbf16_ps(acc[c][0], (__m512bh) w0, (__m512bh) xb);
                    acc[c][1] = _mm512_dpbf16_ps(acc[c][1], (__m512bh) w1, (__m512bh) xb);
                } else {
                    acc[c][0] = _mm512_fmadd_ps(_mm512_castsi512_ps(w0), _mm512_castsi512_ps(xb), acc[c][0]);
                    acc[c][1] = _mm512_fmadd_ps(_mm512_castsi512_ps(w1), _mm512_castsi512_ps(xb), acc[c][1]);
                }
            }
        }
        tile_end<NR>(a, m0, n0, acc, b1 * BLOCK == a.K);
    }
};

// A tile of WIDTH (1 .. NR) columns from N0.
template <typename Kernel, int NR>
AVX512_TARGET void narrow_tile(int64_t width, const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t * scales, int64_t m0,
                               int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
    if constexpr (NR > 0) {
        if (width == NR) {
            Kernel::template tile<NR>(a, panel, scales, m0, n0, b0, b1, accumulate);
        } else {
            narrow_tile<Kernel, NR - 1>(width, a, panel, scales, m0, n0, b0, b1, accumulate);
        }
    }
}

// Runs N columns as tiles through RUN_TILE(n0, width): TILE columns each, except that where N leaves
// a remainder the last TILE + remainder columns go as two tiles of about half that (a tile of one or
// two columns reads the panel's weights for as few products, at a fraction of the full tiles' rate).
template <int TILE, typename F> inline void column_tiles(int64_t N, F && run_tile) {
    const int64_t full = N % TILE != 0 && N > TILE ? N / TILE - 1 : N / TILE;
    int64_t n0 = 0;
    for (int64_t i = 0; i < full; ++i, n0 += TILE) {
        run_tile(n0, int64_t(TILE));
    }
    const int64_t left = N - n0;
    if (left > TILE) {
        run_tile(n0, (left + 1) / 2);
        run_tile(n0 + (left + 1) / 2, left / 2);
    } else if (left > 0) {
        run_tile(n0, left);
    }
}

// The tile of WIDTH columns from N0, TILE_COLS wide or narrower.
template <typename Kernel>
AVX512_TARGET inline void any_tile(int64_t width, const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t * scales,
                                   int64_t m0, int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
    if (width == Kernel::TILE_COLS) {
        Kernel::template tile<Kernel::TILE_COLS>(a, panel, scales, m0, n0, b0, b1, accumulate);
    } else {
        narrow_tile<Kernel, Kernel::TILE_COLS - 1>(width, a, panel, scales, m0, n0, b0, b1, accumulate);
    }
}

// The weight bytes a chunk is unpacked from: SPANS runs of BYTES, STRIDE apart, from START.
struct SourceSpans {
    const uint8_t * start  = nullptr;
    size_t          spans  = 0;
    size_t          stride = 0;
    size_t          bytes  = 0;
};

template <typename Kernel> SourceSpans source_spans(const Avx512GemmArgs & a, int64_t m0, int64_t b0, int64_t b1) {
    const uint8_t * w = static_cast<const uint8_t *>(a.w) + size_t(m0) * a.w_row_bytes;
    if (a.q4_k_x8) { // groups of 8 rows with their blocks interleaved
        return {w + size_t(b0) * 8 * Kernel::SOURCE_BLOCK, PANEL_ROWS / 8, 8 * a.w_row_bytes, size_t(b1 - b0) * 8 * Kernel::SOURCE_BLOCK};
    }
    return {w + size_t(b0) * Kernel::SOURCE_BLOCK, PANEL_ROWS, a.w_row_bytes, size_t(b1 - b0) * Kernel::SOURCE_BLOCK};
}

// Asks for part I of PARTS of the spans' cache lines to be brought into L2. (An inline-asm prefetch:
// GCC deletes a call to a function that only calls __builtin_prefetch, taking it for pure.)
inline void prefetch_part(const SourceSpans & s, int64_t i, int64_t parts) {
    const size_t lines_per_span = (s.bytes + 63) / 64, lines = s.spans * lines_per_span;
    for (size_t l = lines * size_t(i) / size_t(parts), end = lines * size_t(i + 1) / size_t(parts); l < end; ++l) {
        const char * p = reinterpret_cast<const char *>(s.start + (l / lines_per_span) * s.stride + (l % lines_per_span) * 64);
        asm volatile("prefetcht1 %0" : : "m"(*p));
    }
}

// Unpacked weights per chunk: 32 KiB (the size of L1), on the stack.
constexpr size_t CHUNK_BYTES = 32 * 1024;

// The shared driver: each thread takes every nth panel of 32 rows and walks its blocks a chunk at a
// time, unpacking the chunk into a buffer on its stack and running it against all columns, adding
// into y. Nothing is allocated: a failed allocation cannot be reported from inside a ggml op.
template <typename Kernel>
AVX512_TARGET void gemm(const Avx512GemmArgs & a, int ith, int nth) {
    constexpr int64_t chunk = int64_t(CHUNK_BYTES / Kernel::PANEL_BLOCK);
    static_assert(chunk >= 1, "a block's panel must fit the chunk");
    alignas(64) uint8_t panel[chunk * Kernel::PANEL_BLOCK];
    alignas(64) uint8_t scales[chunk * Kernel::SCALES_BLOCK + 64];
    const int64_t nb = a.K / Kernel::BLOCK;
    for (int64_t m0 = int64_t(ith) * PANEL_ROWS; m0 < a.M; m0 += int64_t(nth) * PANEL_ROWS) {
        for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
            const int64_t b1 = std::min(b0 + chunk, nb);
            Kernel::pack_panel(a, m0, b0, b1, panel, scales);
            // While the columns run, the next chunk (the next blocks of these rows, else this thread's
            // next panel) comes in from memory, which unpacking would otherwise wait for.
            const int64_t next_m0 = b1 < nb ? m0 : m0 + int64_t(nth) * PANEL_ROWS, next_b0 = b1 < nb ? b1 : 0;
            const SourceSpans next = next_m0 < a.M ? source_spans<Kernel>(a, next_m0, next_b0, std::min(next_b0 + chunk, nb)) : SourceSpans{};
            const int64_t tiles = (a.N + Kernel::TILE_COLS - 1) / Kernel::TILE_COLS;
            column_tiles<Kernel::TILE_COLS>(a.N, [&](int64_t n0, int64_t width) {
                prefetch_part(next, n0 / Kernel::TILE_COLS, tiles);
                any_tile<Kernel>(width, a, panel, scales, m0, n0, b0, b1, b0 > 0);
            });
        }
    }
}

// Weights stored in the panel layout, as the tiles of gemm_stored read them: each 32-row panel's blocks
// back to back, BLOCK_BYTES apart (Q8_0: the unpacked bytes and the rows' scales; BF16: the unpacked dwords).
struct StoredQ8_0 {
    static constexpr int    TILE_COLS   = Q8_0Kernel::TILE_COLS;
    static constexpr int    BLOCK       = Q8_0Kernel::BLOCK;
    static constexpr size_t BLOCK_BYTES = Q8_0Kernel::STORED_BLOCK;
    template <int NR> TILE_INLINE static void tile(const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t *, int64_t m0,
                                                   int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
        Q8_0Kernel::tile<NR, true>(a, panel, nullptr, m0, n0, b0, b1, accumulate);
    }
};

struct StoredBf16 {
    using Kernel = DwordKernel<GGML_TYPE_BF16>;
    static constexpr int    TILE_COLS   = Kernel::TILE_COLS;
    static constexpr int    BLOCK       = Kernel::BLOCK;
    static constexpr size_t BLOCK_BYTES = Kernel::PANEL_BLOCK;
    template <int NR> TILE_INLINE static void tile(const Avx512GemmArgs & a, const uint8_t * panel, const uint8_t *, int64_t m0,
                                                   int64_t n0, int64_t b0, int64_t b1, bool accumulate) {
        Kernel::tile<NR>(a, panel, nullptr, m0, n0, b0, b1, accumulate);
    }
};

// Weights in the panel layout: nothing to unpack, so the weights stream through the tiles at the speed
// memory gives them. Each thread takes a contiguous share of the panels (one stream of bytes that the
// hardware prefetcher follows; software prefetches only got in its way), and each tile runs a panel's
// whole rows, which the next tile re-reads from L2.
template <typename Stored> AVX512_TARGET void gemm_stored_panels(const Avx512GemmArgs & a, int64_t panel0, int64_t panel1) {
    const int64_t nb = a.K / Stored::BLOCK;
    for (int64_t pi = panel0; pi < panel1; ++pi) {
        const int64_t   m0    = pi * PANEL_ROWS;
        const uint8_t * panel = static_cast<const uint8_t *>(a.w) + size_t(pi) * size_t(nb) * Stored::BLOCK_BYTES;
        column_tiles<Stored::TILE_COLS>(a.N, [&](int64_t n0, int64_t width) { any_tile<Stored>(width, a, panel, nullptr, m0, n0, 0, nb, false); });
    }
}

// The stored GEMM of A's weight type (Q8_0 or BF16) over panels [panel0, panel1).
void gemm_stored(const Avx512GemmArgs & a, int64_t panel0, int64_t panel1) {
    if (a.type == GGML_TYPE_BF16) {
        gemm_stored_panels<StoredBf16>(a, panel0, panel1);
    } else {
        gemm_stored_panels<StoredQ8_0>(a, panel0, panel1);
    }
}

// Rows [n0, n1) of the activation data, the share of thread ITH of NTH.
template <typename Kernel> void prepare(const Avx512GemmArgs & a, int ith, int nth) {
    const int64_t per = (a.N + nth - 1) / nth, n0 = per * ith, n1 = n0 + per < a.N ? n0 + per : a.N;
    if (n0 < n1) {
        Kernel::prepare_rows(a, n0, n1);
    }
}

// (Every AVX-512 CPU also has F16C and FMA, which clang's __builtin_cpu_supports cannot name.)
bool cpu_has_avx512_vnni() {
    static const bool ok = cpu_has_avx512() && __builtin_cpu_supports("avx512vnni") && quant_layouts_match();
    return ok;
}

bool cpu_has_avx512_bf16() {
    static const bool ok = cpu_has_avx512_vnni() && __builtin_cpu_supports("avx512bf16");
    return ok;
}

} // namespace

bool avx512_gemm_handles(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q6_K: return cpu_has_avx512_vnni();
        case GGML_TYPE_BF16: return cpu_has_avx512_bf16();
        case GGML_TYPE_F32:  return cpu_has_avx512_vnni();
        default:             return false;
    }
}

int64_t avx512_gemm_aux_ints(ggml_type weight_type, int64_t K) {
    switch (weight_type) {
        case GGML_TYPE_Q8_0: return K / Q8_0Kernel::BLOCK * (Q8_0Kernel::SUMS + 1);
        case GGML_TYPE_Q4_K: return K / Q4_KKernel::BLOCK * (Q4_KKernel::SUMS + 1);
        case GGML_TYPE_Q6_K: return K / Q6_KKernel::BLOCK * (Q6_KKernel::SUMS + 1);
        default:             return 0;
    }
}

int64_t avx512_gemm_q8_0_row_bytes(int64_t K) {
    if (K <= 0 || K % 64 != 0) {
        return 0;
    }
    return K / QK8_0 * int64_t(Q8_0_BYTES) + avx512_gemm_aux_ints(GGML_TYPE_Q8_0, K) * int64_t(sizeof(int32_t));
}

AVX512_TARGET void avx512_gemm_quantize_q8_0_rows(const float * x, size_t x_row_floats, int64_t K, int64_t n0, int64_t n1,
                                                  void * out, size_t out_row_bytes) {
    const int64_t nb = K / QK8_0;
    for (int64_t n = n0; n < n1; ++n) {
        const float * in  = x + size_t(n) * x_row_floats;
        const Q8_0Row row = q8_0_row(static_cast<uint8_t *>(out) + size_t(n) * out_row_bytes, nb);
        for (int64_t b = 0; b < nb; ++b) {
            quantize_q8_0_block(_mm512_loadu_ps(in + 32 * b), _mm512_loadu_ps(in + 32 * b + 16), row, b);
        }
    }
}

AVX512_TARGET void avx512_gemm_round_bf16_rows(const float * x, size_t x_row_floats, int64_t K, int64_t n0, int64_t n1,
                                               void * out, size_t out_row_bytes) {
    for (int64_t n = n0; n < n1; ++n) {
        const float * in  = x + size_t(n) * x_row_floats;
        uint8_t *     row = static_cast<uint8_t *>(out) + size_t(n) * out_row_bytes;
        for (int64_t k = 0; k < K; k += 16) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + 2 * size_t(k)), round_to_bf16(_mm512_loadu_ps(in + k)));
        }
    }
}

void avx512_gemm_read_q8_0_rows(Avx512GemmArgs & a, const void * rows, size_t row_bytes) {
    a.x            = rows;
    a.x_row_bytes  = row_bytes;
    a.aux          = q8_0_row(const_cast<void *>(rows), a.K / QK8_0).sums;
    a.aux_row_ints = row_bytes / sizeof(int32_t);
}

void avx512_gemm_prepare(const Avx512GemmArgs & a, int ith, int nth) {
    switch (a.type) {
        case GGML_TYPE_Q8_0: prepare<Q8_0Kernel>(a, ith, nth); break;
        case GGML_TYPE_Q4_K: prepare<Q4_KKernel>(a, ith, nth); break;
        case GGML_TYPE_Q6_K: prepare<Q6_KKernel>(a, ith, nth); break;
        default: break;
    }
}

void avx512_gemm(const Avx512GemmArgs & a, int ith, int nth) {
    GGML_ASSERT(a.panels || a.y_type == GGML_TYPE_F32); // the other paths keep partial sums in y
    if (a.panels) {
        const int64_t panels = a.M / PANEL_ROWS;
        gemm_stored(a, panels * ith / nth, panels * (ith + 1) / nth);
        return;
    }
    switch (a.type) {
        case GGML_TYPE_Q8_0: gemm<Q8_0Kernel>(a, ith, nth); break;
        case GGML_TYPE_Q4_K: gemm<Q4_KKernel>(a, ith, nth); break;
        case GGML_TYPE_Q6_K: gemm<Q6_KKernel>(a, ith, nth); break;
        case GGML_TYPE_BF16: gemm<DwordKernel<GGML_TYPE_BF16>>(a, ith, nth); break;
        case GGML_TYPE_F32:  gemm<DwordKernel<GGML_TYPE_F32>>(a, ith, nth); break;
        default: break;
    }
}

bool avx512_panel_layout_takes(ggml_type type, int64_t K, int64_t M) {
    const bool shape = K % 32 == 0 && M % PANEL_ROWS == 0 && K <= AVX512_PANEL_MAX_K;
    switch (type) {
        case GGML_TYPE_Q8_0: return shape && cpu_has_avx512_vnni();
        case GGML_TYPE_BF16: return shape && cpu_has_avx512_bf16();
        default:             return false;
    }
}

void avx512_to_panel_layout(void * data, ggml_type type, int64_t K, int64_t p0, int64_t p1, uint8_t * scratch) {
    Avx512GemmArgs a;
    a.type = type;
    a.w    = scratch;
    a.K    = K;
    if (type == GGML_TYPE_BF16) {
        using Kn = DwordKernel<GGML_TYPE_BF16>;
        const int64_t nb = K / Kn::BLOCK;
        a.w_row_bytes = size_t(K) * 2;
        const size_t panel_bytes = size_t(PANEL_ROWS) * a.w_row_bytes;
        for (int64_t p = p0; p < p1; ++p) {
            uint8_t * region = static_cast<uint8_t *>(data) + size_t(p) * panel_bytes;
            std::memcpy(scratch, region, panel_bytes);
            Kn::pack_panel(a, 0, 0, nb, region, nullptr);
        }
        return;
    }
    using Kn = Q8_0Kernel;
    const int64_t nb = K / Kn::BLOCK;
    const size_t  row_bytes = size_t(nb) * Q8_0_BYTES, panel_bytes = size_t(PANEL_ROWS) * row_bytes;
    alignas(64) uint8_t scales[Kn::SCALES_BLOCK + 64];
    a.w_row_bytes = row_bytes;
    for (int64_t p = p0; p < p1; ++p) {
        uint8_t * region = static_cast<uint8_t *>(data) + size_t(p) * panel_bytes;
        std::memcpy(scratch, region, panel_bytes);
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t * out = region + size_t(b) * Kn::STORED_BLOCK;
            Kn::pack_panel(a, 0, b, b + 1, out, scales);
            for (int r = 0; r < PANEL_ROWS; ++r) { // the F16 scales as the file has them
                std::memcpy(out + Kn::PANEL_BLOCK + 2 * r, scratch + size_t(r) * row_bytes + size_t(b) * Q8_0_BYTES, 2);
            }
        }
    }
}

AVX512_TARGET void avx512_panel_rows(const void * w, ggml_type type, int64_t K, const int32_t * ids, int64_t n, float * out,
                                     int ith, int nth) {
    for (int64_t i = ith; i < n; i += nth) {
        const int64_t row = ids[i], half = row % PANEL_ROWS / 16, lane = row % 16;
        float *       dst = out + size_t(i) * size_t(K);
        if (type == GGML_TYPE_BF16) { // each dword of the row: its two values, 64 bytes per 16 rows apart
            const uint8_t * base = static_cast<const uint8_t *>(w) + size_t(row / PANEL_ROWS) * size_t(PANEL_ROWS) * size_t(K) * 2;
            for (int64_t q = 0; q < K / 2; ++q) {
                uint32_t dword;
                std::memcpy(&dword, base + (size_t(q) * 2 + size_t(half)) * 64 + size_t(lane) * 4, 4);
                const uint32_t lo = dword << 16, hi = dword & 0xffff0000u;
                std::memcpy(dst + 2 * q, &lo, 4);
                std::memcpy(dst + 2 * q + 1, &hi, 4);
            }
            continue;
        }
        using Kn = Q8_0Kernel;
        const int64_t   nb   = K / Kn::BLOCK;
        const uint8_t * base = static_cast<const uint8_t *>(w) + size_t(row / PANEL_ROWS) * size_t(nb) * Kn::STORED_BLOCK;
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * blk = base + size_t(b) * Kn::STORED_BLOCK;
            const float     d   = half_to_float(blk + Kn::PANEL_BLOCK + 2 * (row % PANEL_ROWS));
            for (int g = 0; g < Kn::BLOCK / 4; ++g) {
                const uint8_t * q = blk + (size_t(g) * 2 + size_t(half)) * 64 + size_t(lane) * 4;
                for (int j = 0; j < 4; ++j) {
                    dst[b * Kn::BLOCK + 4 * g + j] = d * float(int8_t(q[j] ^ 0x80));
                }
            }
        }
    }
}

void avx512_panel_gemv(const Avx512GemvArgs & g, int ith, int nth) {
    const int64_t N = std::min(g.N, AVX512_PANEL_SMALL_N);
    // On this thread's stack: a failed allocation could not be reported from inside a ggml op.
    alignas(64) uint8_t x_rows[AVX512_PANEL_SMALL_N * AVX512_PANEL_MAX_K * 2];
    alignas(64) int32_t aux[AVX512_PANEL_SMALL_N * (AVX512_PANEL_MAX_K / QK8_0) * (Q8_0Kernel::SUMS + 1)];
    Avx512GemmArgs a;
    a.type         = g.type;
    a.panels       = true;
    a.w            = g.w;
    a.x            = x_rows;
    a.bias         = g.bias;
    a.y            = g.y;
    a.K            = g.K;
    a.M            = g.M;
    a.N            = N;
    a.y_row_floats = N > 1 ? g.y_row_floats : size_t(g.M);
    if (g.type == GGML_TYPE_BF16) { // the activations rounded to BF16 as ggml's from_float rounds them
        a.x_row_bytes = size_t(g.K) * 2;
        for (int64_t n = 0; n < N; ++n) {
            ggml_get_type_traits_cpu(GGML_TYPE_BF16)->from_float(g.x + size_t(n) * g.x_row_floats, x_rows + size_t(n) * a.x_row_bytes, g.K);
        }
    } else { // quantized as ggml's from_float quantizes them, with the per-block data the tiles read
        using Kn = Q8_0Kernel;
        const int64_t nb = g.K / Kn::BLOCK;
        a.aux          = aux;
        a.aux_row_ints = size_t(nb) * (Kn::SUMS + 1);
        a.x_row_bytes  = size_t(nb) * Q8_0_BYTES;
        for (int64_t n = 0; n < N; ++n) {
            ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(g.x + size_t(n) * g.x_row_floats, x_rows + size_t(n) * a.x_row_bytes, g.K);
        }
        Kn::prepare_rows(a, 0, N);
    }
    MeasuredShares(g.shares, nth).run(ith, g.M / PANEL_ROWS, [&](int64_t panel0, int64_t panel1) { gemm_stored(a, panel0, panel1); });
}

#else

bool avx512_panel_layout_takes(ggml_type, int64_t, int64_t) { return false; }
void avx512_to_panel_layout(void *, ggml_type, int64_t, int64_t, int64_t, uint8_t *) {}
void avx512_panel_gemv(const Avx512GemvArgs &, int, int) {}
void avx512_panel_rows(const void *, ggml_type, int64_t, const int32_t *, int64_t, float *, int, int) {}
bool avx512_gemm_handles(ggml_type) { return false; }
int64_t avx512_gemm_aux_ints(ggml_type, int64_t) { return 0; }
void avx512_gemm_prepare(const Avx512GemmArgs &, int, int) {}
void avx512_gemm(const Avx512GemmArgs &, int, int) {}
int64_t avx512_gemm_q8_0_row_bytes(int64_t) { return 0; }
void avx512_gemm_quantize_q8_0_rows(const float *, size_t, int64_t, int64_t, int64_t, void *, size_t) {}
void avx512_gemm_round_bf16_rows(const float *, size_t, int64_t, int64_t, int64_t, void *, size_t) {}
void avx512_gemm_read_q8_0_rows(Avx512GemmArgs &, const void *, size_t) {}

#endif

ggml_type avx512_gemm_activation_type(ggml_type weight_type) {
    switch (weight_type) {
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q6_K: return GGML_TYPE_Q8_K;
        case GGML_TYPE_BF16: return GGML_TYPE_BF16;
        case GGML_TYPE_F32:  return GGML_TYPE_F32;
        default:             return GGML_TYPE_Q8_0;
    }
}

int64_t avx512_gemm_row_multiple(ggml_type weight_type) {
    return weight_type == GGML_TYPE_Q4_K || weight_type == GGML_TYPE_Q6_K ? QK_K : 32;
}

} // namespace transcribe
