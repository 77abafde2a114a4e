#include "rel_pos_attention.h"

#include <algorithm>
#include <cmath>

#include "avx512_query_lanes.h"
#include "avx512_transpose.h"
#include "custom_op.h"

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define REL_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))

constexpr int QUERIES = QUERY_LANES; // per block: one vector lane each
constexpr int KEYS    = SCORED_ROWS; // keys or positions scored at a time
constexpr int RING    = 64; // position rows kept until every query of the block has taken its one

struct Operands {
    Rows          q, k, v, p;
    const char *  bias_u, *bias_v;
    size_t        bias_head_bytes;
    char *        out;
    size_t        out_head_bytes, out_row_bytes;
    int64_t       heads, T, R;
    float         scale;
};

// QT[d][lane] = x_{i0 + lane}[d] + bias[d] for the block's queries (zeros past T): the block's queries
// transposed, one vector per dimension.
template <int HD>
REL_TARGET void load_queries(const Operands & o, const char * bias, int64_t h, int64_t i0, int nq, float (*qt)[QUERIES]) {
    alignas(64) float rows[QUERIES][HD];
    const float * b = reinterpret_cast<const float *>(bias + size_t(h) * o.bias_head_bytes);
    for (int r = 0; r < QUERIES; ++r) {
        const float * x = o.q.at(i0 + r, h);
        for (int d = 0; d < HD; d += 16) {
            const __m512 v = r < nq ? _mm512_add_ps(_mm512_loadu_ps(x + d), _mm512_loadu_ps(b + d)) : _mm512_setzero_ps();
            _mm512_store_ps(&rows[r][d], v);
        }
    }
    for (int c = 0; c < HD / 16; ++c) {
        __m512i t[16];
        transpose_16x16(reinterpret_cast<const uint8_t *>(&rows[0][16 * c]), sizeof(rows[0]), t);
        for (int d = 0; d < 16; ++d) {
            _mm512_store_si512(qt[16 * c + d], t[d]);
        }
    }
}

// OUT[r] = ROW[r] . the block's queries for r < N: F32 rows against QT, or (BF16 keys and positions)
// BF16 rows against QT2, the queries rounded to BF16 pairs.
template <int HD, bool BF16> struct Scorer {
    alignas(64) uint32_t pairs[BF16 ? HD / 2 : 1][QUERIES];

    REL_TARGET void prepare(const float (*qt)[QUERIES]) {
        if constexpr (BF16) {
            pack_bf16_pairs<HD>(qt, pairs);
        }
    }
    REL_TARGET void score(const Rows & rows, const int64_t * r_of, int64_t h, int n, const float (*qt)[QUERIES], float * const * out) const {
        if constexpr (BF16) {
            const uint16_t * row[KEYS];
            for (int r = 0; r < KEYS; ++r) {
                row[r] = rows.at<uint16_t>(r_of[r], h);
            }
            score_rows_bf16<HD>(row, n, pairs, out);
        } else {
            const float * row[KEYS];
            for (int r = 0; r < KEYS; ++r) {
                row[r] = rows.at(r_of[r], h);
            }
            score_rows<HD>(row, n, qt, out);
        }
    }
};

// Queries i0..i0+15 of head H (those below T) against all T keys.
//
// Lane l is query i = i0 + l; for key j it needs position row T-1-i+j = base + (15 - l) + j with base =
// T-1-i0-15. The position dot products are computed once per row g = j + 15 - l of that range (T + 15
// rows, each against all 16 queries) into a ring, and key j's term is the ring's diagonal: lane l from
// row j + 15 - l, one gather. Rows outside p (only lanes past T ask for them) read row 0 or R-1 and are
// never used.
template <int HD, bool BF16> REL_TARGET void attend_block(const Operands & o, int64_t h, int64_t i0) {
    const int64_t T = o.T, n_pos = T + QUERIES - 1, base = T - 1 - i0 - (QUERIES - 1);
    const int     nq = int(std::min<int64_t>(QUERIES, T - i0));

    alignas(64) float qu[HD][QUERIES], qv[HD][QUERIES];
    load_queries<HD>(o, o.bias_u, h, i0, nq, qu);
    load_queries<HD>(o, o.bias_v, h, i0, nq, qv);
    Scorer<HD, BF16> su, sv;
    su.prepare(qu);
    sv.prepare(qv);

    alignas(64) float scores[REL_POS_ATTENTION_MAX_KEYS][QUERIES];
    alignas(64) float ring[RING][QUERIES];
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512  scale = _mm512_set1_ps(o.scale);
    int64_t done = 0; // keys whose scores are whole
    for (int64_t g0 = 0; g0 < n_pos; g0 += KEYS) {
        const int ng = int(std::min<int64_t>(KEYS, n_pos - g0));
        int64_t   row[KEYS];
        float *   out[KEYS];
        for (int r = 0; r < KEYS; ++r) {
            row[r] = std::clamp<int64_t>(base + g0 + std::min(r, ng - 1), 0, o.R - 1);
            out[r] = ring[(g0 + r) % RING];
        }
        sv.score(o.p, row, h, ng, qv, out);
        if (g0 < T) {
            const int nk = int(std::min<int64_t>(KEYS, T - g0));
            for (int r = 0; r < KEYS; ++r) {
                row[r] = g0 + std::min(r, nk - 1);
                out[r] = scores[g0 + std::min(r, nk - 1)]; // rows past T are not written
            }
            su.score(o.k, row, h, nk, qu, out);
        }
        // Key j's position term is whole once ring row j + 15 is in.
        for (const int64_t upto = std::min(T, g0 + ng - (QUERIES - 1)); done < upto; ++done) {
            const __m512i g   = _mm512_sub_epi32(_mm512_set1_epi32(int(done) + QUERIES - 1), lane);
            const __m512i idx = _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(g, _mm512_set1_epi32(RING - 1)), 4), lane);
            const __m512  bd  = _mm512_i32gather_ps(idx, &ring[0][0], 4);
            _mm512_store_ps(scores[done], _mm512_mul_ps(_mm512_add_ps(_mm512_load_ps(scores[done]), bd), scale));
        }
    }

    // Softmax per query (lane) over all T keys, then o_i = sum_j e_ij v_j / sum_i.
    alignas(64) float inv[QUERIES];
    softmax_lanes(scores, T, [](int64_t) { return __mmask16(0xffff); }, inv);
    weighted_values<HD, GGML_TYPE_F32>(
        scores, inv, nq, [&](int) { return T; }, [&](int64_t j) { return o.v.at(j, h); },
        [&](int l) { return reinterpret_cast<float *>(o.out + size_t(i0 + l) * o.out_row_bytes + size_t(h) * o.out_head_bytes); });
}

