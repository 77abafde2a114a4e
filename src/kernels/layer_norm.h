// LayerNorm with its affine weight and bias in one pass over each row, on x86 CPUs with AVX-512.
// ggml computes it as three graph ops (norm, mul, add), each a pass over the activations in memory;
// the FastConformer runs five per layer.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether layer_norm_op() applies: a contiguous F32 matrix X whose rows are normalized, F32 W and B of
// its row length in host memory, and a CPU that runs the kernel.
bool layer_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w, const ggml_tensor * b);

// (x - mean) / sqrt(var + eps) * w + b over each row of X, mean and variance in double precision.
ggml_tensor * layer_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps);

} // namespace transcribe
