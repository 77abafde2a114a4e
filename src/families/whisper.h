// OpenAI Whisper (tiny ... large-v3-turbo, the .en models): Whisper's log-mel -> the conv + Transformer
// audio encoder -> a Transformer decoder with learned positions and cross-attention, driven as
// openai/whisper drives it: decode() for one 30-second window (the sot sequence, language detection, the
// logit filters, greedy or beam search) and transcribe()'s seek loop over a whole recording.
// Declared here (not only behind the registry) so that tests can run decode() on a golden's mel window.
#pragma once

#include "blocks/conv_transformer_encoder.h"
#include "blocks/transformer_decoder.h"
#include "core/mel.h"
#include "decoding/whisper_decoding.h"
#include "decoding/whisper_timing.h"
#include "model/session_base.h"

namespace transcribe {

// decode()'s DecodingOptions as a run sets them.
struct WhisperDecodeRequest {
    std::string language;   // empty: detected from the window (detect_language)
    bool        translate = false;
    std::vector<int32_t> prompt; // previous text tokens: [<|startofprev|>] + prompt[-(n_text_ctx/2 - 1):] first
    WhisperDecodeOptions options;
    std::vector<std::vector<float>> * raw_step_logits = nullptr; // each greedy step's logits before the filters
    std::function<void(int32_t)> on_token;
};

// decode()'s DecodingResult.
struct WhisperDecodeOutcome {
    std::string          language;
    std::vector<float>   language_probs; // when detected: per language token
    std::vector<int32_t> initial_tokens;
    WhisperDecodeResult  result;
    float                no_speech_prob = 0.0f;
    std::string          text; // decode(tokens).strip()
};

class WhisperModel final : public Model {
public:
    WhisperModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
    std::unique_ptr<Session> new_session(const SessionOptions & options) override;

    const WhisperVocab & vocab() const { return vocab_; }
    const MelFrontend & mel() const { return *mel_; }
    int window_frames() const { return 2 * enc_hp_.n_ctx; } // N_FRAMES
    // The language code of a language token, or the token of a code (INVALID_ARG listing them if none).
    int32_t language_token(const std::string & code) const;
    const std::string & language_code(int32_t token) const;
    std::vector<int32_t> sot_sequence(int32_t language_token, bool translate, bool timestamps) const;

private:
    friend class WhisperSession;
    std::unique_ptr<ModelFile>    file_;
    ggml_backend_dev_t            device_;
    ConvTransformerEncoderHParams enc_hp_;
    ConvTransformerEncoder        encoder_;
    TransformerDecoderHParams     dec_hp_;
    TransformerDecoder            decoder_;
    WhisperVocab                  vocab_;
    bool                          multilingual_ = true;
    std::vector<std::pair<int, int>> alignment_heads_; // (decoder layer, head): word timestamps' cross-attention
    std::unique_ptr<MelFrontend>  mel_;
};

class WhisperSession final : public SessionBase {
public:
    WhisperSession(const WhisperModel & model, const SessionOptions & options);
    // transcribe() over the whole recording.
    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;
    // decode() of one window: MEL [n_mels][N_FRAMES] (channel-major), already cut and zero-padded.
    WhisperDecodeOutcome decode(const std::vector<float> & mel, const WhisperDecodeRequest & request);
    // The encoder's output [n_audio_ctx][hidden] for a window (dumps enc_conv, enc_layer_0, enc_out).
    const std::vector<float> & encode(const std::vector<float> & mel);
    // detect_language on the window encode() last encoded: the language token (PROBS: per language).
    int32_t detect_language(std::vector<float> * probs = nullptr);
    // find_alignment of TEXT_TOKENS over the window decode() last decoded (its encoder output), in
    // LANGUAGE, the task TRANSLATE; NUM_FRAMES of the window's mel frames are audio.
    std::vector<WhisperWordTiming> align_words(const std::vector<int32_t> & text_tokens, int num_frames,
                                               const std::string & language, bool translate);

private:
    const WhisperModel &    model_;
    TransformerDecoderState decoder_;
    GraphCache              encoder_graphs_;
    std::vector<float>      encoded_;
};

} // namespace transcribe
