#include "avx512_gemv.h"

#include "quant_blocks.h" // and x86_simd.h
#include "measured_shares.h"
#include "quantize_q8_k.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <cstring>

namespace transcribe {

namespace {
constexpr int     CHAINS = 4;     // independent F32 sums per Q8_0 row: FMA latency / throughput
constexpr int64_t MAX_K  = 16384; // the activation's quantized copy lives on the stack
} // namespace

#if TRANSCRIBE_X86_SIMD

namespace {

#define GEMV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

bool cpu_has_vnni() {
    static const bool ok = cpu_has_avx512() && __builtin_cpu_supports("avx512vnni") && quant_layouts_match();
    return ok;
}

GEMV_TARGET inline __m256 broadcast_half(const uint8_t * p) { return _mm256_set1_ps(half_to_float(p)); }

GEMV_TARGET inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Q8_0 x Q8_0. VPDPBUSD multiplies unsigned by signed bytes: the weights are made unsigned (w + 128,
// the sign bit flipped), so each block's sum carries 128 * sum(x), which the block's integer sum starts
// from minus; the result is exactly sum(w * x).
GEMV_TARGET void q8_0_gemv(const Avx512GemvArgs & a, int64_t m0, int64_t m1) {
    const int64_t nb = a.K / QK8_0;
    // The activation as ggml's from_float quantizes it, split into 32 aligned bytes per block, the
    // block's scale and -128 times its sum.
    alignas(64) uint8_t x_blocks[MAX_K / QK8_0 * Q8_0_BYTES];
    alignas(64) int8_t  xq[MAX_K];
    alignas(64) int32_t minus_128_sum[MAX_K / QK8_0];
    alignas(64) float   dx[MAX_K / QK8_0];
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(a.x, x_blocks, a.K);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = x_blocks + size_t(b) * Q8_0_BYTES;
        std::memcpy(xq + b * QK8_0, blk + 2, QK8_0);
        minus_128_sum[b] = q8_0_minus_128_sum(blk + 2);
        dx[b]            = half_to_float(blk);
    }
    const __m256i sign = _mm256_set1_epi8(char(0x80));
    // Block B of row W into chain ACC.
    auto block = [&](const uint8_t * w, int64_t b, __m256 & acc) GEMV_TARGET {
        const uint8_t * blk  = w + size_t(b) * Q8_0_BYTES;
        const __m256i   xv   = _mm256_load_si256(reinterpret_cast<const __m256i *>(xq + size_t(b) * QK8_0));
        const __m256i   init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(minus_128_sum[b]));
        const __m256i   wu   = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 2)), sign);
        const __m256i   dot  = _mm256_dpbusd_epi32(init, wu, xv);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(broadcast_half(blk), _mm256_set1_ps(dx[b])), acc);
    };
    for (int64_t m = m0; m < m1; ++m) {
        const uint8_t * w = static_cast<const uint8_t *>(a.w) + size_t(m) * a.w_row_bytes;
        __m256 acc[CHAINS];
        for (int c = 0; c < CHAINS; ++c) {
            acc[c] = _mm256_setzero_ps();
        }
        int64_t b = 0;
        for (; b + CHAINS <= nb; b += CHAINS) {
            for (int c = 0; c < CHAINS; ++c) {
                block(w, b + c, acc[c]);
            }
        }
        for (; b < nb; ++b) {
            block(w, b, acc[0]);
        }
        a.y[m] = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + (a.bias ? a.bias[m] : 0.0f);
    }
}


// VPSHUFB indices that spread 16-bit element S1 (of each 128-bit lane) over the low 256 bits' 16-bit
// lanes and S2 over the high 256 bits', the elements' high bytes zeroed (index -1): a block's scale
// bytes, zero-extended, in the lanes of its two sub-blocks in a 64-byte product.
GEMV_TARGET inline __m512i spread_bytes(int s1, int s2) {
    return _mm512_mask_blend_epi64(0xf0, _mm512_set1_epi16(short(0xff00 | s1)), _mm512_set1_epi16(short(0xff00 | s2)));
}

