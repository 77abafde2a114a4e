// The LSTM cell (PyTorch gate order i, f, g, o) as ggml ops: Silero VAD's recurrence and the
// transducer prediction network both end their step with it.
#pragma once

#include "ggml.h"

namespace transcribe {

struct LstmState {
    ggml_tensor * h = nullptr;
    ggml_tensor * c = nullptr;
};

// z: the summed gate pre-activations W_ih x + W_hh h + biases [4H]; c_prev [H].
// c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c').
inline LstmState lstm_cell(ggml_context * ctx, ggml_tensor * z, ggml_tensor * c_prev) {
    const int64_t H   = z->ne[0] / 4;
    const size_t  col = size_t(H) * ggml_element_size(z);
    ggml_tensor * sg = ggml_sigmoid(ctx, z);
    ggml_tensor * gi = ggml_view_1d(ctx, sg, H, 0);
    ggml_tensor * gf = ggml_view_1d(ctx, sg, H, col);
    ggml_tensor * go = ggml_view_1d(ctx, sg, H, 3 * col);
    ggml_tensor * gg = ggml_tanh(ctx, ggml_view_1d(ctx, z, H, 2 * col));
    LstmState s;
    s.c = ggml_add(ctx, ggml_mul(ctx, gf, c_prev), ggml_mul(ctx, gi, gg));
    s.h = ggml_mul(ctx, go, ggml_tanh(ctx, s.c));
    return s;
}

} // namespace transcribe
