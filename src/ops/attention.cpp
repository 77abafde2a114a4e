#include "attention.h"

#include "matmul.h"
#include "placement.h"

#include "core/error.h"
#include "kernels/causal_attention.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/self_attention.h"

namespace transcribe {

bool causal_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache) {
    return causal_attention_kernel_takes(q, k_cache, v_cache) && in_host_memory(k_cache) && in_host_memory(v_cache);
}

bool decode_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache,
                                 const ggml_tensor * pos, const ggml_tensor * rows) {
    return decode_attention_kernel_takes(q, k_cache, v_cache, pos, rows) && in_host_memory(k_cache) &&
           in_host_memory(v_cache);
}

bool rel_pos_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v,
                                  const ggml_tensor * p, const ggml_tensor * bias_u, const ggml_tensor * bias_v) {
    return rel_pos_attention_kernel_takes(q, k, v, p, bias_u, bias_v) && in_host_memory(bias_u) && in_host_memory(bias_v);
}

namespace {
// Flash attention reads K and V where they lie in the cache (no transposed copy of V per step) and
// keeps the softmax in F32.
ggml_tensor * flash_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                              ggml_tensor * mask, int64_t n_kv, float scale) {
    const int64_t hd = q->ne[0], nkv = k_cache->ne[0] / hd;
    const size_t  es = ggml_element_size(k_cache);
    ggml_tensor * k  = ggml_view_3d(ctx, k_cache, hd, nkv, n_kv, size_t(hd) * es, k_cache->nb[1], 0);
    ggml_tensor * v  = ggml_view_3d(ctx, v_cache, hd, nkv, n_kv, size_t(hd) * es, v_cache->nb[1], 0);
    ggml_tensor * o  = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), ggml_permute(ctx, k, 0, 2, 1, 3),
                                           ggml_permute(ctx, v, 0, 2, 1, 3), mask, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
    return o;
}
} // namespace

namespace ops {

ggml_tensor * causal_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                               ggml_tensor * mask, int64_t n_kv, float scale, const ggml_tensor * layer_weight) {
    const bool applies = layer_weight ? causal_attention_kernel_takes(q, k_cache, v_cache) && in_host_memory(layer_weight)
                                      : causal_attention_op_applies(q, k_cache, v_cache);
    if (n_kv == q->ne[2] && applies) {
        return causal_attention_op(ctx, q, k_cache, v_cache, scale);
    }
    return flash_attention(ctx, q, k_cache, v_cache, mask, n_kv, scale);
}

ggml_tensor * decode_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                               ggml_tensor * pos, ggml_tensor * rows, ggml_tensor * mask, int64_t n_kv, float scale) {
    if (decode_attention_op_applies(q, k_cache, v_cache, pos, rows)) {
        return decode_attention_op(ctx, q, k_cache, v_cache, pos, rows, scale);
    }
    return flash_attention(ctx, q, k_cache, v_cache, mask, n_kv, scale);
}

// ggml's fast F32 matmul on CPU (tinyBLAS) needs the left operand's row count and the shared dimension
// to be multiples of 4 and 16 and the right operand contiguous; otherwise it takes a dot product per
// output, far slower. So it runs over T_pad = T rounded up to 16 keys: q, k, v are zero-padded, the
// padded keys' scores are cut off before the softmax and its output is zero-padded back, so those keys
// get weight exactly 0. (The position columns are padded by the caller.)
ggml_tensor * rel_pos_attention_ggml(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * p,
                                     ggml_tensor * bias_u, ggml_tensor * bias_v, float scale) {
    const int64_t T = q->ne[2], T_pad = GGML_PAD(T, 16), R = p->ne[2];
    if (T_pad > T) {
        q = ggml_pad(ctx, q, 0, 0, int(T_pad - T), 0);
        k = ggml_pad(ctx, k, 0, 0, int(T_pad - T), 0);
        v = ggml_pad(ctx, v, 0, 0, int(T_pad - T), 0);
    }
    const int64_t H = q->ne[1];
    ggml_tensor * q_u = ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, bias_u), 0, 2, 1, 3)); // [hd, T_pad, H]
    ggml_tensor * q_v = ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, bias_v), 0, 2, 1, 3));
    ggml_tensor * ac  = ggml_mul_mat(ctx, ggml_permute(ctx, k, 0, 2, 1, 3), q_u); // [T_pad keys, T_pad queries, H]
    ggml_tensor * bd  = ggml_mul_mat(ctx, ggml_permute(ctx, p, 0, 2, 1, 3), q_v); // [R, T_pad queries, H]
    ac = ggml_view_3d(ctx, ac, T, T, H, ac->nb[1], ac->nb[2], 0);
    // Rel-shift: entry (i, j) takes relative position i - j, i.e. raw column T-1-i+j of row i. With a
    // row stride of R-1 elements starting at column T-1 this is a plain strided view.
    ggml_tensor * bd_shifted = ggml_view_3d(ctx, bd, T, T, H, size_t(R - 1) * sizeof(float), bd->nb[2],
                                            size_t(T - 1) * sizeof(float));
    ggml_tensor * attn = ggml_soft_max_ext(ctx, ggml_add(ctx, ac, bd_shifted), nullptr, scale, 0.0f); // [T, T, H]
    if (T_pad > T) {
        attn = ggml_pad(ctx, attn, int(T_pad - T), 0, 0, 0);
    }
    ggml_tensor * v_t = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3)); // [T_pad, hd, H]
    ggml_tensor * o   = ggml_mul_mat(ctx, v_t, attn);                     // [hd, T, H]
    return ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));              // [hd, H, T]
}

