// The LSTM cell's gate arithmetic in one op. In ggml it is seven ops (sigmoid, tanh, three products,
// a sum, tanh) over vectors of a few hundred values: a decode step of the transducer's prediction net
// runs one cell a layer, and there each op's thread barrier costs more than its arithmetic.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether the kernel takes these: z [4H] and c_prev [H] F32 and contiguous.
bool lstm_cell_kernel_takes(const ggml_tensor * z, const ggml_tensor * c_prev);

// [H, 2]: column 0 h' = sigmoid(o) tanh(c'), column 1 c' = sigmoid(f) c_prev + sigmoid(i) tanh(g), from
// the summed gate pre-activations z = (i, f, g, o) (PyTorch's order). Each value is computed with the
// formulas and roundings of ggml's separate ops (sigmoid 1 / (1 + expf(-x)), tanhf, products and sum
// rounded one by one).
ggml_tensor * lstm_cell_op(ggml_context * ctx, ggml_tensor * z, ggml_tensor * c_prev);

} // namespace transcribe
