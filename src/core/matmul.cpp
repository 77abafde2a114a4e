#include "matmul.h"

#include "kernels/q8_0_gemm.h"

#include "ggml-backend.h"

#include <cstdlib>

namespace transcribe {

namespace {

void run_q8_0_gemm(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * w = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    Q8_0GemmArgs a;
    a.w = w->data;
    a.x = x->data;
    a.y = static_cast<float *>(dst->data);
    a.K = w->ne[0];
    a.M = w->ne[1];
    a.N = x->ne[1];
    a.w_row_bytes  = w->nb[1];
    a.x_row_bytes  = x->nb[1];
    a.y_row_floats = dst->nb[1] / sizeof(float);
    q8_0_gemm(a, ith, nth);
}

// TRANSCRIBE_NO_Q8_0_GEMM=1 leaves every product to ggml (for benchmarks against it).
bool disabled_by_env() {
    static const bool off = [] {
        const char * v = std::getenv("TRANSCRIBE_NO_Q8_0_GEMM");
        return v && *v && *v != '0';
    }();
    return off;
}

} // namespace

bool q8_0_gemm_applies(const ggml_tensor * w, const ggml_tensor * x) {
    return w->type == GGML_TYPE_Q8_0 && w->buffer && ggml_backend_buffer_is_host(w->buffer) && !w->extra &&
           ggml_is_contiguous(w) && w->ne[0] % 32 == 0 && w->ne[1] % 32 == 0 && w->ne[2] == 1 && w->ne[3] == 1 &&
           x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] == w->ne[0] && x->ne[2] == 1 &&
           x->ne[3] == 1 && x->ne[1] >= Q8_0_GEMM_MIN_COLS && q8_0_gemm_supported() && !disabled_by_env();
}

ggml_tensor * q8_0_gemm_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
    ggml_tensor * xq = ggml_cast(ctx, x, GGML_TYPE_Q8_0);
    ggml_tensor * args[] = {w, xq};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, 2, run_q8_0_gemm, GGML_N_TASKS_MAX,
                          nullptr);
}

ggml_tensor * matmul(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x) {
    return q8_0_gemm_applies(w, x) ? q8_0_gemm_op(ctx, w, x) : ggml_mul_mat(ctx, w, x);
}

} // namespace transcribe
