// The op layer's embedding lookup: rows of a token embedding by id, from ggml's get_rows, or from our
// kernel where the embedding is stored in the panel layout (a tied output head's weights).
#pragma once

#include "ggml.h"

namespace transcribe::ops {

// Rows IDS (I32 [n]) of W [K, rows] as F32 [K, n].
ggml_tensor * embed(ggml_context * ctx, ggml_tensor * w, ggml_tensor * ids);

} // namespace transcribe::ops
