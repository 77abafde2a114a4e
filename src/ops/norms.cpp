#include "norms.h"

#include "matmul.h"
#include "placement.h"

#include "kernels/norms.h"

namespace transcribe {

bool layer_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w, const ggml_tensor * b) {
    return layer_norm_kernel_takes(x) && is_host_f32_vector(w, x->ne[0]) && is_host_f32_vector(b, x->ne[0]);
}

bool rms_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w) {
    return rms_norm_kernel_takes(x) && is_host_f32_vector(w, x->ne[0]);
}

namespace ops {

ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps) {
    if (layer_norm_op_applies(x, w, b)) {
        return layer_norm_op(ctx, x, w, b, eps);
    }
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), w), b);
}

ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps,
                         const std::vector<ggml_tensor *> & feeds) {
    if (fusion_enabled() && layer_norm_op_applies(x, w, b)) {
        const ggml_type act = gemm_activation_type(feeds, x);
        if ((act == GGML_TYPE_Q8_0 || act == GGML_TYPE_BF16) && layer_norm_kernel_makes(act, x->ne[0])) {
            ggml_tensor * y = layer_norm_op(ctx, x, w, b, eps, act);
            return act == GGML_TYPE_Q8_0 ? mark_as_q8_0_rows(y) : y;
        }
    }
    return layer_norm(ctx, x, w, b, eps);
}

ggml_tensor * rms_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, float eps) {
    if (rms_norm_op_applies(x, w)) {
        return rms_norm_op(ctx, x, w, eps);
    }
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), w);
}

} // namespace ops

} // namespace transcribe
