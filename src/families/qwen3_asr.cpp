// Qwen3-ASR (QwenLM/Qwen3-ASR, qwen_asr's transformers backend): the WhisperFeatureExtractor's log-mel,
// the windowed audio encoder, its rows spliced into the chat prompt in place of the <|audio_pad|>
// placeholders, the Qwen3 decoder shared with Canary-Qwen, greedy decoding until <|im_end|> or
// <|endoftext|>, and the text parsed as parse_asr_output does ("language X<asr_text>transcript").
#include "blocks/qwen3.h"
#include "blocks/windowed_audio_encoder.h"
#include "decoding/continuous_batching.h"
#include "families/qwen3_asr_output.h"
#include "core/npy.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {

constexpr int DEFAULT_N_CTX       = 4096;
constexpr int DEFAULT_NEW_TOKENS  = 512;  // Qwen3ASRModel's max_new_tokens
constexpr int MIN_SAMPLES_DIVISOR = 2;    // MIN_ASR_INPUT_SECONDS = 0.5: shorter audio is zero-padded to it
constexpr int MAX_PIECE_MS        = 180000; // the longest piece one run takes (longer audio is cut at pauses)

class Qwen3AsrModel;

class Qwen3AsrSession final : public ContinuousBatchingSession {
public:
    Qwen3AsrSession(const Qwen3AsrModel & model, const SessionOptions & opt);

private:
    void start(DecodeJob & a) override;
    void finish(DecodeJob & a) override;

    const Qwen3AsrModel &       model_;
    WindowedAudioEncoder::Run   encode_;
    Qwen3Decoder                decoder_;
};

class Qwen3AsrModel final : public Model {
public:
    Qwen3AsrModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
        : file_(std::move(file)),
          device_(device),
          encoder_(*file_, "qwen3_asr"),
          lm_hp_(Qwen3HParams::from_file(*file_)),
          lm_(*file_, lm_hp_, "llm", "token_embd.weight") {
        const std::string a = "qwen3_asr.";
        if (encoder_.hparams().out_dim != lm_hp_.hidden) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: audio encoder output %d != decoder width %d", file_->path().c_str(),
                 encoder_.hparams().out_dim, lm_hp_.hidden);
        }
        system_    = file_->get_str(a + "prompt_system");
        user_      = file_->get_str(a + "prompt_user");
        assistant_ = file_->get_str(a + "prompt_assistant");
        audio_id_  = int32_t(file_->get_u32(a + "audio_token_id"));
        end_ids_   = file_->get_i32_array(a + "eos_token_ids");
        tokenizer_ = Tokenizer::from_file(*file_);
        if (tokenizer_->n_vocab() > lm_hp_.vocab || end_ids_.empty()) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer of %d tokens for %d rows, %zu end tokens",
                 file_->path().c_str(), tokenizer_->n_vocab(), lm_hp_.vocab, end_ids_.size());
        }
        for (int32_t id = 0; id < tokenizer_->n_vocab(); ++id) {
            if (tokenizer_->is_control(id)) {
                added_.emplace_back(tokenizer_->piece(id), id);
            }
        }
        // The longest added token first where two start at the same place.
        std::stable_sort(added_.begin(), added_.end(), [](const auto & x, const auto & y) { return x.first.size() > y.first.size(); });
        for (int32_t id : end_ids_) {
            check_id(id);
        }
        check_id(audio_id_);
        info_.architecture       = "qwen3_asr";
        info_.name               = file_->get_str("general.name", "qwen3-asr");
        info_.token_budget       = true;
        info_.speculative        = true;
        info_.text_prompt        = true;
        info_.language_prompt    = true;
        info_.language_detection = true;
        info_.hotwords           = true;
        info_.languages          = file_->get_str_array(a + "languages");
        info_.max_audio_ms       = std::min(int(file_->get_u32(a + "max_audio_ms", MAX_PIECE_MS)), MAX_PIECE_MS);

        file_->load_weights(device_);
        encoder_.prepare(*file_);
        info_.sample_rate = encoder_.sample_rate();
    }

    std::unique_ptr<Session> new_session(const SessionOptions & options) override {
        return std::make_unique<Qwen3AsrSession>(*this, options);
    }

    // The text as the slow Qwen2 tokenizer splits it: NFC, added tokens matched whole (the earliest, the
    // longest there), byte-level BPE between them.
    std::vector<int32_t> encode(const std::string & text) const {
        const std::string s = utf8_nfc(text, "prompt");
        std::vector<int32_t> ids;
        size_t pos = 0;
        while (pos < s.size()) {
            size_t next = std::string::npos;
            const std::pair<std::string, int32_t> * hit = nullptr;
            for (const auto & t : added_) {
                const size_t at = s.find(t.first, pos);
                if (at < next) {
                    next = at;
                    hit  = &t;
                }
            }
            const std::vector<int32_t> plain = tokenizer_->encode(s.substr(pos, next == std::string::npos ? next : next - pos));
            ids.insert(ids.end(), plain.begin(), plain.end());
            if (!hit) {
                break;
            }
            ids.push_back(hit->second);
            pos = next + hit->first.size();
        }
        return ids;
    }

    // _build_text_prompt around the audio: the ids before the placeholders and after them.
    std::pair<std::vector<int32_t>, std::vector<int32_t>> prompt(const std::string & context, const std::string & language) const {
        std::string after = assistant_;
        if (!language.empty()) {
            after += "language " + language + "<asr_text>";
        }
        return {encode(system_ + context + user_), encode(after)};
    }

    // The system context: the prompt, then the hotwords separated by spaces (the reference takes one context
    // string; its examples write keywords so, "交易 停滞"). Their weight has no meaning here.
    static std::string context(const RunOptions & o) {
        std::string c = o.prompt;
        for (const std::string & h : o.hotwords) {
            c += (c.empty() ? "" : " ") + h;
        }
        return c;
    }

    // The language RunOptions::language asks for ("" / "auto": the model says which), or INVALID_ARG.
    std::string forced_language(const std::string & asked) const {
        if (asked.empty() || asked == "auto") {
            return "";
        }
        const std::string name = qwen3_asr::language_name(asked, info_.languages);
        if (name.empty()) {
            std::string list;
            for (const auto & l : info_.languages) {
                list += (list.empty() ? "" : ", ") + l;
            }
            fail(TRANSCRIBE_ERR_INVALID_ARG, "language '%s': %s transcribes %s (or auto)", asked.c_str(), info_.name.c_str(),
                 list.c_str());
        }
        return name;
    }

    void check_id(int32_t id) const {
        if (id < 0 || id >= lm_hp_.vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: token id %d outside the vocabulary", file_->path().c_str(), id);
        }
    }

    std::unique_ptr<ModelFile>                   file_;
    ggml_backend_dev_t                           device_;
    WindowedAudioEncoder                         encoder_;
    Qwen3HParams                                 lm_hp_;
    Qwen3                                        lm_;
    std::string                                  system_, user_, assistant_; // the chat template's text around context and audio
    int32_t                                      audio_id_ = 0;
    std::vector<int32_t>                         end_ids_;
    std::vector<std::pair<std::string, int32_t>> added_; // added tokens' text and id
};

