#include "policy.h"

#include <cstdlib>
#include <cstring>

namespace transcribe_quantize {

namespace {

const Preset k_presets[] = {
    {"F16", GGML_TYPE_F16, GGML_TYPE_F16, false},
    {"Q8_0", GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, false},
    {"Q5_0", GGML_TYPE_Q5_0, GGML_TYPE_Q5_0, false}, // whisper.cpp's common one: its files and ours side by side
    {"Q6_K", GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, false},
    {"Q5_K_M", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, true},
    {"Q4_K_M", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, true},
};

bool contains(const std::string & s, const char * part) { return s.find(part) != std::string::npos; }
bool ends_with(const std::string & s, const char * tail) {
    const size_t n = std::strlen(tail);
    return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// llama.cpp's choice of layers that keep more bits in its _M mixes: the first and last eighth, and
// every third layer between.
bool use_more_bits(int layer, int n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

int llm_layer_of(const std::string & name) {
    const char * p = std::strstr(name.c_str(), "llm.blk.");
    return p ? std::atoi(p + 8) : -1;
}

} // namespace

const Preset * find_preset(const std::string & name) {
    for (const Preset & p : k_presets) {
        if (name == p.name) {
            return &p;
        }
    }
    return nullptr;
}

ggml_type choose_type(const Preset & preset, const std::string & name, const int64_t * ne, int n_dims,
                      ggml_type current, int n_llm_layers) {
    const bool keep = n_dims < 2 || !ends_with(name, ".weight") || contains(name, "norm") || contains(name, ".bn.") ||
                      contains(name, "pos_bias") || name.rfind("mel.", 0) == 0 || name.rfind("enc.sub.conv0", 0) == 0 ||
                      name.rfind("enc.sub.dw", 0) == 0 || ends_with(name, "conv.dw.weight") ||
                      name.rfind("enc.conv", 0) == 0 || // Whisper's front-end convolutions (kernel width 3: no block fits)
                      name.rfind("enc.down1.", 0) == 0;  // Qwen3-ASR's first convolution (one input channel: 3x3 taps)
    if (keep) {
        return current;
    }
    ggml_type want = preset.base;
    if (name == "token_embd.weight") {
        want = preset.important;
    } else if (preset.mixed && (contains(name, "attn_v.weight") || contains(name, "ffn_down.weight")) &&
               use_more_bits(llm_layer_of(name), n_llm_layers)) {
        want = preset.important;
    }
    for (ggml_type t : {want, GGML_TYPE_Q8_0, GGML_TYPE_F16}) {
        if (ne[0] % ggml_blck_size(t) == 0) {
            return t;
        }
    }
    return GGML_TYPE_F32;
}

} // namespace transcribe_quantize