// Q4_K x Q8_K. A Q4_K weight is d * sc_j * q - dmin * m_j, q in 0..15, sc_j and m_j 6-bit per 32-value
// sub-block j of a 256-value block. Per block:
//   sum(w * x) = dx * (d * sum_j sc_j * dot_j(q, xq) - dmin * sum_j m_j * sum_j(xq))
// with the integer sums exact: each dot_j by VPMADDUBSW (pairs, at most 2 * 15 * 128 in 16 bits), times
// sc_j and summed into 32 bits by VPDPWSSD; the mins term from the activation's sums of 16.
// This kernel is bound by its instruction count where the Q8_0 one is bound by memory (two threads
// come closer to the memory's speed the fewer instructions a block takes), hence two arrangements:
// - A 64-byte load of nibbles holds, in its low nibbles, sub-blocks 4h and 4h + 2 of the block's half h
//   (values 128h + 0..31 and 128h + 64..95) and in its high nibbles sub-blocks 4h + 1 and 4h + 3: the
//   activation is copied once per call into that order, so each 64 bytes of weights take two products.
// - The block heads (d, dmin, the 12 bytes of packed scales and mins) of four blocks are unpacked
//   together, one per 128-bit lane, and their mins terms summed in one product.
GEMV_TARGET void q4_k_gemv(const Avx512GemvArgs & a, int64_t m0, int64_t m1) {
    constexpr int64_t MAX_NB = MAX_K / QK_K, GROUP = 4;
    const int64_t nb = a.K / QK_K;
    alignas(64) uint8_t x_blocks[MAX_NB * Q8_K_BYTES];
    alignas(64) int8_t  x_nibble_order[MAX_K];
    alignas(64) int16_t sub_sums[MAX_NB + GROUP][8]; // per block, each sub-block's activation sum (0 past the row)
    alignas(64) float   dx8[MAX_NB + GROUP][8];      // per block its activation scale, 8 times (0 past the row)
    quantize_q8_k(a.x, x_blocks, a.K);
    std::memset(sub_sums[nb], 0, sizeof(sub_sums[0]) * GROUP);
    std::memset(dx8[nb], 0, sizeof(dx8[0]) * GROUP);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * xb = x_blocks + size_t(b) * Q8_K_BYTES;
        float dx;
        std::memcpy(&dx, xb, sizeof(dx));
        std::fill(dx8[b], dx8[b] + 8, dx);
        int16_t sums16[16];
        std::memcpy(sums16, xb + 4 + QK_K, sizeof(sums16));
        for (int j = 0; j < 8; ++j) {
            sub_sums[b][j] = int16_t(sums16[2 * j] + sums16[2 * j + 1]);
        }
        static constexpr int from[4] = {0, 64, 32, 96};
        for (int h = 0; h < 2; ++h) {
            for (int p = 0; p < 4; ++p) {
                std::memcpy(x_nibble_order + b * QK_K + 128 * h + 32 * p, xb + 4 + 128 * h + from[p], 32);
            }
        }
    }
    // The products of the low (high) nibbles of half h take scales 4h and 4h + 2 (4h + 1 and 4h + 3).
    const __m512i spread_lo0 = spread_bytes(0, 2), spread_hi0 = spread_bytes(1, 3);
    const __m512i spread_lo1 = spread_bytes(4, 6), spread_hi1 = spread_bytes(5, 7);
    // ggml's unpacking of the 6-bit scales and mins, from the block head's bytes 4..15 (s0..s11): scales
    // 0-3 and mins 0-3 are the low 6 bits of s0-3 and s4-7; scales 4-7 the low and mins 4-7 the high
    // nibbles of s8-11, with the top 2 bits of s0-3 (scales) and s4-7 (mins) above them.
    const __m512i pick_low  = _mm512_broadcast_i32x4(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i pick_high = _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m512i low_mask  = _mm512_broadcast_i32x4(_mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    const __m512i mins_16   = _mm512_broadcast_i32x4(_mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
    const __m512i dmin_d    = _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 2, 3, 2, 3, 2, 3, 0, 1, 0, 1, 0, 1, 0, 1));
    const __m512i mins_factor_of = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i low4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
    for (int64_t m = m0; m < m1; ++m) {
        const uint8_t * w = static_cast<const uint8_t *>(a.w) + size_t(m) * a.w_row_bytes;
        __m512 acc = _mm512_setzero_ps(), acc_mins = _mm512_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += GROUP) {
            const int       n    = int(std::min(GROUP, nb - b0));
            const uint8_t * blk0 = w + size_t(b0) * Q4_K_BYTES;
            // Block b0 + i's head in lane i (past the row, block b0's again: its terms are multiplied by 0).
            __m512i head = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk0)));
            for (int i = 1; i < GROUP; ++i) {
                const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk0 + (i < n ? i : 0) * Q4_K_BYTES));
                head = _mm512_mask_broadcast_i32x4(head, __mmask16(0xf << (4 * i)), h);
            }
            const __m512i low = _mm512_shuffle_epi8(head, pick_low), high = _mm512_shuffle_epi8(head, pick_high);
            const __m512i low_bits = _mm512_mask_blend_epi8(0xF000F000F000F000ull, _mm512_and_si512(low, low_mask),
                                                           _mm512_and_si512(_mm512_srli_epi16(low, 4), low4));
            alignas(64) uint8_t scales_mins[64]; // per block: 8 scale bytes, 8 min bytes
            _mm512_store_si512(scales_mins, _mm512_or_si512(low_bits, _mm512_and_si512(_mm512_srli_epi16(high, 2), top2)));
            // Per block: dmin * dx four times, then d * dx four times.
            alignas(64) float factors[2 * 16];
            const __m512i halves = _mm512_shuffle_epi8(head, dmin_d);
            const __m512  f01    = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(halves)), _mm512_load_ps(dx8[b0]));
            const __m512  f23    = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(halves, 1)), _mm512_load_ps(dx8[b0 + 2]));
            _mm512_store_ps(factors, f01);
            _mm512_store_ps(factors + 16, f23);
            const __m512i min_terms = _mm512_madd_epi16(_mm512_shuffle_epi8(_mm512_load_si512(scales_mins), mins_16),
                                                        _mm512_load_si512(sub_sums[b0]));
            acc_mins = _mm512_fmadd_ps(_mm512_permutex2var_ps(f01, mins_factor_of, f23), _mm512_cvtepi32_ps(min_terms), acc_mins);
            for (int i = 0; i < n; ++i) {
                const uint8_t * q  = blk0 + size_t(i) * Q4_K_BYTES + 16;
                const int8_t *  xr = x_nibble_order + (b0 + i) * QK_K;
                const __m512i   sc = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i *>(scales_mins + 16 * i)));
                const __m512i   q0 = _mm512_loadu_si512(q), q1 = _mm512_loadu_si512(q + 64);
                const __m512i p_lo0 = _mm512_maddubs_epi16(_mm512_and_si512(q0, low4), _mm512_load_si512(xr));
                const __m512i p_hi0 = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q0, 4), low4), _mm512_load_si512(xr + 64));
                const __m512i p_lo1 = _mm512_maddubs_epi16(_mm512_and_si512(q1, low4), _mm512_load_si512(xr + 128));
                const __m512i p_hi1 = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q1, 4), low4), _mm512_load_si512(xr + 192));
                __m512i s0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p_lo0, _mm512_shuffle_epi8(sc, spread_lo0));
                __m512i s1 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p_hi0, _mm512_shuffle_epi8(sc, spread_hi0));
                s0 = _mm512_dpwssd_epi32(s0, p_lo1, _mm512_shuffle_epi8(sc, spread_lo1));
                s1 = _mm512_dpwssd_epi32(s1, p_hi1, _mm512_shuffle_epi8(sc, spread_hi1));
                acc = _mm512_fmadd_ps(_mm512_set1_ps(factors[8 * i + 4]), _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc);
            }
        }
        a.y[m] = _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(acc_mins) + (a.bias ? a.bias[m] : 0.0f);
    }
}

