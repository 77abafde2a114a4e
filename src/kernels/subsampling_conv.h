// The FastConformer subsampling's 3x3 stride-2 convolutions (padding 1) on x86 CPUs with AVX-512, on
// channels-first maps ([C, W, H]: a position's channels contiguous):
// - the first convolution (one input channel, the mel image; bias, ReLU, valid-length mask) fused with
//   the depthwise convolution after it (bias, mask): its output, the encoder's largest activation (C x
//   half the mels x half the frames), is made a few rows at a time in registers' reach and consumed at
//   once, never written out; as separate ops it was written, read back, permuted for ggml's depthwise
//   convolution and permuted again;
// - a depthwise convolution alone (bias, mask), the subsampling's second.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether the fused kernel takes these: X [W, H] F32 contiguous; kernels [3, 3, 1, C] and biases [C] F32
// contiguous; masks [C, 1, H'] and [C, 1, H''] F32 contiguous (one value per output row, repeated over
// C) for the two outputs' heights; C a multiple of 16; a CPU that runs it. All of them must be in host
// memory (the op layer checks where they are).
bool conv_then_depthwise_kernel_takes(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * mask,
                                      const ggml_tensor * dw_kernel, const ggml_tensor * dw_mask);

// dw_mask * (depthwise(mask * relu(conv(x) + bias), dw_kernel) + dw_bias): [C, W'', H''], where ' is
// (n - 1) / 2 + 1.
ggml_tensor * conv_then_depthwise_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias,
                                     ggml_tensor * mask, ggml_tensor * dw_kernel, ggml_tensor * dw_bias, ggml_tensor * dw_mask);

// Whether the depthwise kernel takes these: X [C, W, H] F32 contiguous, kernel [3, 3, 1, C] and bias [C]
// F32 contiguous, mask [C, 1, H'] F32 contiguous, C a multiple of 16, a CPU that runs it.
bool depthwise_conv_kernel_takes(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * mask);

// mask * (depthwise(x, kernel) + bias): [C, W', H'].
ggml_tensor * depthwise_conv_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask);

} // namespace transcribe
