// The op layer's normalizations: our fused CPU kernels (kernels/norms.h) where they take the operands
// and the weights are in host memory, ggml's separate norm / mul / add ops otherwise.
#pragma once

#include "ggml.h"

#include <vector>

namespace transcribe {

// Whether ops::layer_norm / ops::rms_norm take our kernel for these operands.
bool layer_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w, const ggml_tensor * b);
bool rms_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w);

namespace ops {
// (x - mean) / sqrt(var + eps) * w + b over each row.
ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps);
// The same rows for products with each W of FEEDS only (matmul(W, result)): made straight into their
// activation type where our kernels take them all (ops::gemm_activation_type), else F32.
ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps,
                         const std::vector<ggml_tensor *> & feeds);
// x / sqrt(mean(x^2) + eps) * w over each row.
ggml_tensor * rms_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, float eps);
} // namespace ops

} // namespace transcribe