ggml_tensor * rel_pos_attention_masked(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * p,
                                       ggml_tensor * bias_u, ggml_tensor * bias_v, float scale, ggml_tensor * mask) {
    const int64_t Tq = q->ne[2], Tk = k->ne[2], H = q->ne[1], R = p->ne[2];
    if (R < Tq + Tk - 1 || Tk < Tq || mask->ne[0] != Tk || mask->ne[1] < Tq) {
        fail(TRANSCRIBE_ERR_INTERNAL, "rel_pos_attention_masked: positions, keys or mask do not fit the queries");
    }
    ggml_tensor * q_u = ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, bias_u), 0, 2, 1, 3)); // [hd, Tq, H]
    ggml_tensor * q_v = ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, bias_v), 0, 2, 1, 3));
    ggml_tensor * ac  = ggml_mul_mat(ctx, ggml_permute(ctx, k, 0, 2, 1, 3), q_u); // [Tk keys, Tq queries, H]
    ggml_tensor * bd  = ggml_mul_mat(ctx, ggml_permute(ctx, p, 0, 2, 1, 3), q_v); // [R, Tq, H]
    // Query i stands for frame Tk-Tq+i: entry (i, j) takes relative position Tk-Tq+i-j, raw column
    // Tq-1-i+j of row i, a strided view as in rel_pos_attention_ggml.
    ggml_tensor * bd_shifted = ggml_view_3d(ctx, bd, Tk, Tq, H, size_t(R - 1) * sizeof(float), bd->nb[2],
                                            size_t(Tq - 1) * sizeof(float));
    ggml_tensor * attn = ggml_soft_max_ext(ctx, ggml_add(ctx, ac, bd_shifted), mask, scale, 0.0f); // [Tk, Tq, H]
    ggml_tensor * v_t  = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3)); // [Tk, hd, H]
    ggml_tensor * o    = ggml_mul_mat(ctx, v_t, attn);                     // [hd, Tq, H]
    return ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));              // [hd, H, Tq]
}

ggml_tensor * self_attention_ggml(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale) {
    auto by_head = [&](ggml_tensor * t) { return ggml_cont(ctx, ggml_permute(ctx, t, 0, 2, 1, 3)); }; // [hd, T, H]
    ggml_tensor * attn = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, by_head(k), by_head(q)), nullptr, scale, 0.0f); // [T, T, H]
    ggml_tensor * v_t  = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));                                     // [T, hd, H]
    ggml_tensor * o    = ggml_mul_mat(ctx, v_t, attn);                                                         // [hd, T, H]
    return ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));                                                   // [hd, H, T]
}

ggml_tensor * self_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale,
                             const ggml_tensor * layer_weight) {
    if (self_attention_kernel_takes(q, k, v) && in_host_memory(layer_weight)) {
        return self_attention_op(ctx, q, k, v, scale);
    }
    return self_attention_ggml(ctx, q, k, v, scale);
}

ggml_tensor * windowed_self_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, int64_t window,
                                      float scale, const ggml_tensor * layer_weight) {
    const int64_t hd = q->ne[0], nh = q->ne[1], T = q->ne[2];
    if (window <= 0 || window >= T) {
        return self_attention(ctx, q, k, v, scale, layer_weight);
    }
    if (self_attention_kernel_takes(q, k, v, window) && in_host_memory(layer_weight)) {
        return self_attention_op(ctx, q, k, v, scale, window);
    }
    return windowed_self_attention_ggml(ctx, q, k, v, window, scale);
}

