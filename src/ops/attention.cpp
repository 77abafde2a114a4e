#include "attention.h"

#include "placement.h"

#include "kernels/causal_attention.h"

namespace transcribe {

bool causal_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache) {
    return causal_attention_kernel_takes(q, k_cache, v_cache) && in_host_memory(k_cache) && in_host_memory(v_cache);
}

bool decode_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache,
                                 const ggml_tensor * pos, const ggml_tensor * rows) {
    return decode_attention_kernel_takes(q, k_cache, v_cache, pos, rows) && in_host_memory(k_cache) &&
           in_host_memory(v_cache);
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
                               ggml_tensor * mask, int64_t n_kv, float scale) {
    if (n_kv == q->ne[2] && causal_attention_op_applies(q, k_cache, v_cache)) {
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

} // namespace ops

} // namespace transcribe