int context_length(const Qwen3HParams & hp, const SessionOptions & opt) {
    return std::min(opt.n_ctx > 0 ? opt.n_ctx : DEFAULT_N_CTX, hp.n_ctx_train);
}

Qwen3AsrSession::Qwen3AsrSession(const Qwen3AsrModel & model, const SessionOptions & opt)
    : ContinuousBatchingSession(model.device_, opt, decoder_, model.end_ids_.front()),
      model_(model),
      encode_(model.encoder_),
      decoder_(model.lm_, exec_, opt.kv_type, context_length(model.lm_hp_, opt),
               sequences_for(opt, Qwen3Decoder::bytes_per_sequence(model.lm_hp_, opt.kv_type, context_length(model.lm_hp_, opt)))) {
    for (size_t i = 1; i < model.end_ids_.size(); ++i) {
        add_end_token(model.end_ids_[i]);
    }
}

void Qwen3AsrSession::start(DecodeJob & a) {
    const RunOptions & o = a.job.options;
    check_audio_length(a.job.n_samples, model_.info());
    const std::string language = model_.forced_language(o.language);
    a.out.language = language;
    // transcribe() zero-pads audio shorter than half a second (split_audio_into_chunks).
    const size_t min_samples = size_t(model_.info().sample_rate / MIN_SAMPLES_DIVISOR);
    std::vector<float> padded;
    const float * pcm = a.job.pcm;
    size_t n = a.job.n_samples;
    if (n < min_samples) {
        padded.assign(min_samples, 0.0f);
        std::copy_n(pcm, n, padded.begin());
        pcm = padded.data();
        n   = min_samples;
    }
    const int n_audio = model_.encoder_.tokens(n);
    a.max_new = o.max_new_tokens > 0 ? o.max_new_tokens : DEFAULT_NEW_TOKENS;
    const auto [before, after] = model_.prompt(Qwen3AsrModel::context(o), language);
    const int n_prompt = int(before.size() + after.size()) + n_audio;
    if (n_prompt + a.max_new > decoder_.n_ctx()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d prompt positions (%d audio) + %d new tokens exceed the context of %d",
             n_prompt, n_audio, a.max_new, decoder_.n_ctx());
    }
    check_abort("start");
    check_cancelled(o, "start");
    report(o, 0.0f);

    Timings enc;
    const std::vector<float> audio_rows = encode_(exec_, pcm, n, opt_.n_threads, enc);
    timings_.mel_ms += enc.mel_ms;
    timings_.encode_ms += enc.encode_ms;
    check_abort("encoder");
    check_cancelled(o, "encoder");
    report(o, 0.35f);

    StageTimer prefill_timer;
    Qwen3Decoder::Piece audio;
    audio.rows   = audio_rows.data();
    audio.n_rows = n_audio;
    std::vector<float> lm_input;
    if (dump_enabled()) {
        std::vector<int32_t> ids = before;
        ids.insert(ids.end(), size_t(n_audio), model_.audio_id_);
        ids.insert(ids.end(), after.begin(), after.end());
        dump_ids("prompt_ids", ids);
    }
    a.tok = decoder_.prefill(a.seq, {{before}, audio, {after}}, dump_enabled() || o.step_logits ? &a.logits : nullptr,
                             dump_enabled() ? &lm_input : nullptr);
    timings_.prefill_ms += prefill_timer.ms();
    timings_.n_prefill_tokens += n_prompt;
    dump_f32("lm_input", lm_input, {n_prompt, model_.lm_hp_.hidden});
    dump_f32("logits_gen0", a.logits, {int64_t(a.logits.size())});
    report(o, 0.5f);
}

void Qwen3AsrSession::finish(DecodeJob & a) {
    const double audio_ms = 1000.0 * double(a.job.n_samples) / model_.info().sample_rate;
    const auto [language, text] = qwen3_asr::parse_output(model_.tokenizer().decode(a.out.tokens), a.out.language);
    a.out.language = language;
    a.out.text     = text;
    a.out.segments.push_back(Segment {0, int64_t(std::llround(audio_ms)), text, a.out.tokens, {}, a.out.truncated});
}

} // namespace

std::unique_ptr<Model> load_qwen3_asr(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<Qwen3AsrModel>(std::move(file), device);
}

} // namespace transcribe
