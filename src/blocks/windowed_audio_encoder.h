// Qwen3-ASR's audio encoder (qwen_asr's Qwen3ASRAudioEncoder) with its front end: the Whisper-style log-mel
// (no padding), cut into chunks of 2 n_window frames (a shorter last one zero-padded to the others' length),
// each chunk through three 3x3 stride-2 convolutions with an exact-erf GELU and a linear map of channels x
// frequency, sinusoid positions restarting in every chunk, pre-LN Transformer blocks whose frames attend
// within windows of n_window_infer mel frames' worth of tokens, a final LayerNorm, then proj1, GELU, proj2
// into the decoder's width. Graphs are built once per mel length.
#pragma once

#include "blocks/transformer_encoder.h"
#include "core/mel.h"
#include "model/session_base.h"

#include <memory>
#include <string>

namespace transcribe {

struct WindowedAudioEncoderHParams {
    int n_mels         = 0;
    int channels       = 0; // the convolutions' output channels
    int n_window       = 0; // a chunk is 2 n_window mel frames
    int n_window_infer = 0; // an attention window is n_window_infer mel frames' tokens
    int out_dim        = 0;
    TransformerEncoderHParams blocks;

    // ARCH.{enc_layers, enc_hidden, enc_heads, enc_inner, enc_conv_channels, enc_out_dim, n_window,
    // n_window_infer, norm_eps} and mel.n_mels.
    static WindowedAudioEncoderHParams from_file(const ModelFile & f, const std::string & arch);
    // Tokens the convolutions make of L frames (three stride-2 convolutions with padding 1).
    static int conv_length(int frames);
    // _get_feat_extract_output_lengths: tokens for a mel of FRAMES frames.
    int tokens(int frames) const;
};

class WindowedAudioEncoder {
public:
    // Declares the enc.* tensors: down1.weight [3, 3, 1, channels], down{2,3}.weight [9 channels, channels]
    // (a kernel's taps, input channels fastest), down{1,2,3}.bias, conv_out.weight [channels x freq, hidden]
    // (channels fastest),
    // pos_enc [hidden, tokens per chunk], the blocks' enc.blk.N.* and enc.post_norm.*, proj{1,2}.{weight,bias}.
    WindowedAudioEncoder(const ModelFile & f, const std::string & arch);
    // After the weights are loaded (the mel window and filterbank are read from them).
    void prepare(const ModelFile & f);

    const WindowedAudioEncoderHParams & hparams() const { return hp_; }
    const MelFrontend & mel() const { return *mel_; }
    int sample_rate() const { return mel_->config().sample_rate; }
    // Encoder output rows for N samples.
    int tokens(size_t n_samples) const { return hp_.tokens(int(n_samples / size_t(mel_->config().hop_length))); }

    class Run {
    public:
        explicit Run(const WindowedAudioEncoder & encoder) : enc_(encoder) {}
        // Mel + encoder on EXEC: [tokens][out_dim] time-major. Fills timings.mel_ms / encode_ms and writes
        // mel, enc_input, enc_layer_0, enc_layer_last, enc_out under TRANSCRIBE_DUMP_DIR.
        std::vector<float> operator()(Executor & exec, const float * pcm, size_t n, int n_threads, Timings & timings);
        // The same from a log-mel [n_mels][frames] (channel-major).
        std::vector<float> encode(Executor & exec, const std::vector<float> & mel, int frames, Timings & timings);

    private:
        const WindowedAudioEncoder & enc_;
        GraphCache                   graphs_;
        std::vector<float>           chunked_; // the mel rearranged chunk by chunk, reused between runs
    };

private:
    struct Taps {
        ggml_tensor * input = nullptr, * layer0 = nullptr, * last = nullptr;
    };
    // CHUNKS [chunk frames, n_mels, n_chunks] (time fastest), N_TOKENS the valid output rows: [out_dim, n_tokens].
    ggml_tensor * build(ggml_context * ctx, ggml_tensor * chunks, int n_tokens, Taps * taps) const;
    // The convolutions and conv_out of CHUNKS [chunk frames, n_mels, n]: [hidden, tokens per chunk x n].
    ggml_tensor * convolve(ggml_context * ctx, ggml_tensor * chunks) const;

    WindowedAudioEncoderHParams  hp_;
    ggml_tensor *                conv_w_[3] = {}, * conv_b_[3] = {};
    ggml_tensor *                conv_out_ = nullptr, * pos_ = nullptr;
    ggml_tensor *                proj1_w_ = nullptr, * proj1_b_ = nullptr, * proj2_w_ = nullptr, * proj2_b_ = nullptr;
    TransformerEncoder           blocks_;
    std::unique_ptr<MelFrontend> mel_;
};

} // namespace transcribe
