#include "causal_attention.h"


#include <algorithm>
#include <cmath>
#include <cstring>

#include "avx512_query_lanes.h"
#include "avx512_transpose.h"
#include "custom_op.h"

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define ATT_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c,fma")))

constexpr int QUERIES = QUERY_LANES; // per block: one vector lane each
constexpr int KEYS    = SCORED_ROWS; // scored at a time

struct Shape {
    int64_t heads, kv_heads, T;
    size_t  q_head_bytes, q_row_bytes, kv_row_bytes, out_head_bytes, out_row_bytes;
    float   scale;
};

// The op's shape, from its output DST (src[0] = q [HD, heads, T], src[1] = the K cache).
Shape shape_of(const ggml_tensor * dst, int64_t hd, void * scale) {
    const ggml_tensor * q = dst->src[0];
    Shape s;
    s.scale          = userdata_as_float(scale);
    s.kv_heads       = dst->src[1]->ne[0] / hd;
    s.heads          = q->ne[1];
    s.T              = q->ne[2];
    s.q_head_bytes   = q->nb[1];
    s.q_row_bytes    = q->nb[2];
    s.kv_row_bytes   = dst->src[1]->nb[1];
    s.out_head_bytes = dst->nb[1];
    s.out_row_bytes  = dst->nb[2];
    return s;
}

// Queries i0..i0+15 of head H (those below T), against keys 0..i (each its own).
template <int HD, ggml_type KV>
ATT_TARGET void attend_block(const Shape & s, const char * q, const char * k, const char * v, char * out, int64_t h, int64_t i0) {
    constexpr int VECS = HD / 16;
    constexpr size_t EL = KV == GGML_TYPE_F16 ? 2 : 4;
    const int64_t nq = s.T - i0 < QUERIES ? s.T - i0 : QUERIES, nk = i0 + nq;
    const size_t  head_offset = size_t(h / (s.heads / s.kv_heads)) * HD * EL; // the cache head this head reads

    // The queries transposed: qt[d] holds dimension d of the 16 queries (zeros past T).
    alignas(64) float rows[QUERIES][HD];
    alignas(64) float qt[HD][QUERIES];
    for (int r = 0; r < QUERIES; ++r) {
        if (r < nq) {
            std::memcpy(rows[r], q + size_t(i0 + r) * s.q_row_bytes + size_t(h) * s.q_head_bytes, sizeof(rows[r]));
        } else {
            std::memset(rows[r], 0, sizeof(rows[r]));
        }
    }
    for (int c = 0; c < VECS; ++c) {
        __m512i t[16];
        transpose_16x16(reinterpret_cast<const uint8_t *>(&rows[0][16 * c]), sizeof(rows[0]), t);
        for (int d = 0; d < 16; ++d) {
            _mm512_store_si512(qt[16 * c + d], t[d]);
        }
    }

    // Scores, one vector of the 16 queries per key: scores[j] = (q . k_j) * scale.
    alignas(64) float scores[CAUSAL_ATTENTION_MAX_KEYS][QUERIES];
    alignas(64) float keys[KEYS][HD];
    for (int64_t j0 = 0; j0 < nk; j0 += KEYS) {
        const int nj = nk - j0 < KEYS ? int(nk - j0) : KEYS;
        for (int r = 0; r < KEYS; ++r) { // past nk: key j0 again (its score is not kept)
            const char * row = k + size_t(j0 + (r < nj ? r : 0)) * s.kv_row_bytes + head_offset;
            for (int c = 0; c < VECS; ++c) {
                _mm512_store_ps(&keys[r][16 * c], load16_as_f32<KV>(row + 16 * c * EL));
            }
        }
        const float * row[KEYS];
        float *       to[KEYS];
        for (int r = 0; r < KEYS; ++r) {
            row[r] = keys[r];
            to[r]  = scores[j0 + std::min(r, nj - 1)]; // rows past nk are not written
        }
        score_rows<HD>(row, nj, qt, to, s.scale);
    }

    // Softmax per query over its keys j <= i0 + lane: key j is seen by the lanes from j - i0 up.
    alignas(64) float inv[QUERIES];
    softmax_lanes(scores, nk, [&](int64_t j) { return j <= i0 ? __mmask16(0xffff) : __mmask16(0xffffu << (j - i0)); }, inv);

    // o_i = sum_j p_ij v_j / sum_i; query i0 + l sees keys up to itself.
    weighted_values<HD, KV>(
        scores, inv, int(nq), [&](int l) { return std::min(i0 + l + 1, nk); },
        [&](int64_t j) { return v + size_t(j) * s.kv_row_bytes + head_offset; },
        [&](int l) { return reinterpret_cast<float *>(out + size_t(i0 + l) * s.out_row_bytes + size_t(h) * s.out_head_bytes); });
}