ggml_tensor * windowed_self_attention_ggml(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, int64_t window,
                                           float scale) {
    const int64_t hd = q->ne[0], nh = q->ne[1], T = q->ne[2];
    if (window <= 0 || window >= T) {
        return self_attention_ggml(ctx, q, k, v, scale);
    }
    const int64_t n_full = T / window, rest = T - n_full * window;
    // The whole windows as a batch: [head_dim, heads, window, n_full] per operand.
    auto windows = [&](ggml_tensor * t) { return ggml_view_4d(ctx, t, hd, nh, window, n_full, t->nb[1], t->nb[2], t->nb[2] * window, 0); };
    auto by_head = [&](ggml_tensor * t) { return ggml_cont(ctx, ggml_permute(ctx, windows(t), 0, 2, 1, 3)); }; // [hd, W, nh, n]
    ggml_tensor * attn = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, by_head(k), by_head(q)), nullptr, scale, 0.0f); // [W, W, nh, n]
    ggml_tensor * v_t  = ggml_cont(ctx, ggml_permute(ctx, windows(v), 1, 2, 0, 3));                                // [W, hd, nh, n]
    ggml_tensor * o    = ggml_cont(ctx, ggml_permute(ctx, ggml_mul_mat(ctx, v_t, attn), 0, 2, 1, 3));            // [hd, nh, W, n]
    o = ggml_reshape_3d(ctx, o, hd, nh, n_full * window);
    if (rest == 0) {
        return o;
    }
    auto tail = [&](ggml_tensor * t) {
        return ggml_cont(ctx, ggml_view_3d(ctx, t, hd, nh, rest, t->nb[1], t->nb[2], t->nb[2] * size_t(n_full * window)));
    };
    return ggml_concat(ctx, o, self_attention_ggml(ctx, tail(q), tail(k), tail(v), scale), 2);
}

ggml_tensor * rel_pos_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * p,
                                ggml_tensor * bias_u, ggml_tensor * bias_v, float scale, bool bf16_scores) {
    if (p->type == GGML_TYPE_BF16) { // rounded by the caller as rel_pos_position_type asked
        ggml_tensor * k16 = to_bf16(ctx, k);
        if (!rel_pos_attention_op_applies(q, k16, v, p, bias_u, bias_v)) {
            fail(TRANSCRIBE_ERR_INTERNAL, "rel_pos_attention: BF16 positions where the kernel does not take them");
        }
        return rel_pos_attention_op(ctx, q, k16, v, p, bias_u, bias_v, scale);
    }
    if (bf16_scores && rel_pos_attention_op_applies(q, k, v, p, bias_u, bias_v)) {
        ggml_tensor * k16 = to_bf16(ctx, k), * p16 = to_bf16(ctx, p);
        if (rel_pos_attention_op_applies(q, k16, v, p16, bias_u, bias_v)) {
            return rel_pos_attention_op(ctx, q, k16, v, p16, bias_u, bias_v, scale);
        }
    }
    if (rel_pos_attention_op_applies(q, k, v, p, bias_u, bias_v)) {
        return rel_pos_attention_op(ctx, q, k, v, p, bias_u, bias_v, scale);
    }
    return rel_pos_attention_ggml(ctx, q, k, v, p, bias_u, bias_v, scale);
}

ggml_type rel_pos_position_type(int64_t hd, int64_t H, int64_t T, const ggml_tensor * bias_u, const ggml_tensor * bias_v,
                                bool bf16_scores) {
    // Descriptors of the operands rel_pos_attention would see (positions: the 2T-1 rows it reads), asked
    // what it asks.
    ggml_init_params params = {ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context * ctx = ggml_init(params);
    if (!ctx) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate a context of descriptors");
    }
    const int64_t R = 2 * T - 1;
    ggml_tensor * qkv = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, H, T);
    ggml_tensor * p   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, H, R);
    ggml_tensor * k16 = ggml_new_tensor_3d(ctx, GGML_TYPE_BF16, hd, H, T);
    ggml_tensor * p16 = ggml_new_tensor_3d(ctx, GGML_TYPE_BF16, hd, H, R);
    ggml_type type = GGML_TYPE_COUNT;
    if (bf16_scores && rel_pos_attention_op_applies(qkv, qkv, qkv, p, bias_u, bias_v) &&
        rel_pos_attention_op_applies(qkv, k16, qkv, p16, bias_u, bias_v)) {
        type = GGML_TYPE_BF16;
    } else if (rel_pos_attention_op_applies(qkv, qkv, qkv, p, bias_u, bias_v)) {
        type = GGML_TYPE_F32;
    }
    ggml_free(ctx);
    return type;
}

} // namespace ops

} // namespace transcribe
