#include "avx512_gemv.h"

#include "quant_blocks.h" // and x86_simd.h

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


// Q4_K x Q8_K. A Q4_K weight is d * sc_j * q - dmin * m_j, q in 0..15, sc_j and m_j 6-bit per 32-value
// sub-block j of a 256-value block. Per block:
//   sum(w * x) = dx * (d * sum_j sc_j * dot_j(q, xq) - dmin * sum_j m_j * sum_j(xq))
// with the integer sums exact: each dot_j by VPMADDUBSW (pairs, at most 2 * 15 * 128 in 16 bits), times
// sc_j and summed into 32 bits by VPDPWSSD; the mins term from the activation's sums of 16.
GEMV_TARGET void q4_k_gemv(const Avx512GemvArgs & a, int64_t m0, int64_t m1) {
    const int64_t nb = a.K / QK_K;
    alignas(64) uint8_t x_blocks[MAX_K / QK_K * Q8_K_BYTES];
    alignas(16) int16_t sub_sums[MAX_K / QK_K][8]; // per block, each 32-value sub-block's activation sum
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(a.x, x_blocks, a.K);
    for (int64_t b = 0; b < nb; ++b) {
        int16_t sums16[16];
        std::memcpy(sums16, x_blocks + size_t(b) * Q8_K_BYTES + 4 + QK_K, sizeof(sums16));
        for (int j = 0; j < 8; ++j) {
            sub_sums[b][j] = int16_t(sums16[2 * j] + sums16[2 * j + 1]);
        }
    }
    // Picks 16-bit element j of a vector into all of its lanes.
    alignas(32) static const uint8_t pick[8][32] = {
        {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
        {2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
        {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5},
        {6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
        {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9},
        {10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
        {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13},
        {14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15}};
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t m = m0; m < m1; ++m) {
        const uint8_t * w = static_cast<const uint8_t *>(a.w) + size_t(m) * a.w_row_bytes;
        __m256 acc = _mm256_setzero_ps();
        __m128 acc_mins = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * blk = w + size_t(b) * Q4_K_BYTES;
            const uint8_t * xb  = x_blocks + size_t(b) * Q8_K_BYTES;
            float dx;
            std::memcpy(&dx, xb, sizeof(dx));
            // The 12 bytes of 6-bit scales and mins as 8 scale bytes then 8 min bytes (ggml's unpacking).
            uint32_t u[4];
            std::memcpy(u, blk + 4, 12);
            u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
            const uint32_t mins_low = u[1] & 0x3f3f3f3f;
            u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
            u[2] = mins_low;
            u[0] &= 0x3f3f3f3f;
            const __m256i scales_and_mins = _mm256_cvtepu8_epi16(_mm_set_epi32(int(u[3]), int(u[2]), int(u[1]), int(u[0])));
            const __m128i mins = _mm256_extracti128_si256(scales_and_mins, 1);
            const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(scales_and_mins));
            const __m128i min_terms = _mm_madd_epi16(mins, _mm_load_si128(reinterpret_cast<const __m128i *>(sub_sums[b])));
            acc_mins = _mm_fmadd_ps(_mm_set1_ps(dx * half_to_float(blk + 2)), _mm_cvtepi32_ps(min_terms), acc_mins);

            __m256i sum = _mm256_setzero_si256();
            for (int j = 0; j < 4; ++j) {
                const __m256i q  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 16 + 32 * j));
                const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + 4 + 64 * j));
                const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + 4 + 64 * j + 32));
                const __m256i pl = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), xl);
                const __m256i ph = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), xh);
                sum = _mm256_dpwssd_epi32(sum, pl, _mm256_shuffle_epi8(scales, _mm256_load_si256(reinterpret_cast<const __m256i *>(pick[2 * j]))));
                sum = _mm256_dpwssd_epi32(sum, ph, _mm256_shuffle_epi8(scales, _mm256_load_si256(reinterpret_cast<const __m256i *>(pick[2 * j + 1]))));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * half_to_float(blk)), _mm256_cvtepi32_ps(sum), acc);
        }
        __m128 mins_sum = _mm_add_ps(acc_mins, _mm_movehl_ps(acc_mins, acc_mins));
        mins_sum = _mm_add_ss(mins_sum, _mm_movehdup_ps(mins_sum));
        a.y[m] = hsum(acc) - _mm_cvtss_f32(mins_sum) + (a.bias ? a.bias[m] : 0.0f);
    }
}

