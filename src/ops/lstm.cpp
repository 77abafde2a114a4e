#include "lstm.h"

#include "placement.h"

#include "kernels/lstm_cell.h"

namespace transcribe::ops {

LstmState lstm_cell(ggml_context * ctx, ggml_tensor * z, ggml_tensor * c_prev, const ggml_tensor * w) {
    const int64_t H   = z->ne[0] / 4;
    const size_t  col = size_t(H) * ggml_element_size(z);
    LstmState s;
    if (in_host_memory(w) && lstm_cell_kernel_takes(z, c_prev)) {
        ggml_tensor * hc = lstm_cell_op(ctx, z, c_prev);
        s.h = ggml_view_1d(ctx, hc, H, 0);
        s.c = ggml_view_1d(ctx, hc, H, hc->nb[1]);
        return s;
    }
    ggml_tensor * sg = ggml_sigmoid(ctx, z);
    ggml_tensor * gi = ggml_view_1d(ctx, sg, H, 0);
    ggml_tensor * gf = ggml_view_1d(ctx, sg, H, col);
    ggml_tensor * go = ggml_view_1d(ctx, sg, H, 3 * col);
    ggml_tensor * gg = ggml_tanh(ctx, ggml_view_1d(ctx, z, H, 2 * col));
    s.c = ggml_add(ctx, ggml_mul(ctx, gf, c_prev), ggml_mul(ctx, gi, gg));
    s.h = ggml_mul(ctx, go, ggml_tanh(ctx, s.c));
    return s;
}

} // namespace transcribe::ops
