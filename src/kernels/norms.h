// Row normalizations with their affine weights in one op, on x86 CPUs with AVX-512. ggml computes
// them as separate graph ops (norm, mul, add), each a pass over the activations in memory, and its
// RMSNorm sums the squares one scalar double at a time. The FastConformer runs five LayerNorms per
// layer, Qwen3 four RMSNorms per layer, at every decode step too.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether layer_norm_op() applies: a contiguous F32 matrix X whose rows are normalized, F32 W and B of
// its row length in host memory, and a CPU that runs the kernel.
bool layer_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w, const ggml_tensor * b);

// (x - mean) / sqrt(var + eps) * w + b over each row of X, mean and variance in double precision.
ggml_tensor * layer_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps);

// Whether rms_norm_op() applies: a contiguous F32 tensor X (any number of dimensions) whose rows are
// normalized, an F32 W of its row length in host memory, and a CPU that runs the kernel.
bool rms_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w);

// x / sqrt(mean(x^2) + eps) * w over each row of X, as ggml_mul(ggml_rms_norm(x, eps), w) computes it:
// the squares summed in double, the scale rounded to F32 and applied before the weight.
ggml_tensor * rms_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, float eps);

} // namespace transcribe
