// Plain self-attention (a Transformer encoder's: every query against every key, no mask, no positions) in
// one op on x86 CPUs with AVX-512.
//
// In ggml it is a batched product of q and k over the head dimension, the softmax, a transposed copy of
// V and a second product; with Sortformer's small heads (24 dimensions) the first product runs as one
// short dot product per score, far below the core's F32 rate. This op takes 16 queries of one head at a
// time against every key, with scores and probabilities in F32 on the stack.
#pragma once

#include "ggml.h"

namespace transcribe {

// The most keys (time steps) the op takes: its per-thread scores live on the stack.
constexpr int64_t SELF_ATTENTION_MAX_KEYS = 2048;

// Whether the kernel takes these: q, k, v [head_dim, heads, T], F32 with each head's row contiguous,
// head_dim a multiple of 8 up to 128, T >= 1 and at most SELF_ATTENTION_MAX_KEYS keys a query (T, or
// WINDOW where that is smaller); a CPU that runs the kernel.
bool self_attention_kernel_takes(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v, int64_t window = 0);

// For query i, head h: softmax_j(q_i . k_j * scale) summed over v_j, j over all T keys or, with WINDOW > 0,
// over those of i's window (consecutive windows of WINDOW frames, the last maybe shorter). Returns
// [head_dim, heads, T] F32.
ggml_tensor * self_attention_op(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, float scale,
                                int64_t window = 0);

} // namespace transcribe