// Q6_K x Q8_K. A Q6_K weight is d * sc_s * (u - 32), u in 0..63 (low 4 bits from ql, high 2 from qh),
// sc_s a signed 8-bit scale per 16-value sub-block s of a 256-value block. Per block:
//   sum(w * x) = dx * d * (sum_s sc_s * dot_s(u, xq) - 32 * sum_s sc_s * sum_s(xq))
// with the integer sums exact: dot_s by VPMADDUBSW (pairs, at most 2 * 63 * 128 in 16 bits), times sc_s
// and summed into 32 bits by VPDPWSSD; the offset term from the activation's sums of 16.
GEMV_TARGET void q6_k_gemv(const Avx512GemvArgs & a, int64_t m0, int64_t m1) {
    const int64_t nb = a.K / QK_K;
    alignas(64) uint8_t x_blocks[MAX_K / QK_K * Q8_K_BYTES];
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(a.x, x_blocks, a.K);
    // Vector k (0..7) of a block holds values 32k..32k+31; in 16-bit pairs after VPMADDUBSW its low 8
    // lanes are sub-block 2k's values and its high 8 lanes sub-block 2k+1's; but ggml's order of the
    // values in a half of 128 is l, l+32, l+64, l+96 for l in 0..31 (below): vector k = 4 * half + part
    // takes scales 8 * half + 2 * part (+1).
    alignas(32) static const int16_t pick[4][16] = {
        {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
        {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5}, {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
    const __m256i low4 = _mm256_set1_epi8(0x0f), high2 = _mm256_set1_epi8(0x30);
    for (int64_t m = m0; m < m1; ++m) {
        const uint8_t * w = static_cast<const uint8_t *>(a.w) + size_t(m) * a.w_row_bytes;
        __m256 acc = _mm256_setzero_ps();
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
            __m256i sum = _mm256_sub_epi32(_mm256_setzero_si256(), offset);
            for (int half = 0; half < 2; ++half) {
                const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 64 * half));
                const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 64 * half + 32));
                const __m256i h  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qh + 32 * half));
                const __m256i u[4] = {
                    _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), high2)),
                    _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), high2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(h, high2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), _mm256_and_si256(_mm256_srli_epi16(h, 2), high2))};
                const __m256i sc = half ? _mm256_permute2x128_si256(scales, scales, 0x11) : _mm256_permute2x128_si256(scales, scales, 0x00);
                for (int part = 0; part < 4; ++part) {
                    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + 4 + 128 * half + 32 * part));
                    const __m256i s  = _mm256_permutexvar_epi16(_mm256_load_si256(reinterpret_cast<const __m256i *>(pick[part])), sc);
                    sum = _mm256_dpwssd_epi32(sum, _mm256_maddubs_epi16(u[part], xv), s);
                }
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * half_to_float(blk + QK_K / 2 + QK_K / 4 + QK_K / 16)), _mm256_cvtepi32_ps(sum), acc);
        }
        a.y[m] = hsum(acc) + (a.bias ? a.bias[m] : 0.0f);
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

void avx512_gemv(const Avx512GemvArgs & a, int ith, int nth) {
    // Contiguous shares: each thread streams its own part of the matrix, a row at a time, which the
    // hardware prefetcher follows (4 rows at a time, sharing the activation loads, ran at memory speed
    // from cache but 25 % slower from memory).
    const int64_t m0 = a.M * ith / nth, m1 = a.M * (ith + 1) / nth;
    if (m0 < m1) {
        switch (a.type) {
            case GGML_TYPE_Q8_0: q8_0_gemv(a, m0, m1); break;
            case GGML_TYPE_Q4_K: q4_k_gemv(a, m0, m1); break;
            case GGML_TYPE_Q6_K: q6_k_gemv(a, m0, m1); break;
            default: break;
        }
    }
}

#else

bool avx512_gemv_handles(ggml_type, int64_t) { return false; }
void avx512_gemv(const Avx512GemvArgs &, int, int) {}

#endif

} // namespace transcribe
