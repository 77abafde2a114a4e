#include "lstm_cell.h"

#include <algorithm>
#include <cmath>

// The roundings of ggml's separate ops: no product fused into a sum (GCC contracts across statements;
// clang only within one expression, which the cell never writes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace transcribe {

namespace {

float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// Each thread a contiguous share of the values, in multiples of 16: libm's expf and tanhf take long
// enough (five calls a value) that a share pays for the handing over.
void run_lstm_cell(ggml_tensor * dst, int ith, int nth, void *) {
    const int64_t H = dst->ne[0];
    const int64_t per = (H / 16 + nth - 1) / nth * 16, j0 = std::min(H, per * ith), j1 = ith == nth - 1 ? H : std::min(H, j0 + per);
    const float * z  = static_cast<const float *>(dst->src[0]->data);
    const float * cp = static_cast<const float *>(dst->src[1]->data);
    float * h = static_cast<float *>(dst->data);
    float * c = h + H;
    for (int64_t j = j0; j < j1; ++j) {
        const float i = sigmoid(z[j]), f = sigmoid(z[H + j]), g = tanhf(z[2 * H + j]), o = sigmoid(z[3 * H + j]);
        const float kept = f * cp[j], added = i * g;
        c[j] = kept + added;
        h[j] = o * tanhf(c[j]);
    }
}

} // namespace

bool lstm_cell_kernel_takes(const ggml_tensor * z, const ggml_tensor * c_prev) {
    return z->type == GGML_TYPE_F32 && c_prev->type == GGML_TYPE_F32 && ggml_is_contiguous(z) && ggml_is_contiguous(c_prev) &&
           ggml_nelements(z) == 4 * ggml_nelements(c_prev);
}

ggml_tensor * lstm_cell_op(ggml_context * ctx, ggml_tensor * z, ggml_tensor * c_prev) {
    ggml_tensor * args[] = {z, c_prev};
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, ggml_nelements(c_prev), 2, 1, 1, args, 2, run_lstm_cell, GGML_N_TASKS_MAX, nullptr);
    return ggml_set_name(y, "lstm_cell");
}

} // namespace transcribe
