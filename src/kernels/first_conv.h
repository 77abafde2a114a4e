// The FastConformer subsampling's first convolution on x86 CPUs with AVX-512: one input channel (the
// mel image), C output channels, 3x3 kernel, stride 2, padding 1, then bias, ReLU and the valid-length
// mask, in one pass that writes the [C, W', H'] map once. As an F32 im2col + product, its 9-long
// patches leave ggml's matmul bound by per-tile overhead, and the bias, ReLU and mask were three more
// passes over the largest activation of the encoder.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether the kernel takes these: X [W, H] F32 contiguous, kernel [3, 3, 1, C] and bias [C] F32
// contiguous, mask [C, 1, H'] F32 contiguous (one value per output row, repeated over C), C a multiple
// of 16, a CPU that runs it. All of them must be in host memory (the op layer checks where they are).
bool first_conv_kernel_takes(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * mask);

// relu(conv(x) + bias) * mask: [C, (W - 1) / 2 + 1, (H - 1) / 2 + 1].
ggml_tensor * first_conv_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask);

} // namespace transcribe