// src[0] = q, src[1] = k cache, src[2] = v cache. Blocks (head, 16 queries) are dealt to the threads
// in turn.
template <int HD, ggml_type KV> void run(ggml_tensor * dst, int ith, int nth, void * scale) {
    const ggml_tensor * q = dst->src[0];
    const Shape s = shape_of(dst, HD, scale);
    const int64_t blocks = (s.T + QUERIES - 1) / QUERIES;
    for (int64_t b = ith; b < s.heads * blocks; b += nth) {
        attend_block<HD, KV>(s, static_cast<const char *>(q->data), static_cast<const char *>(dst->src[1]->data),
                             static_cast<const char *>(dst->src[2]->data), static_cast<char *>(dst->data), b / blocks,
                             (b % blocks) * QUERIES);
    }
}

// ---- Decode: one query per head at a position read at run time ------------------------------------

constexpr int DECODE_KEYS = 256; // keys scored per step of the running softmax
constexpr int AHEAD       = 8;   // rows: a head's part of consecutive cache rows is strided, which the
                                 // hardware prefetcher does not follow

// Asks for the BYTES at P to be brought into L1 (an inline-asm prefetch: GCC drops a function that only
// calls __builtin_prefetch, taking it for pure). Past the end of the cache it is a hint and faults nothing.
template <size_t BYTES> inline void prefetch_row(const char * p) {
    for (size_t i = 0; i < BYTES; i += 64) {
        asm volatile("prefetcht0 %0" : : "m"(*(p + i)));
    }
}

