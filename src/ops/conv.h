// The op layer's convolutions for the FastConformer: the subsampling's first, the conv module's depthwise.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether ops::first_conv takes our fused kernel for these operands.
bool first_conv_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                           const ggml_tensor * mask);
// Whether ops::glu_conv takes our fused kernel for these operands.
bool glu_conv_op_applies(const ggml_tensor * y, const ggml_tensor * kernel, const ggml_tensor * bias);

namespace ops {
// relu(conv3x3_stride2_pad1(x) + bias) * mask for a one-channel image x [W, H] and kernel [3, 3, 1, C]:
// [C, W', H'] (channels first). Our fused kernel (kernels/first_conv.h) or an F32 im2col + product.
ggml_tensor * first_conv(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask);
// The Conformer conv module between its pointwise convs: silu(depthwise_conv(a * sigmoid(g)) + bias)
// for y [2d, T] (a its rows 0..d-1, g rows d..2d-1), kernel [K, d] over time zero-padded by (K-1)/2 each
// side: [d, T]. Our fused kernel (kernels/glu_conv.h) or ggml's ops.
ggml_tensor * glu_conv(ggml_context * ctx, ggml_tensor * y, ggml_tensor * kernel, ggml_tensor * bias);
} // namespace ops

} // namespace transcribe
