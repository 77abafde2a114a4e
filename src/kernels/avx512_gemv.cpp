#include "avx512_gemv.h"

#include "x86_simd.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <cstring>

namespace transcribe {

namespace {
constexpr int    QK8_0      = 32;
constexpr size_t Q8_0_BYTES = 2 + QK8_0; // F16 scale, 32 signed bytes
constexpr int    CHAINS     = 4;         // independent F32 sums per row: FMA latency / throughput
constexpr int64_t MAX_K     = 16384;     // the activation's quantized copy lives on the stack
} // namespace

#if TRANSCRIBE_X86_SIMD

namespace {

#define GEMV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
#define GEMV_TARGET_LAMBDA __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

bool cpu_has_vnni() {
    static const bool ok = cpu_has_avx512() && __builtin_cpu_supports("avx512vnni") &&
                           ggml_type_size(GGML_TYPE_Q8_0) == Q8_0_BYTES && ggml_blck_size(GGML_TYPE_Q8_0) == QK8_0;
    return ok;
}

GEMV_TARGET inline __m256 broadcast_half(const uint8_t * p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof(h));
    return _mm256_set1_ps(_cvtsh_ss(h));
}

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
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = x_blocks + size_t(b) * Q8_0_BYTES;
        std::memcpy(xq + b * QK8_0, blk + 2, QK8_0);
        const __m256i part = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 2)));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(part), _mm256_extracti128_si256(part, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
        minus_128_sum[b] = -128 * _mm_cvtsi128_si32(t);
        uint16_t h;
        std::memcpy(&h, blk, sizeof(h));
        dx[b] = _cvtsh_ss(h);
    }
    const __m256i sign = _mm256_set1_epi8(char(0x80));
    // Block B of row W into chain ACC.
    auto block = [&](const uint8_t * w, int64_t b, __m256 & acc) GEMV_TARGET_LAMBDA {
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

} // namespace

bool avx512_gemv_handles(ggml_type type, int64_t K) {
    return type == GGML_TYPE_Q8_0 && cpu_has_vnni() && K % QK8_0 == 0 && K <= MAX_K;
}

void avx512_gemv(const Avx512GemvArgs & a, int ith, int nth) {
    // Contiguous shares: each thread streams its own part of the matrix, a row at a time, which the
    // hardware prefetcher follows (4 rows at a time, sharing the activation loads, ran at memory speed
    // from cache but 25 % slower from memory).
    const int64_t m0 = a.M * ith / nth, m1 = a.M * (ith + 1) / nth;
    if (m0 < m1) {
        switch (a.type) {
            case GGML_TYPE_Q8_0: q8_0_gemv(a, m0, m1); break;
            default: break;
        }
    }
}

#else

bool avx512_gemv_handles(ggml_type, int64_t) { return false; }
void avx512_gemv(const Avx512GemvArgs &, int, int) {}

#endif

} // namespace transcribe
