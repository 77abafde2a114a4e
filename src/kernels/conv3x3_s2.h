// 3x3 stride-2 convolutions with padding 1 on channels-first maps ([C, F, T, N]: a position's channels
// contiguous, then frequency, then time, then the batch), as Qwen3-ASR's audio encoder stacks three of
// them over its mel chunks: the first (one input channel, the mel) computed directly with its channels
// in the inner loop, the others' taps gathered (im2col) as runs of C channels for one product with their
// [9 C, C_out] matrix. ggml's im2col gathers one value at a time and puts the channel outermost (a K of
// 9 for the first convolution, a permute between the others); this layout needs neither.
#pragma once

#include "ggml.h"

namespace transcribe {

// conv(x) + bias of a one-channel image: x [T, F, N] (time fastest: a mel chunk as the log-mel holds it),
// kernel [3 (over T), 3 (over F), 1, C] and bias [C], all F32 contiguous in host memory: [C, F', T', N]
// where ' is (n - 1) / 2 + 1.
ggml_tensor * conv3x3_s2_single_channel_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias);

// The taps of each output position: x [C, F, T, N] F32 contiguous in host memory -> [9 C, F', T', N], row
// (kf * 3 + kt) * C + c holding x[c, 2 f' + kf - 1, 2 t' + kt - 1] (0 outside the map).
ggml_tensor * im2col3x3_s2_op(ggml_context * ctx, ggml_tensor * x);

} // namespace transcribe
