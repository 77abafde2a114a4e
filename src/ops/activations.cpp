#include "activations.h"

#include "placement.h"

#include "kernels/gelu.h"

namespace transcribe::ops {

ggml_tensor * gelu_erf(ggml_context * ctx, ggml_tensor * x, const ggml_tensor * layer_weight) {
    if (gelu_erf_kernel_takes(x) && in_host_memory(layer_weight)) {
        return gelu_erf_op(ctx, x);
    }
    return ggml_gelu_erf(ctx, x);
}

} // namespace transcribe::ops
