// The op layer's causal attention over a KV cache: our CPU kernels (kernels/causal_attention.h) for a
// prompt from position 0 and for decode steps where they take the operands and the caches are in host
// memory, ggml's flash attention (F32 softmax) otherwise.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether ops::causal_attention / ops::decode_attention take our prompt / decode kernel for these operands.
bool causal_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache);
bool decode_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache,
                                 const ggml_tensor * pos, const ggml_tensor * rows);
bool rel_pos_attention_op_applies(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v,
                                  const ggml_tensor * p, const ggml_tensor * bias_u, const ggml_tensor * bias_v);

namespace ops {
// A prompt: Q [head_dim, heads, T] at positions 0..T-1 against the first n_kv rows of the caches
// k_cache / v_cache [head_dim * kv_heads, rows] (which this graph may have just written); mask: the
// causal mask [n_kv, T] ggml's flash attention needs where our kernel does not apply. K and V may also
// be this graph's own tensors (one pass, no cache): then LAYER_WEIGHT (one of the layer's) says where
// the graph runs. Returns [head_dim, heads, T].
ggml_tensor * causal_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                               ggml_tensor * mask, int64_t n_kv, float scale, const ggml_tensor * layer_weight = nullptr);
// Decode steps of B sequences: query b (Q [head_dim, heads, B]) at position pos[b] (I32 [B]) whose K/V
// went to cache row rows[b] (I64 [B]) reads the pos[b] + 1 rows ending there; mask [n_kv, B]: the
// same as an additive mask over the first n_kv rows, for ggml's flash attention where our kernel does
// not apply. Returns [head_dim, heads, B].
ggml_tensor * decode_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                               ggml_tensor * pos, ggml_tensor * rows, ggml_tensor * mask, int64_t n_kv, float scale);
// Self-attention with relative positions (Transformer-XL, FastConformer): q, k, v [head_dim, heads, T],
// p [head_dim, heads, R >= 2T-1] the projected position embeddings (column r: relative position T-1-r),
// bias_u / bias_v [head_dim, heads]. For query i: softmax_j(((q_i + u) . k_j + (q_i + v_bias) .
// p_{T-1-i+j}) * scale) summed over v_j, no mask. Returns [head_dim, heads, T]. BF16_SCORES (models whose
// weights are BF16 or quantized): where our kernel runs with BF16 dot products, k and p are rounded to
// BF16 once and the scores are sums of BF16 products (twice the products an instruction); F32 otherwise.
// P may also come already rounded to BF16 (from rel_pos_position_type's table): it is then taken as is.
ggml_tensor * rel_pos_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * p,
                                ggml_tensor * bias_u, ggml_tensor * bias_v, float scale, bool bf16_scores = false);
// The type rel_pos_attention's kernel takes the projected positions in for heads of HD dimensions, H
// heads, T frames and these biases: BF16 where BF16_SCORES are asked and run, F32 where the kernel runs
// with F32 scores, GGML_TYPE_COUNT where only ggml's ops apply. What a caller keeping the projections
// between runs (they depend on T alone) must store them as to get the same bits as the graph's own.
ggml_type rel_pos_position_type(int64_t hd, int64_t H, int64_t T, const ggml_tensor * bias_u, const ggml_tensor * bias_v,
                                bool bf16_scores);
// Plain self-attention without a mask (a Transformer encoder's): q, k, v [head_dim, heads, T]; for query
// i: softmax_j(q_i . k_j * scale) summed over v_j. Returns [head_dim, heads, T]. Our kernel runs where
// the layer's weights (LAYER_WEIGHT, one of them) are in host memory, ggml's ops elsewhere.
ggml_tensor * self_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale,
                             const ggml_tensor * layer_weight);
ggml_tensor * self_attention_ggml(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale);
// Self-attention within consecutive windows of WINDOW frames (the last one may be shorter): query i sees
// the keys of its own window only (Qwen3-ASR's audio encoder, its cu_seqlens). WINDOW <= 0 or >= T:
// self_attention. q, k, v [head_dim, heads, T] -> [head_dim, heads, T].
ggml_tensor * windowed_self_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, int64_t window,
                                      float scale, const ggml_tensor * layer_weight);
ggml_tensor * windowed_self_attention_ggml(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, int64_t window,
                                           float scale);
// Relative-position attention under a mask, over keys that may reach before the queries (NeMo's
// cache-aware streaming: the cached frames of earlier chunks, then this chunk's): q [head_dim, heads, Tq]
// the last Tq of the Tk frames k, v [head_dim, heads, Tk] stand for; p [head_dim, heads, R >= Tq + Tk - 1]
// (column r: relative position Tk-1-r, as for a window of Tk frames); mask [Tk, Tq] F32, 0 where query i
// may see key j, -INFINITY where not (every query must see one key). Scores as rel_pos_attention's, in
// F32, by ggml's ops. Returns [head_dim, heads, Tq].
ggml_tensor * rel_pos_attention_masked(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * p,
                                       ggml_tensor * bias_u, ggml_tensor * bias_v, float scale, ggml_tensor * mask);
// The same in ggml's own ops, for any backend: what rel_pos_attention builds where our kernel does not run.
ggml_tensor * rel_pos_attention_ggml(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * p,
                                     ggml_tensor * bias_u, ggml_tensor * bias_v, float scale);
} // namespace ops

} // namespace transcribe
