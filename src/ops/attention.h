// The op layer's causal attention over a KV cache: our CPU kernels (kernels/causal_attention.h) for a
// prompt from position 0 and for a single decode step where they take the operands and the caches are
// in host memory, ggml's flash attention (F32 softmax) otherwise.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether ops::causal_attention takes our prompt / decode kernel for these operands.
bool causal_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache);
bool decode_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache,
                                 const ggml_tensor * pos);

namespace ops {
// Q [head_dim, heads, T] at positions pos (I32 [T]) against the first n_kv rows of the caches
// k_cache / v_cache [head_dim * kv_heads, rows] (which this graph may have just written); mask: the
// causal mask ggml's flash attention needs where our kernels do not apply. Returns [head_dim, heads, T].
ggml_tensor * causal_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                               ggml_tensor * pos, ggml_tensor * mask, int64_t n_kv, float scale);
} // namespace ops

} // namespace transcribe