// src: q, k, v, p, bias_u, bias_v. Blocks (head, 16 queries) are dealt to the threads in turn.
template <int HD, bool BF16> void run(ggml_tensor * dst, int ith, int nth, void * scale) {
    Operands o;
    o.q = rows_of(dst->src[0]);
    o.k = rows_of(dst->src[1]);
    o.v = rows_of(dst->src[2]);
    o.p = rows_of(dst->src[3]);
    o.bias_u          = static_cast<const char *>(dst->src[4]->data);
    o.bias_v          = static_cast<const char *>(dst->src[5]->data);
    o.bias_head_bytes = dst->src[4]->nb[1];
    o.out             = static_cast<char *>(dst->data);
    o.out_head_bytes  = dst->nb[1];
    o.out_row_bytes   = dst->nb[2];
    o.heads           = dst->ne[1];
    o.T               = dst->ne[2];
    o.R               = dst->src[3]->ne[2];
    o.scale           = userdata_as_float(scale);
    const int64_t blocks = (o.T + QUERIES - 1) / QUERIES;
    for (int64_t b = ith; b < o.heads * blocks; b += nth) {
        attend_block<HD, BF16>(o, b / blocks, (b % blocks) * QUERIES);
    }
}

} // namespace

bool rel_pos_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v,
                                    const ggml_tensor * p, const ggml_tensor * bias_u, const ggml_tensor * bias_v) {
    const int64_t hd = q->ne[0], heads = q->ne[1], T = q->ne[2];
    auto is_bias = [&](const ggml_tensor * b) {
        return b->type == GGML_TYPE_F32 && ggml_is_contiguous(b) && b->ne[0] == hd && b->ne[1] == heads && b->ne[2] == 1 &&
               b->ne[3] == 1;
    };
    const bool f32_scores  = rows_are_f32(k, hd, heads) && rows_are_f32(p, hd, heads);
    const bool bf16_scores = rows_are_bf16(k, hd, heads) && rows_are_bf16(p, hd, heads) && __builtin_cpu_supports("avx512bf16");
    return cpu_has_avx512() && (hd == 16 || hd == 32 || hd == 64 || hd == 128) && T >= 1 &&
           T <= REL_POS_ATTENTION_MAX_KEYS && rows_are_f32(q, hd, heads) && (f32_scores || bf16_scores) &&
           rows_are_f32(v, hd, heads) && k->ne[2] == T && v->ne[2] == T && p->ne[2] >= 2 * T - 1 && is_bias(bias_u) &&
           is_bias(bias_v);
}

ggml_tensor * rel_pos_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * p, ggml_tensor * bias_u, ggml_tensor * bias_v, float scale) {
    const int64_t hd = q->ne[0];
    const bool bf16 = k->type == GGML_TYPE_BF16;
    ggml_custom_op_t fn = hd == 16 ? (bf16 ? run<16, true> : run<16, false>)
                        : hd == 32 ? (bf16 ? run<32, true> : run<32, false>)
                        : hd == 64 ? (bf16 ? run<64, true> : run<64, false>)
                                   : (bf16 ? run<128, true> : run<128, false>);
    ggml_tensor * args[] = {q, k, v, p, bias_u, bias_v};
    ggml_tensor * o = ggml_custom_4d(ctx, GGML_TYPE_F32, hd, q->ne[1], q->ne[2], 1, args, 6, fn, GGML_N_TASKS_MAX,
                                     float_as_userdata(scale));
    return ggml_set_name(o, "rel_pos_attention");
}

#else

bool rel_pos_attention_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *, const ggml_tensor *,
                                    const ggml_tensor *, const ggml_tensor *) {
    return false;
}
ggml_tensor * rel_pos_attention_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, ggml_tensor *,
                                   ggml_tensor *, ggml_tensor *, float) {
    return nullptr;
}

#endif

} // namespace transcribe
