// Row normalizations with their affine weights in one op, on x86 CPUs with AVX-512. ggml computes
// them as separate graph ops (norm, mul, add), each a pass over the activations in memory, and its
// RMSNorm sums the squares one scalar double at a time. The FastConformer runs five LayerNorms per
// layer, Qwen3 four RMSNorms per layer, at every decode step too.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether the kernel takes X: a contiguous F32 matrix whose rows are normalized, on a CPU that runs it.
// W and B must also be F32 vectors of its row length in host memory (the op layer checks where they are).
bool layer_norm_kernel_takes(const ggml_tensor * x);

// (x - mean) / sqrt(var + eps) * w + b over each row of X, mean and variance in double precision.
// OUT_TYPE other than F32: the rows made straight into a product's activations, Q8_0 as our GEMM's Q8_0
// rows (avx512_gemm_quantize_q8_0_rows, I32 [row bytes / 4, N]) or BF16 as ggml rounds to it, where
// layer_norm_kernel_makes says the kernel can.
bool layer_norm_kernel_makes(ggml_type out_type, int64_t row_length);
ggml_tensor * layer_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps,
                            ggml_type out_type = GGML_TYPE_F32);

// Whether the kernel takes X: a contiguous F32 tensor (any number of dimensions) whose rows are
// normalized, on a CPU that runs it; W as for the layer norm.
bool rms_norm_kernel_takes(const ggml_tensor * x);

// x / sqrt(mean(x^2) + eps) * w over each row of X, as ggml_mul(ggml_rms_norm(x, eps), w) computes it:
// the squares summed in double, the scale rounded to F32 and applied before the weight.
ggml_tensor * rms_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, float eps);

} // namespace transcribe
