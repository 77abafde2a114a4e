// NeMo's audio front end and FastConformer as one stage, as every family on that encoder runs them:
// mel features, the encoder graph (built once per length, with the family's head on top: Canary-Qwen's
// projection into the LLM, Parakeet's joint encoder projection), the parity dumps and the timings.
#pragma once

#include "fastconformer.h"

#include "model/family.h"
#include "core/mel.h"
#include "model/session_base.h"

#include <functional>
#include <memory>

namespace transcribe {

class SpeechEncoder {
public:
    // Declares the enc.* tensors and reads mel.* / encoder.* metadata (before the weights are loaded).
    explicit SpeechEncoder(const ModelFile & file);
    // After the weights are on the device (the mel window and filterbank are read from them).
    void prepare(const ModelFile & file, ggml_backend_dev_t device);

    const FastConformerHParams & hparams() const { return hp_; }
    int sample_rate() const { return mel_->config().sample_rate; }
    // Encoder frames for n samples (the valid ones: later frames are masked padding).
    int frames(size_t n_samples) const;
    // Every frame the encoder outputs for n samples, the masked ones included (NeMo's padded length).
    int output_frames(size_t n_samples) const;
    // Milliseconds of audio one encoder frame covers.
    int frame_ms() const;
    // NeMo's preprocessor output for the audio; VALID_ONLY: cut to the valid frames (no padded one).
    MelFeatures mel(const float * pcm, size_t n, int n_threads, bool valid_only) const;
    const FastConformer & conformer() const { return conformer_; }
    const MelFrontend & mel_frontend() const { return *mel_; }

    // The head maps the encoder output [d_model, T] to what the family needs.
    using Head = std::function<ggml_tensor *(ggml_context *, ggml_tensor *)>;

    class Run {
    public:
        // VALID_ONLY: the encoder sees the valid mel frames alone (Sortformer's forward cuts the mel to
        // them), not the extra padded one it masks otherwise.
        Run(const SpeechEncoder & encoder, Head head, bool valid_only = false)
            : enc_(encoder), head_(std::move(head)), valid_only_(valid_only) {}
        // Mel + encoder + head on exec; returns the head's output, time-major [T][head rows]. Fills
        // timings.mel_ms / encode_ms and writes mel, pre_encode, enc_layer_0, enc_layer_last, enc_out
        // under TRANSCRIBE_DUMP_DIR.
        std::vector<float> operator()(Executor & exec, const float * pcm, size_t n, int n_threads, Timings & timings);
        // The attention's reach of the runs that follow (models with limited contexts): one of the
        // encoder's hparams().att_contexts.
        void set_attention_context(const AttentionContext & context) { context_ = context; }

    private:
        const SpeechEncoder & enc_;
        Head                  head_;
        bool                  valid_only_ = false;
        AttentionContext      context_ = enc_.hparams().att_contexts.front();
        GraphCache            graphs_;
    };

private:
    FastConformerHParams         hp_;
    FastConformer                conformer_;
    std::unique_ptr<MelFrontend> mel_;
};

} // namespace transcribe
