#include "embed.h"

#include "matmul.h"

#include "kernels/avx512_gemm.h"

namespace transcribe::ops {

namespace {
// dst = rows src[0] (the ids) of the weight (user data: it is no source, as for the products).
void run_rows(ggml_tensor * dst, int ith, int nth, void * weight) {
    const auto * w   = static_cast<const ggml_tensor *>(weight);
    const ggml_tensor * ids = dst->src[0];
    avx512_panel_rows(w->data, w->type, w->ne[0], static_cast<const int32_t *>(ids->data), ggml_nelements(ids),
                      static_cast<float *>(dst->data), ith, nth);
}
} // namespace

ggml_tensor * embed(ggml_context * ctx, ggml_tensor * w, ggml_tensor * ids) {
    if (!in_panel_layout(w)) {
        return ggml_get_rows(ctx, w, ids);
    }
    ggml_tensor * args[1] = {ids};
    ggml_tensor * rows = ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[0], ggml_nelements(ids), 1, 1, args, 1, run_rows,
                                        GGML_N_TASKS_MAX, w);
    return ggml_set_name(rows, "panel_rows");
}

} // namespace transcribe::ops
