// Where a tensor's bytes are, for choosing between a CPU kernel of ours (which reads host memory
// directly) and ggml's own op (which the scheduler places anywhere).
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether T's bytes are in host memory, a CPU kernel's to read (a view, such as the KV cache after a
// graph's writes, lies in its source's buffer, set before the graph is allocated).
bool in_host_memory(const ggml_tensor * t);

// Whether T is N contiguous F32 values in host memory (a bias or norm weight a CPU kernel can read).
bool is_host_f32_vector(const ggml_tensor * t, int64_t n);

} // namespace transcribe
