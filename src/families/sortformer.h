// NVIDIA Sortformer (NeMo SortformerEncLabelModel, diar_sortformer_4spk-v1), offline: NeMo mel of the
// audio scaled by 1/(max + 1e-3), cut to its valid frames -> FastConformer -> a projection -> a post-LN
// Transformer encoder -> ReLU, Linear, ReLU, Linear, sigmoid: every 80 ms frame's activity of up to
// n_speakers speakers, in the order the model learned (arrival). A diarizer, not a transcriber: it has
// its own model and session classes, as the VAD does.
#pragma once

#include "blocks/speech_encoder.h"
#include "blocks/transformer_encoder.h"
#include "core/backend.h"
#include "core/model_file.h"
#include "engine/session_base.h"

#include <memory>
#include <string>
#include <vector>

namespace transcribe {

// Speaker probabilities: frame f covers [f * frame_ms, (f + 1) * frame_ms) of the audio.
struct SpeakerActivity {
    int                n_frames = 0, n_speakers = 0, frame_ms = 80;
    std::vector<float> probs; // [frame][speaker]
};

class Sortformer {
public:
    // BAD_GGUF / MISSING_TENSOR / BAD_SHAPE / UNSUPPORTED_ARCH naming the file on failure.
    Sortformer(const std::string & path, ggml_backend_dev_t device);

    const std::string & name() const { return name_; }
    int sample_rate() const { return encoder_->sample_rate(); }
    int n_speakers() const { return n_speakers_; }
    int max_audio_ms() const { return max_audio_ms_; }

private:
    friend class SortformerSession;
    std::unique_ptr<ModelFile>          file_;
    ggml_backend_dev_t                  device_;
    std::string                         name_;
    std::unique_ptr<SpeechEncoder>      encoder_;
    std::unique_ptr<TransformerEncoder> transformer_;
    ggml_tensor * proj_w_ = nullptr, * proj_b_ = nullptr;   // fc_d_model -> tf_d_model, where they differ
    ggml_tensor * hidden_w_ = nullptr, * hidden_b_ = nullptr, * spks_w_ = nullptr, * spks_b_ = nullptr;
    int n_speakers_ = 0, max_audio_ms_ = 0;
};

class SortformerSession {
public:
    SortformerSession(const Sortformer & model, int n_threads);
    // INPUT_TOO_LONG past the model's max_audio_ms; writes its stages under TRANSCRIBE_DUMP_DIR (mel,
    // pre_encode, enc_layer_0, enc_layer_last, fc_encoder_out, encoder_proj, tf_layer_0, tf_layer_last,
    // head_hidden, head_logits, preds).
    SpeakerActivity run(const float * pcm, size_t n);

private:
    const Sortformer & model_;
    int                n_threads_;
    Executor           exec_;
    SpeechEncoder::Run encode_;
    GraphCache         graphs_;
};

} // namespace transcribe
