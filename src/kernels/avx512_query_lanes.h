// The end of the attention kernels that hold 16 queries in the lanes of a vector (each key's scores are
// one vector, scores[j][lane]): the softmax per lane, then each query's weighted sum of the V rows.
#pragma once

#include "avx512_exp.h" // and x86_simd.h
#include "ggml.h"

#if TRANSCRIBE_X86_SIMD

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace transcribe {

#define QUERY_LANES_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c,fma")))

constexpr int QUERY_LANES = 16;

// One F32 operand [head_dim, heads, rows] (q, k, v, positions): where row r of head h starts.
struct Rows {
    const char * data;
    size_t       head_bytes, row_bytes;
    template <class T = float> const T * at(int64_t r, int64_t h) const {
        return reinterpret_cast<const T *>(data + size_t(r) * row_bytes + size_t(h) * head_bytes);
    }
};

inline Rows rows_of(const ggml_tensor * t) { return {static_cast<const char *>(t->data), t->nb[1], t->nb[2]}; }

// Whether T is such an operand: F32 [hd, heads, rows], each head's row contiguous.
inline bool rows_are_f32(const ggml_tensor * t, int64_t hd, int64_t heads) {
    return t->type == GGML_TYPE_F32 && t->ne[0] == hd && t->ne[1] == heads && t->ne[3] == 1 && t->nb[0] == sizeof(float) &&
           t->nb[1] % sizeof(float) == 0 && t->nb[2] % sizeof(float) == 0;
}

// The same in BF16 (rows read as BF16 pairs: 4-byte aligned).
inline bool rows_are_bf16(const ggml_tensor * t, int64_t hd, int64_t heads) {
    return t->type == GGML_TYPE_BF16 && t->ne[0] == hd && t->ne[1] == heads && t->ne[3] == 1 && t->nb[0] == 2 &&
           t->nb[1] % 4 == 0 && t->nb[2] % 4 == 0;
}

// 16 values (F16 or F32) at P as F32.
template <ggml_type T> QUERY_LANES_TARGET inline __m512 load16_as_f32(const void * p) {
    if constexpr (T == GGML_TYPE_F16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i *>(p)));
    } else {
        return _mm512_loadu_ps(p);
    }
}

// The first N (< 16) values at P as F32, zeros after them; nothing past them is read.
template <ggml_type T> QUERY_LANES_TARGET inline __m512 load_first_as_f32(const void * p, __mmask16 n) {
    if constexpr (T == GGML_TYPE_F16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(n, p));
    } else {
        return _mm512_maskz_loadu_ps(n, p);
    }
}

// Dot products of 16 queries (QT, transposed: QT[d] holds dimension d of each) with 16 rows at once:
// OUT[r] = SCALE * sum_d ROW[r][d] * QT[d] for r < N (all 16 rows are read: repeat one past N). One
// accumulator a row: 16 chains cover the products' latency (with 8, VDPBF16PS waited on its own results).
constexpr int SCORED_ROWS = 16;
template <int HD>
QUERY_LANES_TARGET inline void score_rows(const float * const * row, int n, const float (*qt)[QUERY_LANES], float * const * out,
                                          float scale = 1.0f) {
    __m512 acc[SCORED_ROWS];
#pragma GCC unroll 16
    for (int r = 0; r < SCORED_ROWS; ++r) {
        acc[r] = _mm512_setzero_ps();
    }
    for (int d = 0; d < HD; ++d) {
        const __m512 qd = _mm512_load_ps(qt[d]);
        for (int r = 0; r < SCORED_ROWS; ++r) {
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(row[r][d]), qd, acc[r]);
        }
    }
#pragma GCC unroll 16 // constant indices keep the accumulators in registers (a loop to N put them on the stack)
    for (int r = 0; r < SCORED_ROWS; ++r) {
        if (r < n) {
            _mm512_store_ps(out[r], _mm512_mul_ps(acc[r], _mm512_set1_ps(scale)));
        }
    }
}

#define QUERY_LANES_BF16_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,f16c,fma")))

// score_rows for BF16 rows and queries: QT2[d / 2] holds dimensions d and d + 1 of each query as a BF16
// pair (the low half d), ROW[r] points at HD BF16 values; VDPBF16PS takes two dimensions an instruction.
template <int HD>
QUERY_LANES_BF16_TARGET inline void score_rows_bf16(const uint16_t * const * row, int n, const uint32_t (*qt2)[QUERY_LANES],
                                                    float * const * out) {
    __m512 acc[SCORED_ROWS];
#pragma GCC unroll 16
    for (int r = 0; r < SCORED_ROWS; ++r) {
        acc[r] = _mm512_setzero_ps();
    }
    for (int d2 = 0; d2 < HD / 2; ++d2) {
        const __m512bh qd = (__m512bh) _mm512_load_si512(qt2[d2]);
        for (int r = 0; r < SCORED_ROWS; ++r) {
            int32_t pair;
            __builtin_memcpy(&pair, row[r] + 2 * d2, sizeof pair);
            acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh) _mm512_set1_epi32(pair), qd);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < SCORED_ROWS; ++r) {
        if (r < n) {
            _mm512_store_ps(out[r], acc[r]);
        }
    }
}

