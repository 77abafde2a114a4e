#include "conv.h"

#include "placement.h"

#include "kernels/conv3x3_s2.h"
#include "kernels/glu_conv.h"
#include "kernels/subsampling_conv.h"

namespace transcribe {

bool conv_then_depthwise_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                                    const ggml_tensor * mask, const ggml_tensor * dw_kernel, const ggml_tensor * dw_bias,
                                    const ggml_tensor * dw_mask) {
    return conv_then_depthwise_kernel_takes(x, kernel, mask, dw_kernel, dw_mask) && is_host_f32_vector(bias, kernel->ne[3]) &&
           is_host_f32_vector(dw_bias, kernel->ne[3]) && in_host_memory(kernel) && in_host_memory(dw_kernel);
}

bool depthwise_conv_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                               const ggml_tensor * mask) {
    return depthwise_conv_kernel_takes(x, kernel, mask) && is_host_f32_vector(bias, x->ne[0]) && in_host_memory(kernel);
}

bool glu_conv_op_applies(const ggml_tensor * y, const ggml_tensor * kernel, const ggml_tensor * bias) {
    return glu_conv_kernel_takes(y, kernel, bias) && in_host_memory(kernel) && in_host_memory(bias);
}

namespace ops {

ggml_tensor * conv_then_depthwise(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias,
                                  ggml_tensor * mask, ggml_tensor * dw_kernel, ggml_tensor * dw_bias, ggml_tensor * dw_mask,
                                  bool causal) {
    if (!causal && conv_then_depthwise_op_applies(x, kernel, bias, mask, dw_kernel, dw_bias, dw_mask)) {
        return conv_then_depthwise_op(ctx, x, kernel, bias, mask, dw_kernel, dw_bias, dw_mask);
    }
    const int pad = causal ? 0 : 1;
    if (causal) {
        x = ggml_pad_ext(ctx, x, 2, 1, 2, 1, 0, 0, 0, 0);
    }
    // An F32 im2col (ggml_conv_2d would round the input to F16) and a product; the 9-long patches are
    // zero-padded to 16, which ggml's fast F32 matmul needs.
    ggml_tensor * cols = ggml_im2col(ctx, kernel, ggml_reshape_4d(ctx, x, x->ne[0], x->ne[1], 1, 1), 2, 2, pad, pad, 1, 1,
                                     true, GGML_TYPE_F32); // [9, W', H', 1]
    const int64_t OW = cols->ne[1], OH = cols->ne[2], C = kernel->ne[3], patch = cols->ne[0];
    ggml_tensor * patches = ggml_reshape_2d(ctx, cols, patch, OW * OH);
    ggml_tensor * filters = ggml_reshape_2d(ctx, kernel, patch, C);
    if (const int extra = int(GGML_PAD(patch, 16) - patch)) {
        patches = ggml_pad(ctx, patches, extra, 0, 0, 0);
        filters = ggml_pad(ctx, filters, extra, 0, 0, 0);
    }
    ggml_tensor * y = ggml_reshape_3d(ctx, ggml_add(ctx, ggml_mul_mat(ctx, filters, patches), bias), C, OW, OH);
    return depthwise_conv(ctx, ggml_mul(ctx, ggml_relu(ctx, y), mask), dw_kernel, dw_bias, dw_mask, causal);
}

ggml_tensor * depthwise_conv(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask,
                             bool causal) {
    if (!causal && depthwise_conv_op_applies(x, kernel, bias, mask)) {
        return depthwise_conv_op(ctx, x, kernel, bias, mask);
    }
    const int pad = causal ? 0 : 1;
    if (causal) {
        x = ggml_pad_ext(ctx, x, 0, 0, 2, 1, 2, 1, 0, 0);
    }
    ggml_tensor * whc = ggml_permute(ctx, x, 2, 0, 1, 3); // a [W, H, C] view with contiguous channels
    // That path wants the [3, 3, 1, C] kernel channels-last too (a 9 x C copy), as ggml's own test builds it.
    ggml_tensor * k = ggml_permute(ctx, ggml_cont(ctx, ggml_permute(ctx, kernel, 2, 3, 1, 0)), 3, 2, 0, 1);
    ggml_tensor * y = ggml_conv_2d_dw_direct(ctx, k, whc, 2, 2, pad, pad, 1, 1); // laid out as its input
    return ggml_mul(ctx, ggml_add(ctx, ggml_permute(ctx, y, 1, 2, 0, 3), bias), mask);
}

ggml_tensor * depthwise_conv_time(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel) {
    const int64_t d = x->ne[0], T_ext = x->ne[1], K = kernel->ne[0];
    ggml_tensor * tx = ggml_cont(ctx, ggml_transpose(ctx, x)); // [T + K - 1, d]
    return ggml_reshape_2d(ctx, ggml_ssm_conv(ctx, ggml_reshape_3d(ctx, tx, T_ext, d, 1), kernel), d, T_ext - K + 1);
}

ggml_tensor * glu_conv(ggml_context * ctx, ggml_tensor * y, ggml_tensor * kernel, ggml_tensor * bias) {
    if (glu_conv_op_applies(y, kernel, bias)) {
        return glu_conv_op(ctx, y, kernel, bias);
    }
    const int K = int(kernel->ne[0]);
    ggml_tensor * padded = ggml_pad_ext(ctx, glu(ctx, y), 0, 0, K / 2, K / 2, 0, 0, 0, 0);
    return ggml_silu(ctx, ggml_add(ctx, depthwise_conv_time(ctx, padded, kernel), bias));
}

ggml_tensor * glu(ggml_context * ctx, ggml_tensor * y) {
    const int64_t d = y->ne[0] / 2, T = y->ne[1];
    ggml_tensor * a    = ggml_view_2d(ctx, y, d, T, y->nb[1], 0);
    ggml_tensor * gate = ggml_view_2d(ctx, y, d, T, y->nb[1], size_t(d) * ggml_element_size(y));
    return ggml_mul(ctx, a, ggml_sigmoid(ctx, gate));
}

ggml_tensor * conv2d(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, int stride, int pad) {
    ggml_tensor * cols = ggml_im2col(ctx, kernel, x, stride, stride, pad, pad, 1, 1, true, GGML_TYPE_F32); // [K, W', H', N]
    ggml_tensor * y    = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2] * cols->ne[3]),
                                      ggml_reshape_2d(ctx, kernel, kernel->ne[0] * kernel->ne[1] * kernel->ne[2], kernel->ne[3]));
    y = ggml_reshape_4d(ctx, y, cols->ne[1], cols->ne[2], cols->ne[3], kernel->ne[3]); // [W', H', N, C_out]
    return ggml_cont(ctx, ggml_permute(ctx, y, 0, 1, 3, 2));
}

