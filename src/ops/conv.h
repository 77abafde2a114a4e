// The op layer's convolutions for the FastConformer: the subsampling's 3x3 stride-2 ones (padding 1), the
// conv module's depthwise one.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether ops::conv_then_depthwise takes our fused kernel for these operands.
bool conv_then_depthwise_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                                    const ggml_tensor * mask, const ggml_tensor * dw_kernel, const ggml_tensor * dw_bias,
                                    const ggml_tensor * dw_mask);
// Whether ops::depthwise_conv takes our kernel for these operands.
bool depthwise_conv_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                               const ggml_tensor * mask);
// Whether ops::glu_conv takes our fused kernel for these operands.
bool glu_conv_op_applies(const ggml_tensor * y, const ggml_tensor * kernel, const ggml_tensor * bias);

namespace ops {
// The subsampling's first two: y = relu(conv(x) + bias) * mask for a one-channel image x [W, H] and kernel
// [3, 3, 1, C], then (depthwise(y, dw_kernel) + dw_bias) * dw_mask: [C, W'', H''] (channels first; ' is
// (n - 1) / 2 + 1; masks [C, 1, rows]). Our fused kernel (kernels/subsampling_conv.h) or an F32 im2col +
// product and ggml's depthwise convolution.
// CAUSAL (NeMo's CausalConv2D, cache-aware streaming models): each convolution pads 2 before and 1 after
// in both dimensions instead of 1 each side, and ' is n / 2 + 1; ggml's ops then (our kernels pad 1).
ggml_tensor * conv_then_depthwise(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias,
                                  ggml_tensor * mask, ggml_tensor * dw_kernel, ggml_tensor * dw_bias, ggml_tensor * dw_mask,
                                  bool causal = false);
// (depthwise(x, kernel) + bias) * mask for x [C, W, H] (contiguous) and kernel [3, 3, 1, C]: [C, W', H'].
// Our kernel or ggml's depthwise convolution.
ggml_tensor * depthwise_conv(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask,
                             bool causal = false);
// A depthwise convolution over time without padding: x [d, T + K - 1] (the caller's padding or cached
// frames already in front and behind), kernel [K, d]: [d, T], out[c][t] = sum_k x[c][t + k] kernel[k][c].
ggml_tensor * depthwise_conv_time(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel);
// The Conformer conv module between its pointwise convs: silu(depthwise_conv(a * sigmoid(g)) + bias)
// for y [2d, T] (a its rows 0..d-1, g rows d..2d-1), kernel [K, d] over time zero-padded by (K-1)/2 each
// side: [d, T]. Our fused kernel (kernels/glu_conv.h) or ggml's ops.
ggml_tensor * glu_conv(ggml_context * ctx, ggml_tensor * y, ggml_tensor * kernel, ggml_tensor * bias);
// A 2-D convolution with F32 operands throughout (ggml_conv_2d gathers its im2col in F16, which rounds the
// input): x [W, H, C_in, N], kernel [KW, KH, C_in, C_out], the same stride and zero padding in both
// dimensions: [W', H', C_out, N].
ggml_tensor * conv2d(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, int stride, int pad);
// Qwen3-ASR's chunk convolutions (3x3, stride 2, padding 1), channels first ([C, F, T, N]), ' being
// (n - 1) / 2 + 1. conv(x) + bias of one-channel images x [T, F, N] (kernel [3, 3, 1, C] F32): [C, F', T', N].
ggml_tensor * conv3x3_s2_single_channel(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias);
// The taps of x [C, F, T, N] for a product with a [9 C, C_out] matrix whose row (kf * 3 + kt) * C + c is
// tap (kf, kt) of input channel c: [9 C, F', T', N]. LAYER_WEIGHT: that matrix (where it lies decides
// between our kernel and ggml's ops).
ggml_tensor * im2col3x3_s2(ggml_context * ctx, ggml_tensor * x, const ggml_tensor * layer_weight);
// The same two in ggml's ops, for any backend.
ggml_tensor * conv3x3_s2_single_channel_ggml(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias);
ggml_tensor * im2col3x3_s2_ggml(ggml_context * ctx, ggml_tensor * x);
// GLU over the rows: a * sigmoid(g) for y [2d, T] (a its rows 0..d-1, g rows d..2d-1): [d, T].
ggml_tensor * glu(ggml_context * ctx, ggml_tensor * y);
} // namespace ops

} // namespace transcribe
