// The LSTM cell (PyTorch gate order i, f, g, o): Silero VAD's recurrence and the transducer prediction
// network both end their step with it.
#pragma once

#include "ggml.h"

namespace transcribe {

struct LstmState {
    ggml_tensor * h = nullptr;
    ggml_tensor * c = nullptr;
};

namespace ops {
// z: the summed gate pre-activations W_ih x + W_hh h + biases [4H]; c_prev [H].
// c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'). Our one-op kernel when the layer's
// weight W lies in host memory (the graph then runs on the CPU), ggml's separate ops otherwise.
LstmState lstm_cell(ggml_context * ctx, ggml_tensor * z, ggml_tensor * c_prev, const ggml_tensor * w);
} // namespace ops

} // namespace transcribe
