#include "self_attention.h"

#include <algorithm>
#include <utility>

#include "avx512_query_lanes.h"
#include "custom_op.h"

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

constexpr int QUERIES = QUERY_LANES; // per block: one vector lane each

// Queries i0..i0+nq-1 of head h against keys k0..k1-1.
template <int HD>
QUERY_LANES_TARGET void attend_block(const Rows & q, const Rows & k, const Rows & v, float * out, size_t out_head,
                                     size_t out_row, int64_t k0, int64_t k1, int64_t h, int64_t i0, int nq, float scale) {
    const int64_t n_keys = k1 - k0;
    alignas(64) float qt[HD][QUERIES]; // the block's queries transposed, zeros past the last
    for (int l = 0; l < QUERIES; ++l) {
        const float * x = q.at(i0 + std::min(l, nq - 1), h);
        for (int d = 0; d < HD; ++d) {
            qt[d][l] = l < nq ? x[d] : 0.0f;
        }
    }
    alignas(64) float scores[SELF_ATTENTION_MAX_KEYS][QUERIES];
    for (int64_t j0 = 0; j0 < n_keys; j0 += SCORED_ROWS) {
        const int     nk = int(std::min<int64_t>(SCORED_ROWS, n_keys - j0));
        const float * row[SCORED_ROWS];
        float *       to[SCORED_ROWS];
        for (int r = 0; r < SCORED_ROWS; ++r) {
            row[r] = k.at(k0 + j0 + std::min(r, nk - 1), h);
            to[r]  = scores[j0 + std::min(r, nk - 1)];
        }
        score_rows<HD>(row, nk, qt, to, scale);
    }
    alignas(64) float inv[QUERIES];
    softmax_lanes(scores, n_keys, [](int64_t) { return __mmask16(0xffff); }, inv);
    weighted_values<HD, GGML_TYPE_F32>(
        scores, inv, nq, [&](int) { return n_keys; }, [&](int64_t j) { return v.at(k0 + j, h); },
        [&](int l) { return reinterpret_cast<float *>(reinterpret_cast<char *>(out) + size_t(i0 + l) * out_row + size_t(h) * out_head); });
}

// The scale in the user data's low 32 bits, the window (0: none) in its high ones.
void * pack(float scale, int64_t window) {
    return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(float_as_userdata(scale)) | (uintptr_t(window) << 32));
}

// src: q, k, v. Blocks (head, window, 16 of its queries) are dealt to the threads in turn.
template <int HD> void run(ggml_tensor * dst, int ith, int nth, void * packed) {
    const Rows    q = rows_of(dst->src[0]), k = rows_of(dst->src[1]), v = rows_of(dst->src[2]);
    const int64_t heads = dst->ne[1], T = dst->ne[2];
    const int64_t window = int64_t(reinterpret_cast<uintptr_t>(packed) >> 32), W = window > 0 ? std::min(window, T) : T;
    const int64_t n_windows = (T + W - 1) / W, blocks = (W + QUERIES - 1) / QUERIES;
    const float   scale = userdata_as_float(packed);
    for (int64_t b = ith; b < heads * n_windows * blocks; b += nth) {
        const int64_t h = b / (n_windows * blocks), w = b % (n_windows * blocks) / blocks, i0 = w * W + b % blocks * QUERIES;
        const int64_t k1 = std::min(T, (w + 1) * W);
        if (i0 < k1) {
            attend_block<HD>(q, k, v, static_cast<float *>(dst->data), dst->nb[1], dst->nb[2], w * W, k1, h, i0,
                             int(std::min<int64_t>(QUERIES, k1 - i0)), scale);
        }
    }
}

template <int... HD> ggml_custom_op_t kernel_for(int64_t hd, std::integer_sequence<int, HD...>) {
    ggml_custom_op_t fn = nullptr;
    ((fn = hd == 8 * (HD + 1) ? run<8 * (HD + 1)> : fn), ...);
    return fn;
}

} // namespace

bool self_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v, int64_t window) {
    const int64_t hd = q->ne[0], heads = q->ne[1], T = q->ne[2], keys = window > 0 ? std::min(window, T) : T;
    return cpu_has_avx512() && hd % 8 == 0 && hd >= 8 && hd <= 128 && T >= 1 && keys <= SELF_ATTENTION_MAX_KEYS &&
           rows_are_f32(q, hd, heads) && rows_are_f32(k, hd, heads) && rows_are_f32(v, hd, heads) && k->ne[2] == T &&
           v->ne[2] == T;
}

ggml_tensor * self_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale,
                                int64_t window) {
    ggml_tensor * args[] = {q, k, v};
    ggml_tensor * o = ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], q->ne[2], 1, args, 3,
                                     kernel_for(q->ne[0], std::make_integer_sequence<int, 16> {}), GGML_N_TASKS_MAX,
                                     pack(scale, window));
    return ggml_set_name(o, "self_attention");
}

#else

bool self_attention_kernel_takes(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *, int64_t) { return false; }
ggml_tensor * self_attention_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, float, int64_t) { return nullptr; }

#endif

} // namespace transcribe
