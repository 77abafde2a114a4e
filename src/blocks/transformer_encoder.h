// A Transformer encoder over a whole sequence, every frame attending to every frame, in the two arrangements
// our families use: NeMo's TransformerEncoder as Sortformer runs it (post-LN blocks: x = LN1(x + MHA(x));
// x = LN2(x + FFN(x)), FFN = dense_out(ReLU(dense_in(x))), no final LayerNorm) and Whisper's AudioEncoder
// blocks (pre-LN: x = x + MHA(LN1(x)); x = x + FFN(LN2(x)) with an exact-erf GELU, then a final LayerNorm).
// Built into a caller's graph.
#pragma once

#include "core/model_file.h"

#include "ggml.h"

#include <string>
#include <vector>

namespace transcribe {

struct TransformerEncoderHParams {
    int   n_layers = 0, hidden = 0, n_heads = 0, inner = 0;
    float norm_eps = 1e-5f;
    bool  pre_norm = false; // Whisper's arrangement (and its GELU, and PREFIX.post_norm after the blocks)

    // Pre-LN blocks from ARCH.{enc_layers, enc_hidden, enc_heads, enc_inner, norm_eps} (Whisper's and
    // Qwen3-ASR's audio encoders), checked.
    static TransformerEncoderHParams pre_norm_from_file(const ModelFile & f, const std::string & arch);
};

class TransformerEncoder {
public:
    // Tensors PREFIX.blk.N.{attn_q,attn_k,attn_v,attn_o,ffn_up,ffn_down}.{weight,bias} (attn_k.bias may
    // be absent: Whisper's keys have none), PREFIX.blk.N.{attn_norm,ffn_norm}.{weight,bias}, and with
    // pre_norm PREFIX.post_norm.{weight,bias}.
    TransformerEncoder(const ModelFile & f, const TransformerEncoderHParams & hp, const std::string & prefix);
    const TransformerEncoderHParams & hparams() const { return hp_; }
    // What build() can hand back besides the output (parity dumps): the first and the last block's outputs.
    struct Taps {
        ggml_tensor * first = nullptr, * last = nullptr;
    };
    // x [hidden, T] -> [hidden, T]. WINDOW > 0 (pre_norm): frames attend within consecutive windows of
    // that many frames only (Qwen3-ASR's audio encoder).
    ggml_tensor * build(ggml_context * ctx, ggml_tensor * x, Taps * taps = nullptr, int64_t window = 0) const;

private:
    struct Linear {
        ggml_tensor * w = nullptr, * b = nullptr;
    };
    struct Layer {
        Linear q, k, v, o, up, down;
        Linear attn_norm, ffn_norm; // weight, bias
    };
    ggml_tensor * build_pre_norm(ggml_context * ctx, ggml_tensor * x, Taps * taps, int64_t window) const;

    TransformerEncoderHParams hp_;
    std::vector<Layer>        layers_;
    Linear                    post_norm_;
};

} // namespace transcribe
