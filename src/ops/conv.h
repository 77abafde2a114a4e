// The op layer's convolutions for the FastConformer subsampling.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether ops::first_conv takes our fused kernel for these operands.
bool first_conv_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                           const ggml_tensor * mask);

namespace ops {
// relu(conv3x3_stride2_pad1(x) + bias) * mask for a one-channel image x [W, H] and kernel [3, 3, 1, C]:
// [C, W', H'] (channels first). Our fused kernel (kernels/first_conv.h) or an F32 im2col + product.
ggml_tensor * first_conv(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask);
} // namespace ops

} // namespace transcribe
