// Causal self-attention over the KV cache on x86 CPUs with AVX-512: a prompt written from position 0
// (the LM's prefill), and one query at a time (decode).
//
// Prefill: ggml's CPU flash attention runs 30-40 GFLOP/s on Qwen3's 152-token prompts (tiles of 64
// queries, K and V converted per tile, keys past the diagonal computed then masked); this op takes 16
// queries at a time against only the keys they see, in F32 like ggml's.
// Decode: ggml's flash attention takes ~4 ms a token for Qwen3-1.7B at 150 positions (each query head
// reads its cache head's rows again; an F16 cache is summed in F16), 5-10 % of a decode step; this op
// reads each K and V row once for the two query heads that share it, in F32.
#pragma once

#include "ggml.h"

namespace transcribe {

// The longest prompt the op takes (its per-thread scores live on the stack: 16 queries x this many keys,
// 256 KiB, within a worker thread's stack; a forced aligner's 180 s piece is some 3400 positions).
constexpr int64_t CAUSAL_ATTENTION_MAX_KEYS = 4096;

// Whether the kernel takes these: Q [head_dim, heads, T] F32 contiguous with head_dim 128 (Qwen3), 64
// or 16 (the test fixture's), 1 < T <= CAUSAL_ATTENTION_MAX_KEYS; K and V caches [head_dim * kv_heads,
// positions >= T] of F16 or F32, heads a multiple of kv_heads; a CPU that runs the kernel. The caches
// must also be in host memory (the op layer checks where they are).
bool causal_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache);

// softmax(Q K^T * scale, keys j <= query i) V for query i at position i, keys and values from cache
// rows 0..T-1, query head h reading cache head h / (heads / kv_heads): [head_dim, heads, T] F32, what
// ggml_flash_attn_ext computes with a causal mask (GGML_PREC_F32). The caches may be views that
// this graph writes first (ggml_set_rows): they are the op's sources.
ggml_tensor * causal_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                                  float scale);

// Decode: Q [head_dim, heads, B], query b at the position POS[b] holds (I32 [B], read when the graph
// runs: one graph serves every step) against the POS[b] + 1 cache rows ending at row ROWS[b] (I64 [B],
// the row its K/V were written to; ROWS null: row POS[b], i.e. rows 0..POS[b]). B sequences kept in
// their own stretches of one cache decode in one op. Head pairing, types and result as
// causal_attention_op.
bool decode_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k_cache, const ggml_tensor * v_cache,
                                   const ggml_tensor * pos, const ggml_tensor * rows);
ggml_tensor * decode_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k_cache, ggml_tensor * v_cache,
                                  ggml_tensor * pos, ggml_tensor * rows, float scale);

} // namespace transcribe