// Query heads H0 and H0 + 1 (if PAIR), which read the same cache head, against keys 0..N_KEYS-1: each
// K and V row is loaded once for both. The softmax runs over steps of DECODE_KEYS keys, rescaling
// what is summed so far when the maximum grows (as ggml's flash attention does per key), so the
// context is not bounded by a buffer.
template <int HD, ggml_type KV>
ATT_TARGET void attend_one(const Shape & s, const char * q, const char * k, const char * v, char * out, int64_t h0,
                           bool pair, int64_t n_keys) {
    constexpr int VECS = HD / 16;
    constexpr size_t EL = KV == GGML_TYPE_F16 ? 2 : 4;
    const size_t head_offset = size_t(h0 / (s.heads / s.kv_heads)) * HD * EL;
    const int    nq          = pair ? 2 : 1;
    __m512 qv[2][VECS];
    for (int r = 0; r < 2; ++r) {
        for (int c = 0; c < VECS; ++c) {
            qv[r][c] = r < nq ? _mm512_loadu_ps(reinterpret_cast<const float *>(q + size_t(h0 + r) * s.q_head_bytes) + 16 * c)
                              : _mm512_setzero_ps();
        }
    }
    alignas(64) float scores[2][DECODE_KEYS];
    float  max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
    __m512 acc[2][VECS];
    for (int r = 0; r < 2; ++r) {
        for (int c = 0; c < VECS; ++c) {
            acc[r][c] = _mm512_setzero_ps();
        }
    }
    for (int64_t j0 = 0; j0 < n_keys; j0 += DECODE_KEYS) {
        const int nj = n_keys - j0 < DECODE_KEYS ? int(n_keys - j0) : DECODE_KEYS;
        for (int j = 0; j < nj; ++j) {
            const char * row = k + size_t(j0 + j) * s.kv_row_bytes + head_offset;
            prefetch_row<HD * EL>(row + AHEAD * s.kv_row_bytes);
            __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
            for (int c = 0; c < VECS; ++c) {
                const __m512 kc = load16_as_f32<KV>(row + 16 * c * EL);
                d0 = _mm512_fmadd_ps(kc, qv[0][c], d0);
                d1 = _mm512_fmadd_ps(kc, qv[1][c], d1);
            }
            scores[0][j] = _mm512_reduce_add_ps(d0) * s.scale;
            scores[1][j] = _mm512_reduce_add_ps(d1) * s.scale;
        }
        // This step's probabilities against the running maximum; what came before is rescaled to it.
        __m512 rescale[2];
        for (int r = 0; r < nq; ++r) {
            __m512 m = _mm512_set1_ps(-INFINITY);
            for (int j = 0; j < nj; j += 16) {
                const __mmask16 live = nj - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (nj - j)) - 1);
                m = _mm512_mask_max_ps(m, live, m, _mm512_loadu_ps(&scores[r][j]));
            }
            const float next = std::max(max[r], _mm512_reduce_max_ps(m));
            const float keep = max[r] == -INFINITY ? 0.0f : std::exp(max[r] - next);
            max[r] = next;
            __m512 total = _mm512_setzero_ps();
            for (int j = 0; j < nj; j += 16) {
                const __mmask16 live = nj - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (nj - j)) - 1);
                const __m512 p = _mm512_maskz_mov_ps(live, exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(&scores[r][j]), _mm512_set1_ps(next))));
                _mm512_mask_storeu_ps(&scores[r][j], live, p);
                total = _mm512_add_ps(total, p);
            }
            sum[r]     = sum[r] * keep + _mm512_reduce_add_ps(total);
            rescale[r] = _mm512_set1_ps(keep);
        }
        for (int r = 0; r < nq; ++r) {
            for (int c = 0; c < VECS; ++c) {
                acc[r][c] = _mm512_mul_ps(acc[r][c], rescale[r]);
            }
        }
        for (int j = 0; j < nj; ++j) {
            const char * row = v + size_t(j0 + j) * s.kv_row_bytes + head_offset;
            prefetch_row<HD * EL>(row + AHEAD * s.kv_row_bytes);
            const __m512 p0 = _mm512_set1_ps(scores[0][j]), p1 = _mm512_set1_ps(pair ? scores[1][j] : 0.0f);
            for (int c = 0; c < VECS; ++c) {
                const __m512 vc = load16_as_f32<KV>(row + 16 * c * EL);
                acc[0][c] = _mm512_fmadd_ps(p0, vc, acc[0][c]);
                acc[1][c] = _mm512_fmadd_ps(p1, vc, acc[1][c]);
            }
        }
    }
    for (int r = 0; r < nq; ++r) {
        float * o = reinterpret_cast<float *>(out + size_t(h0 + r) * s.out_head_bytes);
        const __m512 inv = _mm512_set1_ps(1.0f / sum[r]);
        for (int c = 0; c < VECS; ++c) {
            _mm512_storeu_ps(o + 16 * c, _mm512_mul_ps(acc[r][c], inv));
        }
    }
}

// src[0] = q [HD, heads, B], src[1] = k cache, src[2] = v cache, src[3] = each query's position (I32
// [B]), src[4] = the cache row each query's K/V went to (I64 [B]; absent: its position). A query reads
// the POS + 1 rows ending at its own, so sequences kept in separate stretches of one cache are decoded
// in one op. (Query, pair of heads sharing a cache head) items are dealt to the threads in turn.
template <int HD, ggml_type KV> void run_decode(ggml_tensor * dst, int ith, int nth, void * scale) {
    const ggml_tensor * q = dst->src[0];
    const Shape s = shape_of(dst, HD, scale);
    const auto * pos  = static_cast<const int32_t *>(dst->src[3]->data);
    const auto * rows = dst->src[4] ? static_cast<const int64_t *>(dst->src[4]->data) : nullptr;
    const int64_t group = s.heads / s.kv_heads, pairs_per_group = (group + 1) / 2, per_query = s.kv_heads * pairs_per_group;
    const int64_t n_rows = std::min(dst->src[1]->ne[1], dst->src[2]->ne[1]);
    for (int64_t i = ith; i < s.T * per_query; i += nth) {
        const int64_t t = i / per_query, item = i % per_query;
        const int64_t row = rows ? rows[t] : pos[t], first = row - pos[t];
        GGML_ASSERT(pos[t] >= 0 && first >= 0 && row < n_rows);
        const int64_t h0 = item / pairs_per_group * group + item % pairs_per_group * 2;
        attend_one<HD, KV>(s, static_cast<const char *>(q->data) + size_t(t) * s.q_row_bytes,
                           static_cast<const char *>(dst->src[1]->data) + size_t(first) * s.kv_row_bytes,
                           static_cast<const char *>(dst->src[2]->data) + size_t(first) * s.kv_row_bytes,
                           static_cast<char *>(dst->data) + size_t(t) * s.out_row_bytes, h0,
                           h0 + 1 < (h0 / group + 1) * group, int64_t(pos[t]) + 1);
    }
}

