// Canary-Qwen-2.5B (NeMo SALM): NeMo mel -> FastConformer -> Linear projection -> Qwen3 with the
// audio rows spliced into a fixed prompt, greedy decoding (spec ../shared/spec/canary-qwen-2.5b.md).
#include "blocks/qwen3.h"
#include "blocks/speech_encoder.h"
#include "decoding/continuous_batching.h"
#include "ops/matmul.h"
#include "core/npy.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {

constexpr int DEFAULT_N_CTX = 1024; // the model was trained on at most 1024 tokens

class CanaryQwenModel;
int context_length(const CanaryQwenModel & model, const SessionOptions & opt);

class CanaryQwenSession final : public ContinuousBatchingSession {
public:
    CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt);

private:
    void start(DecodeJob & a) override;
    void finish(DecodeJob & a) override;

    const CanaryQwenModel & model_;
    SpeechEncoder::Run      encode_;
    Qwen3Decoder            decoder_;
};

class CanaryQwenModel final : public Model {
public:
    CanaryQwenModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
        : file_(std::move(file)),
          device_(device),
          encoder_(*file_),
          lm_hp_(Qwen3HParams::from_file(*file_)),
          lm_(*file_, lm_hp_, "llm", "token_embd.weight") {
        const std::string a = "canary_qwen.";
        proj_w_  = file_->matmul_weight("proj.weight", {encoder_.hparams().d_model, lm_hp_.hidden});
        proj_b_  = file_->tensor("proj.bias", {lm_hp_.hidden}, {GGML_TYPE_F32});
        prefix_  = file_->get_i32_array(a + "prompt_prefix");
        suffix_  = file_->get_i32_array(a + "prompt_suffix");
        eos_id_  = int32_t(file_->get_u32(a + "eos_token_id"));
        audio_id_ = int32_t(file_->get_u32(a + "audio_token_id"));
        for (int32_t id : prefix_) {
            check_id(id);
        }
        for (int32_t id : suffix_) {
            check_id(id);
        }
        check_id(eos_id_);
        check_id(audio_id_);
        tokenizer_ = Tokenizer::from_file(*file_);
        if (tokenizer_->n_vocab() > lm_hp_.vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer has %d tokens, embedding %d", file_->path().c_str(),
                 tokenizer_->n_vocab(), lm_hp_.vocab);
        }
        read_user_turn();
        info_.architecture = "canary_qwen";
        info_.token_budget = true;
        info_.speculative  = true;
        info_.name         = file_->get_str("general.name", "canary-qwen");
        info_.max_audio_ms = int(file_->get_u32(a + "max_audio_ms", 40000));
        info_.languages    = file_->has_key(a + "languages") ? file_->get_str_array(a + "languages")
                                                             : std::vector<std::string> {"en"};

        file_->load_weights(device_);
        encoder_.prepare(*file_, device_);
        info_.sample_rate = encoder_.sample_rate();
    }

    std::unique_ptr<Session> new_session(const SessionOptions & options) override {
        return std::make_unique<CanaryQwenSession>(*this, options);
    }

    // The user turn's text after <|im_start|> ("user\n" + the instruction), where the prefix is exactly that
    // text tokenized; only then can a context be set into it.
    void read_user_turn() {
        if (prefix_.size() < 2 || !tokenizer_->is_control(prefix_[0])) {
            return;
        }
        const std::vector<int32_t> text_ids(prefix_.begin() + 1, prefix_.end());
        const std::string turn = tokenizer_->decode_bytes(text_ids);
        const size_t role_end = turn.find('\n');
        if (role_end == std::string::npos || tokenizer_->encode(turn) != text_ids) {
            return;
        }
        role_             = turn.substr(0, role_end + 1);
        instruction_      = turn.substr(role_end + 1);
        info_.text_prompt = true;
    }

    // The prompt's ids before the audio, with CONTEXT ahead of the instruction: NeMo's SALM joins a
    // conversation's consecutive user turns with a space (speechlm2/data/salm_dataset.py) and its qwen
    // template's turn is tokenized as one text, so the context also decides how the instruction splits.
    std::vector<int32_t> prompt_prefix(const std::string & context) const {
        if (context.empty()) {
            return prefix_;
        }
        if (!info_.text_prompt) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "prompt: model file %s has no user turn to set one in", file_->path().c_str());
        }
        std::vector<int32_t> ids = tokenizer_->encode(utf8_nfc(role_ + context + " " + instruction_, "prompt"));
        ids.insert(ids.begin(), prefix_[0]);
        return ids;
    }

    void check_id(int32_t id) const {
        if (id < 0 || id >= lm_hp_.vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: prompt token id %d outside the vocabulary", file_->path().c_str(), id);
        }
    }

    std::unique_ptr<ModelFile>   file_;
    ggml_backend_dev_t           device_;
    SpeechEncoder                encoder_;
    Qwen3HParams                 lm_hp_;
    Qwen3                        lm_;
    ggml_tensor *                proj_w_ = nullptr;
    ggml_tensor *                proj_b_ = nullptr;
    std::vector<int32_t>         prefix_, suffix_;
    std::string                  role_, instruction_; // the prefix's text after <|im_start|>, at its first newline
    int32_t                      eos_id_ = 0;
    int32_t                      audio_id_ = 0; // the audio tag's id (the rows stand in its place)
};

