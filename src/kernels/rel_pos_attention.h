// FastConformer's self-attention with relative positions (Transformer-XL, as NeMo's
// RelPositionMultiHeadAttention computes it) in one op on x86 CPUs with AVX-512.
//
// In ggml it is a dozen ops: bias adds and permuted copies of q, zero padding for tinyBLAS, three
// batched F32 products (the position term over all 2T-1 positions although each query sees T of
// them), the shifted add, the softmax, a transposed copy of V and the output's permute; each a pass
// over memory, and the products run far below the core's F32 rate. This op takes 16 queries of one
// head at a time against every key, computes the position term only for the positions those queries
// see, and keeps scores and probabilities in F32 on the stack.
#pragma once

#include "ggml.h"

namespace transcribe {

// The most keys (time steps) the op takes: its per-thread scores live on the stack.
constexpr int64_t REL_POS_ATTENTION_MAX_KEYS = 2048;

// Whether the kernel takes these: q, k, v [head_dim, heads, T] and p [head_dim, heads, R >= 2T-1], all
// F32 with each head's row contiguous (or k and p both BF16, on a CPU with AVX-512 BF16: the scores are
// then sums of products of BF16 values, the queries plus biases rounded to BF16, in F32), head_dim 16,
// 32, 64 or 128, 1 <= T <= REL_POS_ATTENTION_MAX_KEYS;
// bias_u and bias_v [head_dim, heads] contiguous F32; a CPU that runs the kernel. (The op layer also
// checks that the biases are in host memory.)
bool rel_pos_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v,
                                    const ggml_tensor * p, const ggml_tensor * bias_u, const ggml_tensor * bias_v);

// For query i, head h: softmax_j(((q_i + u) . k_j + (q_i + v_bias) . p_{T-1-i+j}) * scale) summed over
// v_j, where column r of p holds relative position T-1-r. Returns [head_dim, heads, T] F32.
ggml_tensor * rel_pos_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * p, ggml_tensor * bias_u, ggml_tensor * bias_v, float scale);

} // namespace transcribe