// QT2 from QT (one vector of 16 queries per dimension, F32): dimension pairs as BF16 pairs, rounded to
// nearest even as ggml rounds F32 to BF16.
template <int HD>
QUERY_LANES_BF16_TARGET inline void pack_bf16_pairs(const float (*qt)[QUERY_LANES], uint32_t (*qt2)[QUERY_LANES]) {
    for (int d2 = 0; d2 < HD / 2; ++d2) {
        const __m512i lo = _mm512_cvtepu16_epi32((__m256i) _mm512_cvtneps_pbh(_mm512_load_ps(qt[2 * d2])));
        const __m512i hi = _mm512_cvtepu16_epi32((__m256i) _mm512_cvtneps_pbh(_mm512_load_ps(qt[2 * d2 + 1])));
        _mm512_store_si512(qt2[d2], _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}

// Softmax per lane over keys 0..N-1, in place: lane l takes key j where bit l of SEEN(j) is set (its
// other weights become 0). The weights stay unnormalized; INV gets each lane's 1 / (sum of its weights).
template <class Seen>
QUERY_LANES_TARGET inline void softmax_lanes(float (*scores)[QUERY_LANES], int64_t n, Seen seen, float * inv) {
    __m512 max = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; ++j) {
        max = _mm512_mask_max_ps(max, seen(j), max, _mm512_load_ps(scores[j]));
    }
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
        const __m512 p = _mm512_maskz_mov_ps(seen(j), exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(scores[j]), max)));
        _mm512_store_ps(scores[j], p);
        sum = _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.0f), sum));
}

// For the lanes l < NQ: OUT(l)[0..HD) = INV[l] * sum over keys j < KEYS(l) of W[j][l] * V(j), where V(j)
// points at key j's HD values of type T (HD a multiple of 8: a last half vector is loaded and stored
// masked), and a lane's weights past its own keys are 0. A pass takes up to 4 vectors of the values (a
// quarter of V's row for HD 128) for 16 / that many lanes: 16 accumulators, each V load and each weight
// broadcast shared by 4 products (2 lanes of all 8 vectors loaded each vector twice). Keys go a chunk at
// a time, every pass through the chunk before the next, the sums kept in L1 between chunks: a pass
// would otherwise stream all of V (hundreds of KB at a long recording's lengths) from L2 or beyond.
// Each lane sums its keys in order whatever the passes and chunks.
template <int HD, ggml_type T, class Keys, class ValuesOf, class OutOf>
QUERY_LANES_TARGET inline void weighted_values(const float (*w)[QUERY_LANES], const float * inv, int nq, Keys keys,
                                               ValuesOf values, OutOf out) {
    static_assert(HD % 8 == 0);
    constexpr int       VECS  = (HD + 15) / 16;
    constexpr int       VB    = VECS % 4 == 0 ? 4 : VECS % 3 == 0 ? 3 : VECS % 2 == 0 ? 2 : 1; // vectors a pass
    constexpr int       LANES = VB == 3 ? 4 : 16 / VB; // lanes a pass: a divisor of 16
    constexpr __mmask16 LAST  = HD % 16 ? __mmask16((1u << (HD % 16)) - 1) : __mmask16(0xffff);
    constexpr size_t    EL    = T == GGML_TYPE_F16 ? 2 : 4;
    constexpr int64_t   CHUNK = std::max<int64_t>(16, int64_t(32 * 1024 / (HD * EL))); // keys whose V fits 32 KiB
    static_assert(VECS % VB == 0 && QUERY_LANES % LANES == 0 && VB * LANES <= 16);
    alignas(64) float sums[QUERY_LANES][VECS * 16];
    int64_t group_keys[QUERY_LANES / LANES], all = 0;
    for (int l = 0; l < nq; l += LANES) {
        int64_t n = 0;
        for (int g = 0; g < LANES; ++g) {
            n = std::max<int64_t>(n, keys(l + g));
        }
        group_keys[l / LANES] = n;
        all = std::max(all, n);
    }
    for (int64_t j0 = 0; j0 == 0 || j0 < all; j0 += CHUNK) {
        for (int l = 0; l < nq; l += LANES) {
            const int64_t n = std::min(group_keys[l / LANES], j0 + CHUNK);
            if (j0 > 0 && n <= j0) {
                continue;
            }
            for (int c0 = 0; c0 < VECS; c0 += VB) {
                __m512 acc[LANES][VB];
                for (int g = 0; g < LANES; ++g) {
                    for (int c = 0; c < VB; ++c) {
                        acc[g][c] = j0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(&sums[l + g][16 * (c0 + c)]);
                    }
                }
                for (int64_t j = j0; j < n; ++j) {
                    const char * row = reinterpret_cast<const char *>(values(j)) + 16 * c0 * EL;
                    __m512 wl[LANES];
                    for (int g = 0; g < LANES; ++g) {
                        wl[g] = _mm512_set1_ps(w[j][l + g]);
                    }
                    for (int c = 0; c < VB; ++c) {
                        const __m512 x = c0 + c + 1 < VECS || LAST == 0xffff ? load16_as_f32<T>(row + 16 * c * EL)
                                                                             : load_first_as_f32<T>(row + 16 * c * EL, LAST);
                        for (int g = 0; g < LANES; ++g) {
                            acc[g][c] = _mm512_fmadd_ps(wl[g], x, acc[g][c]);
                        }
                    }
                }
                for (int g = 0; g < LANES; ++g) {
                    for (int c = 0; c < VB; ++c) {
                        _mm512_store_ps(&sums[l + g][16 * (c0 + c)], acc[g][c]);
                    }
                }
            }
        }
    }
    for (int l = 0; l < nq; ++l) {
        float *      y = out(l);
        const __m512 s = _mm512_set1_ps(inv[l]);
        for (int c = 0; c < VECS; ++c) {
            _mm512_mask_storeu_ps(y + 16 * c, c + 1 < VECS ? __mmask16(0xffff) : LAST, _mm512_mul_ps(_mm512_load_ps(&sums[l][16 * c]), s));
        }
    }
}

} // namespace transcribe

#endif
