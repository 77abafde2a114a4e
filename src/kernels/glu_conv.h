// The middle of the Conformer convolution module on x86 CPUs with AVX-512: GLU over the pointwise
// conv's two halves, the depthwise convolution over time (BatchNorm folded into its kernel and bias)
// and SiLU, in one pass over each block of 16 channels. In ggml it is seven ops (sigmoid, multiply, a
// transposed copy, padding, ssm_conv, bias add, SiLU), each a pass over memory.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether the kernel takes these: y [2d, T] F32 with contiguous rows, kernel [K, d] and bias [d]
// contiguous F32, d a multiple of 16, K odd and at most 31, a CPU that runs it. (The op layer checks
// that kernel and bias are in host memory.)
bool glu_conv_kernel_takes(const ggml_tensor * y, const ggml_tensor * kernel, const ggml_tensor * bias);

// silu(depthwise_conv_time(a * sigmoid(g)) + bias) where a, g are rows 0..d-1 and d..2d-1 of each of
// y's columns, the convolution zero-padded by (K-1)/2 on each side: [d, T].
ggml_tensor * glu_conv_op(ggml_context * ctx, ggml_tensor * y, ggml_tensor * kernel, ggml_tensor * bias);

} // namespace transcribe
