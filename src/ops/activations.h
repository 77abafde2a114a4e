// The op layer's activation functions: our CPU kernel where the layer runs on the CPU (its weights in
// host memory), ggml's op otherwise.
#pragma once

#include "ggml.h"

namespace transcribe::ops {

// 0.5 x (1 + erf(x / sqrt 2)); LAYER_WEIGHT: a weight of the layer, whose placement says where it runs.
ggml_tensor * gelu_erf(ggml_context * ctx, ggml_tensor * x, const ggml_tensor * layer_weight);

} // namespace transcribe::ops
