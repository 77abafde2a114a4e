#include "conv.h"

#include "placement.h"

#include "kernels/first_conv.h"

namespace transcribe {

bool first_conv_op_applies(const ggml_tensor * x, const ggml_tensor * kernel, const ggml_tensor * bias,
                           const ggml_tensor * mask) {
    return first_conv_kernel_takes(x, kernel, mask) && is_host_f32_vector(bias, kernel->ne[3]) && in_host_memory(kernel);
}

namespace ops {

ggml_tensor * first_conv(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias, ggml_tensor * mask) {
    if (first_conv_op_applies(x, kernel, bias, mask)) {
        return first_conv_op(ctx, x, kernel, bias, mask);
    }
    // An F32 im2col (ggml_conv_2d would round the input to F16) and a product; the 9-long patches are
    // zero-padded to 16, which ggml's fast F32 matmul needs.
    ggml_tensor * cols = ggml_im2col(ctx, kernel, ggml_reshape_4d(ctx, x, x->ne[0], x->ne[1], 1, 1), 2, 2, 1, 1, 1, 1,
                                     true, GGML_TYPE_F32); // [9, W', H', 1]
    const int64_t OW = cols->ne[1], OH = cols->ne[2], C = kernel->ne[3], patch = cols->ne[0];
    ggml_tensor * patches = ggml_reshape_2d(ctx, cols, patch, OW * OH);
    ggml_tensor * filters = ggml_reshape_2d(ctx, kernel, patch, C);
    if (const int extra = int(GGML_PAD(patch, 16) - patch)) {
        patches = ggml_pad(ctx, patches, extra, 0, 0, 0);
        filters = ggml_pad(ctx, filters, extra, 0, 0, 0);
    }
    ggml_tensor * y = ggml_reshape_3d(ctx, ggml_add(ctx, ggml_mul_mat(ctx, filters, patches), bias), C, OW, OH);
    return ggml_mul(ctx, ggml_relu(ctx, y), mask);
}

} // namespace ops

} // namespace transcribe