ggml_tensor * conv3x3_s2_single_channel(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias) {
    if (x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && kernel->type == GGML_TYPE_F32 && bias->type == GGML_TYPE_F32 &&
        in_host_memory(kernel) && in_host_memory(bias)) {
        return conv3x3_s2_single_channel_op(ctx, x, kernel, bias);
    }
    return conv3x3_s2_single_channel_ggml(ctx, x, kernel, bias);
}

ggml_tensor * conv3x3_s2_single_channel_ggml(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias) {
    ggml_tensor * y = conv2d(ctx, ggml_reshape_4d(ctx, x, x->ne[0], x->ne[1], 1, x->ne[2]), kernel, 2, 1); // [T', F', C, N]
    y = ggml_add(ctx, y, ggml_reshape_3d(ctx, bias, 1, 1, bias->ne[0]));
    return ggml_cont(ctx, ggml_permute(ctx, y, 2, 1, 0, 3));
}

ggml_tensor * im2col3x3_s2(ggml_context * ctx, ggml_tensor * x, const ggml_tensor * layer_weight) {
    if (x->type == GGML_TYPE_F32 && in_host_memory(layer_weight)) {
        return im2col3x3_s2_op(ctx, ggml_cont(ctx, x));
    }
    return im2col3x3_s2_ggml(ctx, x);
}

ggml_tensor * im2col3x3_s2_ggml(ggml_context * ctx, ggml_tensor * x) {
    const int64_t C = x->ne[0];
    ggml_tensor * image = ggml_cont(ctx, ggml_permute(ctx, x, 2, 1, 0, 3));                        // [T, F, C, N]
    ggml_tensor * shape = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, C, 1);                       // im2col reads its shape
    ggml_tensor * cols  = ggml_im2col(ctx, shape, image, 2, 2, 1, 1, 1, 1, true, GGML_TYPE_F32);    // [C 9, T', F', N]
    const int64_t To = cols->ne[1], Fo = cols->ne[2], N = cols->ne[3];
    cols = ggml_cont(ctx, ggml_permute(ctx, cols, 0, 2, 1, 3));                                      // [C 9, F', T', N]
    cols = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_4d(ctx, cols, 9, C, Fo * To, N), 1, 0, 2, 3)); // taps outer
    return ggml_reshape_4d(ctx, cols, 9 * C, Fo, To, N);
}

} // namespace ops

} // namespace transcribe