// Q6_K x Q8_K. A Q6_K weight is d * sc_s * (u - 32), u in 0..63 (low 4 bits from ql, high 2 from qh),
// sc_s a signed 8-bit scale per 16-value sub-block s of a 256-value block. Per block:
//   sum(w * x) = dx * d * (sum_s sc_s * dot_s(u, xq) - 32 * sum_s sc_s * sum_s(xq))
// with the integer sums exact: dot_s by VPMADDUBSW (pairs, at most 2 * 63 * 128 in 16 bits), times sc_s
// and summed into 32 bits by VPDPWSSD; the offset term from the activation's sums of 16.
// ggml's order: in half h of a block (values 128h..128h+127), byte l of ql[64h..] holds value l in its
// low and value 64 + l in its high nibble, byte 32 + l values 32 + l and 96 + l; byte l of qh[32h..]
// their high 2 bits, at bits 0, 2, 4 and 6 for values l, 32 + l, 64 + l, 96 + l. So a 64-byte load of
// ql gives values 0..63 of the half in its low nibbles and 64..127 in its high ones, in the
// activation's own order, and qh loaded into both 256-bit halves gives their high bits by one shift
// per half. As for Q4_K, this kernel is bound by its instruction count: 512-bit vectors halve it.
GEMV_TARGET void q6_k_gemv(const Avx512GemvArgs & a, int64_t m0, int64_t m1) {
    const int64_t nb = a.K / QK_K;
    alignas(64) uint8_t x_blocks[MAX_K / QK_K * Q8_K_BYTES];
    quantize_q8_k(a.x, x_blocks, a.K);
    const __m512i low4 = _mm512_set1_epi8(0x0f), high2 = _mm512_set1_epi8(0x30);
    // Bits of qh to bits 4-5: values 0..31 of the half from bits 0-1 (left by 4), 32..63 from 2-3 (by 2),
    // 64..95 from 4-5 (as they are), 96..127 from 6-7 (right by 2).
    const __m512i shift_low = _mm512_mask_blend_epi64(0xf0, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
    const __m512i shift_high = _mm512_mask_blend_epi64(0xf0, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    // The 16-bit lanes of a product of 64 values take 4 scales, 8 lanes (16 values) each: scale element
    // e of each 128-bit lane (the half's 8 scales, sign-extended) for e = 0..3 (4..7).
    const __m512i spread_low  = _mm512_setr_epi64(0x0100010001000100, 0x0100010001000100, 0x0302030203020302, 0x0302030203020302,
                                                   0x0504050405040504, 0x0504050405040504, 0x0706070607060706, 0x0706070607060706);
    const __m512i spread_high = _mm512_add_epi8(spread_low, _mm512_set1_epi8(8));
    for (int64_t m = m0; m < m1; ++m) {
        const uint8_t * w = static_cast<const uint8_t *>(a.w) + size_t(m) * a.w_row_bytes;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * blk = w + size_t(b) * Q6_K_BYTES;
            const uint8_t * ql  = blk;
            const uint8_t * qh  = blk + QK_K / 2;
            const uint8_t * xb  = x_blocks + size_t(b) * Q8_K_BYTES;
            float dx;
            std::memcpy(&dx, xb, sizeof(dx));
            const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + QK_K / 2 + QK_K / 4)));
            // -32 * sum_s sc_s * sum_s(xq), from the 16 sums of 16
            const __m256i offset = _mm256_slli_epi32(
                _mm256_madd_epi16(scales, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + 4 + QK_K))), 5);
            __m512i sum = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
            for (int half = 0; half < 2; ++half) {
                const __m512i l  = _mm512_loadu_si512(ql + 64 * half);
                const __m512i h  = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(qh + 32 * half)));
                const __m512i u_low  = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_sllv_epi16(h, shift_low), high2));
                const __m512i u_high = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                                       _mm512_and_si512(_mm512_srlv_epi16(h, shift_high), high2));
                const __m512i sc = _mm512_broadcast_i32x4(half ? _mm256_extracti128_si256(scales, 1) : _mm256_castsi256_si128(scales));
                const __m512i x_low  = _mm512_loadu_si512(xb + 4 + 128 * half);
                const __m512i x_high = _mm512_loadu_si512(xb + 4 + 128 * half + 64);
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u_low, x_low), _mm512_shuffle_epi8(sc, spread_low));
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u_high, x_high), _mm512_shuffle_epi8(sc, spread_high));
            }
            acc = _mm512_fmadd_ps(_mm512_set1_ps(dx * half_to_float(blk + QK_K / 2 + QK_K / 4 + QK_K / 16)), _mm512_cvtepi32_ps(sum), acc);
        }
        a.y[m] = _mm512_reduce_add_ps(acc) + (a.bias ? a.bias[m] : 0.0f);
    }
}

} // namespace

