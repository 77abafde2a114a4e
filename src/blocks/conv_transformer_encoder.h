// Whisper's AudioEncoder: two 1-D convolutions over the log-mel (kernel 3, padding 1; the second of stride
// 2), each followed by an exact-erf GELU, a position table added (as stored: Whisper's checkpoints carry a
// float16-rounded sinusoid), then pre-LN Transformer blocks and a final LayerNorm. The audio encoder of
// every Whisper-shaped model (tiny ... large-v3-turbo, distil-whisper).
#pragma once

#include "blocks/transformer_encoder.h"
#include "core/model_file.h"

#include "ggml.h"

namespace transcribe {

struct ConvTransformerEncoderHParams {
    int n_mels = 0;
    int n_ctx  = 0; // output frames of a full window (the position table's rows)
    TransformerEncoderHParams blocks;

    // ARCH.{n_audio_ctx, enc_layers, enc_hidden, enc_heads, enc_inner, norm_eps} and mel.n_mels.
    static ConvTransformerEncoderHParams from_file(const ModelFile & f, const std::string & arch);
};

class ConvTransformerEncoder {
public:
    // Tensors enc.conv1.{weight,bias} [3, n_mels, hidden], enc.conv2.{weight,bias} [3, hidden, hidden],
    // enc.pos_enc [hidden, n_ctx] and the blocks' enc.blk.N.* / enc.post_norm.*.
    ConvTransformerEncoder(const ModelFile & f, const ConvTransformerEncoderHParams & hp);
    const ConvTransformerEncoderHParams & hparams() const { return hp_; }

    // What build() can hand back besides the output (parity dumps).
    struct Taps {
        ggml_tensor * conv = nullptr;   // the convolutions' output plus the positions: the first block's input
        ggml_tensor * layer0 = nullptr; // the first block's output
    };
    // mel [2 n_ctx frames, n_mels] (time fastest, as MelFeatures holds it) -> [hidden, n_ctx].
    ggml_tensor * build(ggml_context * ctx, ggml_tensor * mel, Taps * taps = nullptr) const;

private:
    ConvTransformerEncoderHParams hp_;
    ggml_tensor *      conv1_w_ = nullptr, * conv1_b_ = nullptr, * conv2_w_ = nullptr, * conv2_b_ = nullptr;
    ggml_tensor *      pos_ = nullptr;
    TransformerEncoder blocks_;
};

} // namespace transcribe
