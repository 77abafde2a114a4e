// NeMo's TransformerEncoder as Sortformer uses it: post-LN blocks (x = LN1(x + MHA(x)); x = LN2(x +
// FFN(x)), FFN = dense_out(ReLU(dense_in(x)))) over a whole sequence, every frame attending to every
// frame, no final LayerNorm. Built into a caller's graph.
#pragma once

#include "core/model_file.h"

#include "ggml.h"

#include <string>
#include <vector>

namespace transcribe {

struct TransformerEncoderHParams {
    int   n_layers = 0, hidden = 0, n_heads = 0, inner = 0;
    float norm_eps = 1e-5f;
};

class TransformerEncoder {
public:
    // Tensors PREFIX.blk.N.{attn_q,attn_k,attn_v,attn_o,ffn_up,ffn_down}.{weight,bias} and
    // PREFIX.blk.N.{attn_norm,ffn_norm}.{weight,bias}.
    TransformerEncoder(const ModelFile & f, const TransformerEncoderHParams & hp, const std::string & prefix);
    const TransformerEncoderHParams & hparams() const { return hp_; }
    // x [hidden, T] -> [hidden, T]; FIRST_LAYER (when given) gets the first block's output.
    ggml_tensor * build(ggml_context * ctx, ggml_tensor * x, ggml_tensor ** first_layer = nullptr) const;

private:
    struct Linear {
        ggml_tensor * w = nullptr, * b = nullptr;
    };
    struct Layer {
        Linear q, k, v, o, up, down;
        Linear attn_norm, ffn_norm; // weight, bias
    };
    TransformerEncoderHParams hp_;
    std::vector<Layer>        layers_;
};

} // namespace transcribe
