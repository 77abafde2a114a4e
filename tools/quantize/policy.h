// Which ggml type each tensor of a transcribe GGUF gets under a quantization preset.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <string>

namespace transcribe_quantize {

struct Preset {
    const char * name;
    ggml_type    base;       // most matrices
    ggml_type    important;  // token embedding / output head, and the _M layers of attn_v / ffn_down
    bool         mixed;      // _M: some attn_v / ffn_down layers get `important`
};

// F16, Q8_0, Q5_0, Q6_K, Q5_K_M, Q4_K_M; nullptr for an unknown name.
const Preset * find_preset(const std::string & name);

// The type for one tensor: F32 stays F32 for norms, biases, BatchNorm, positional biases, the mel
// front end and convolution kernels (ggml's depthwise conv is only trusted in F32); matrices get the
// preset's type, falling back to Q8_0 then F16 when a row does not split into the type's blocks.
ggml_type choose_type(const Preset & preset, const std::string & name, const int64_t * ne, int n_dims,
                      ggml_type current, int n_llm_layers);

} // namespace transcribe_quantize