// The kernel for this head size and cache type, of RUN's two (prefill, decode).
template <template <int, ggml_type> class Pick> ggml_custom_op_t kernel_for(int64_t hd, bool f16) {
    return hd == 16   ? (f16 ? Pick<16, GGML_TYPE_F16>::fn : Pick<16, GGML_TYPE_F32>::fn)
           : hd == 64 ? (f16 ? Pick<64, GGML_TYPE_F16>::fn : Pick<64, GGML_TYPE_F32>::fn)
                      : (f16 ? Pick<128, GGML_TYPE_F16>::fn : Pick<128, GGML_TYPE_F32>::fn);
}
template <int HD, ggml_type KV> struct Prefill { static constexpr ggml_custom_op_t fn = run<HD, KV>; };
template <int HD, ggml_type KV> struct Decode { static constexpr ggml_custom_op_t fn = run_decode<HD, KV>; };

// The caches both op read: F16 or F32 alike, rows of whole heads that the query heads share evenly.
bool caches_apply(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache) {
    const int64_t hd = q->ne[0];
    return cpu_has_avx512() && q->type == GGML_TYPE_F32 && ggml_is_contiguous(q) && (hd == 16 || hd == 64 || hd == 128) &&
           q->ne[3] == 1 && k_cache->type == v_cache->type &&
           (k_cache->type == GGML_TYPE_F16 || k_cache->type == GGML_TYPE_F32) && ggml_is_contiguous(k_cache) &&
           ggml_is_contiguous(v_cache) && k_cache->ne[0] == v_cache->ne[0] && k_cache->ne[0] % hd == 0 &&
           q->ne[1] % (k_cache->ne[0] / hd) == 0;
}

} // namespace

bool causal_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache) {
    const int64_t T = q->ne[2];
    return caches_apply(q, k_cache, v_cache) && T > 1 && T <= CAUSAL_ATTENTION_MAX_KEYS && k_cache->ne[1] >= T &&
           v_cache->ne[1] >= T;
}

ggml_tensor * causal_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                                  float scale) {
    ggml_tensor * args[] = {q, k_cache, v_cache};
    ggml_tensor * o = ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], q->ne[2], 1, args, 3,
                                     kernel_for<Prefill>(q->ne[0], k_cache->type == GGML_TYPE_F16), GGML_N_TASKS_MAX,
                                     float_as_userdata(scale));
    return ggml_set_name(o, "causal_attention");
}

bool decode_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache,
                                   const ggml_tensor * pos, const ggml_tensor * rows) {
    const int64_t B = q->ne[2];
    return caches_apply(q, k_cache, v_cache) && B >= 1 && pos->type == GGML_TYPE_I32 && ggml_nelements(pos) == B &&
           ggml_is_contiguous(pos) &&
           (!rows || (rows->type == GGML_TYPE_I64 && ggml_nelements(rows) == B && ggml_is_contiguous(rows)));
}

ggml_tensor * decode_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                                  ggml_tensor * pos, ggml_tensor * rows, float scale) {
    ggml_tensor * args[] = {q, k_cache, v_cache, pos, rows};
    ggml_tensor * o = ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], q->ne[2], 1, args, rows ? 5 : 4,
                                     kernel_for<Decode>(q->ne[0], k_cache->type == GGML_TYPE_F16), GGML_N_TASKS_MAX,
                                     float_as_userdata(scale));
    return ggml_set_name(o, "decode_attention");
}

#else

bool causal_attention_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *) { return false; }
ggml_tensor * causal_attention_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, float) {
    return nullptr;
}
bool decode_attention_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *, const ggml_tensor *,
                                   const ggml_tensor *) {
    return false;
}
ggml_tensor * decode_attention_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *,
                                  float) {
    return nullptr;
}

#endif

} // namespace transcribe
