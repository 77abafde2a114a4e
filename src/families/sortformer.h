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
#include "model/session_base.h"
#include "sortformer_speaker_cache.h"

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
    // The streaming path's sizes and the model's cache constants (the GGUF's sortformer.streaming.*).
    const SpeakerCacheParams & streaming_defaults() const { return streaming_; }
    // Whether the checkpoint was trained for the streaming path (diar_streaming_sortformer).
    bool streaming_trained() const { return streaming_trained_; }

private:
    friend class SortformerSession;
    // [d_model, T] encoder states -> the projection, the Transformer and the head; marks the outputs
    // encoder_proj, tf_layer_0, tf_layer_last, head_hidden, head_logits and preds.
    void build_head(Graph & g, ggml_tensor * enc) const;

    std::unique_ptr<ModelFile>          file_;
    ggml_backend_dev_t                  device_;
    std::string                         name_;
    std::unique_ptr<SpeechEncoder>      encoder_;
    std::unique_ptr<TransformerEncoder> transformer_;
    ggml_tensor * proj_w_ = nullptr, * proj_b_ = nullptr;   // fc_d_model -> tf_d_model, where they differ
    ggml_tensor * hidden_w_ = nullptr, * hidden_b_ = nullptr, * spks_w_ = nullptr, * spks_b_ = nullptr;
    int n_speakers_ = 0, max_audio_ms_ = 0;
    SpeakerCacheParams streaming_;
    bool               streaming_trained_ = false;
};

// How a recording is diarized: AUTO runs the offline path up to the model's max_audio_ms and, past it,
// the streaming path with the long-form sizes on a model trained for streaming (INPUT_TOO_LONG on one
// that is not); OFFLINE and STREAMING force a path. Sizes below 0 take the model's (or, for AUTO's
// long recordings, the long-form setting's).
enum class DiarizeMode { Auto, Offline, Streaming };
struct DiarizeOptions {
    DiarizeMode mode = DiarizeMode::Auto;
    int spkcache_len = -1, fifo_len = -1, spkcache_update_period = -1, chunk_len = -1, chunk_left_context = -1,
        chunk_right_context = -1;
};

// The diar_streaming_sortformer_4spk-v2 model card's highest-latency setting (30.4 s): the fewest steps
// per minute of audio, for recordings diarized whole.
SpeakerCacheParams long_form_streaming(const SpeakerCacheParams & model_defaults);

class SortformerSession {
public:
    SortformerSession(const Sortformer & model, int n_threads);
    // INPUT_TOO_LONG past the model's max_audio_ms; writes its stages under TRANSCRIBE_DUMP_DIR (mel,
    // pre_encode, enc_layer_0, enc_layer_last, fc_encoder_out, encoder_proj, tf_layer_0, tf_layer_last,
    // head_hidden, head_logits, preds).
    SpeakerActivity run(const float * pcm, size_t n);
    // NeMo's forward_streaming (synchronous): any length. The mel of the whole (unscaled) audio is cut
    // into chunks of chunk_len frames with their context; each is pre-encoded alone and run after the
    // speaker cache and FIFO. Writes mel and the fixture's stream_* arrays under TRANSCRIBE_DUMP_DIR.
    SpeakerActivity run_streaming(const float * pcm, size_t n, const SpeakerCacheParams & params);
    // The path OPTIONS choose (see DiarizeMode).
    SpeakerActivity run(const float * pcm, size_t n, const DiarizeOptions & options);

private:
    const Sortformer & model_;
    int                n_threads_;
    Executor           exec_;
    SpeechEncoder::Run encode_;
    GraphCache         graphs_, pre_encode_graphs_, step_graphs_;
};

} // namespace transcribe