bool avx512_gemv_handles(ggml_type type, int64_t K) {
    switch (type) {
        case GGML_TYPE_Q8_0: return cpu_has_vnni() && K % QK8_0 == 0 && K <= MAX_K;
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q6_K: return cpu_has_vnni() && K % QK_K == 0 && K <= MAX_K;
        default:             return false;
    }
}

void avx512_gemv_stacked(const Avx512GemvArgs * parts, int n_parts, int32_t * share_words, int ith, int nth) {
    // Contiguous shares: each thread streams its own part of the rows, a row at a time, which the
    // hardware prefetcher follows (4 rows at a time, sharing the activation loads, ran at memory speed
    // from cache but 25 % slower from memory).
    int64_t rows = 0;
    for (int p = 0; p < n_parts; ++p) {
        rows += parts[p].M;
    }
    MeasuredShares(share_words, nth).run(ith, rows, [&](int64_t r0, int64_t r1) {
        for (int64_t p = 0, first = 0; p < n_parts; first += parts[p].M, ++p) {
            const Avx512GemvArgs & a = parts[p];
            const int64_t m0 = std::max<int64_t>(r0 - first, 0), m1 = std::min<int64_t>(r1 - first, a.M);
            if (m0 < m1) {
                switch (a.type) {
                    case GGML_TYPE_Q8_0: q8_0_gemv(a, m0, m1); break;
                    case GGML_TYPE_Q4_K: q4_k_gemv(a, m0, m1); break;
                    case GGML_TYPE_Q6_K: q6_k_gemv(a, m0, m1); break;
                    default: break;
                }
            }
        }
    });
}

void avx512_gemv(const Avx512GemvArgs & a, int ith, int nth) { avx512_gemv_stacked(&a, 1, a.shares, ith, nth); }

#else

bool avx512_gemv_handles(ggml_type, int64_t) { return false; }
void avx512_gemv(const Avx512GemvArgs &, int, int) {}
void avx512_gemv_stacked(const Avx512GemvArgs *, int, int32_t *, int, int) {}

#endif

} // namespace transcribe