int context_length(const CanaryQwenModel & model, const SessionOptions & opt) {
    return std::min(opt.n_ctx > 0 ? opt.n_ctx : DEFAULT_N_CTX, model.lm_hp_.n_ctx_train);
}

CanaryQwenSession::CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt)
    : ContinuousBatchingSession(model.device_, opt, decoder_, model.eos_id_),
      model_(model),
      encode_(model.encoder_,
              [&model](ggml_context * ctx, ggml_tensor * enc) { return ops::matmul(ctx, model.proj_w_, enc, model.proj_b_); }),
      decoder_(model.lm_, exec_, opt.kv_type, context_length(model, opt),
               sequences_for(opt, Qwen3Decoder::bytes_per_sequence(model.lm_hp_, opt.kv_type, context_length(model, opt)))) {}

// Length checks, the encoder and the prompt into the job's sequence; a.tok is then the first token.
void CanaryQwenSession::start(DecodeJob & a) {
    const RunOptions & o = a.job.options;
    check_audio_length(a.job.n_samples, model_.info());
    const int n_audio = model_.encoder_.frames(a.job.n_samples);
    a.max_new = o.max_new_tokens > 0 ? o.max_new_tokens : 256;
    const std::vector<int32_t> prefix = model_.prompt_prefix(o.prompt);
    const int n_prompt = int(prefix.size() + model_.suffix_.size()) + n_audio;
    if (n_prompt + a.max_new > decoder_.n_ctx()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d prompt positions (%d audio) + %d new tokens exceed the context of %d",
             n_prompt, n_audio, a.max_new, decoder_.n_ctx());
    }
    check_abort("start");
    check_cancelled(o, "start");
    report(o, 0.0f);

    Timings enc;
    const std::vector<float> audio_rows = encode_(exec_, a.job.pcm, a.job.n_samples, opt_.n_threads, enc);
    timings_.mel_ms += enc.mel_ms;
    timings_.encode_ms += enc.encode_ms;
    dump_f32("proj_out", audio_rows, {n_audio, model_.lm_hp_.hidden});
    check_abort("encoder");
    check_cancelled(o, "encoder");
    report(o, 0.35f);

    StageTimer prefill_timer;
    Qwen3Decoder::Piece audio;
    audio.rows   = audio_rows.data();
    audio.n_rows = n_audio;
    const bool want_logits = dump_enabled() || o.step_logits;
    std::vector<float> lm_input;
    if (dump_enabled()) {
        std::vector<int32_t> prompt_ids = prefix;
        prompt_ids.push_back(model_.audio_id_);
        prompt_ids.insert(prompt_ids.end(), model_.suffix_.begin(), model_.suffix_.end());
        dump_ids("prompt_ids", prompt_ids);
    }
    a.tok = decoder_.prefill(a.seq, {{prefix}, audio, {model_.suffix_}}, want_logits ? &a.logits : nullptr,
                             dump_enabled() ? &lm_input : nullptr);
    timings_.prefill_ms += prefill_timer.ms();
    timings_.n_prefill_tokens += n_prompt;
    dump_f32("lm_input", lm_input, {n_prompt, model_.lm_hp_.hidden});
    dump_f32("logits_gen0", a.logits, {int64_t(a.logits.size())});
    report(o, 0.5f);
}

void CanaryQwenSession::finish(DecodeJob & a) {
    const double audio_ms = 1000.0 * double(a.job.n_samples) / model_.info().sample_rate;
    a.out.text = model_.tokenizer().decode(a.out.tokens);
    a.out.segments.push_back(Segment {0, int64_t(std::llround(audio_ms)), a.out.text, a.out.tokens, {}, a.out.truncated});
}

} // namespace

std::unique_ptr<Model> load_canary_qwen(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<CanaryQwenModel>(std::move(file), device);
}

} // namespace transcribe
