// Canary-Qwen-2.5B (NeMo SALM): NeMo mel -> FastConformer -> Linear projection -> Qwen3 with the
// audio rows spliced into a fixed prompt, greedy decoding (spec ../shared/spec/canary-qwen-2.5b.md).
#include "blocks/qwen3.h"
#include "blocks/speech_encoder.h"
#include "ops/matmul.h"
#include "core/npy.h"

#include <cmath>

namespace transcribe {

namespace {

constexpr int DEFAULT_N_CTX = 1024; // the model was trained on at most 1024 tokens

class CanaryQwenModel;

class CanaryQwenSession final : public SessionBase {
public:
    CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt);
    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;

private:
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
        for (int32_t id : prefix_) {
            check_id(id);
        }
        for (int32_t id : suffix_) {
            check_id(id);
        }
        check_id(eos_id_);
        tokenizer_ = Tokenizer::from_file(*file_);
        if (tokenizer_->n_vocab() > lm_hp_.vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer has %d tokens, embedding %d", file_->path().c_str(),
                 tokenizer_->n_vocab(), lm_hp_.vocab);
        }
        info_.architecture = "canary_qwen";
        info_.token_budget = true;
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
    int32_t                      eos_id_ = 0;
};

CanaryQwenSession::CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt)
    : SessionBase(model.device_, opt),
      model_(model),
      encode_(model.encoder_,
              [&model](ggml_context * ctx, ggml_tensor * enc) { return ops::matmul(ctx, model.proj_w_, enc, model.proj_b_); }),
      decoder_(model.lm_, exec_, opt.kv_type,
               std::min(opt.n_ctx > 0 ? opt.n_ctx : DEFAULT_N_CTX, model.lm_hp_.n_ctx_train)) {}

Transcript CanaryQwenSession::run(const float * pcm, size_t n_samples, const RunOptions & options) {
    timings_ = Timings {};
    check_audio_length(n_samples, model_.info());
    const double audio_ms = 1000.0 * double(n_samples) / model_.info().sample_rate;
    const int n_audio = model_.encoder_.frames(n_samples);
    const int max_new = options.max_new_tokens > 0 ? options.max_new_tokens : 256;
    const int n_prompt = int(model_.prefix_.size() + model_.suffix_.size()) + n_audio;
    if (n_prompt + max_new > decoder_.n_ctx()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d prompt positions (%d audio) + %d new tokens exceed the context of %d",
             n_prompt, n_audio, max_new, decoder_.n_ctx());
    }
    check_abort("start");
    progress(options, 0.0f);

    const std::vector<float> audio_rows = encode_(exec_, pcm, n_samples, opt_.n_threads, timings_);
    dump_f32("proj_out", audio_rows, {n_audio, model_.lm_hp_.hidden});
    check_abort("encoder");
    progress(options, 0.35f);

    StageTimer prefill_timer;
    Qwen3Decoder::Piece audio;
    audio.rows   = audio_rows.data();
    audio.n_rows = n_audio;
    const bool want_logits = dump_enabled() || options.step_logits;
    std::vector<float> logits, lm_input;
    int32_t tok = decoder_.prefill({{model_.prefix_}, audio, {model_.suffix_}}, want_logits ? &logits : nullptr,
                                   dump_enabled() ? &lm_input : nullptr);
    timings_.prefill_ms       = prefill_timer.ms();
    timings_.n_prefill_tokens = n_prompt;
    dump_f32("lm_input", lm_input, {n_prompt, model_.lm_hp_.hidden});
    dump_f32("logits_gen0", logits, {int64_t(logits.size())});
    progress(options, 0.5f);

    Transcript out;
    StageTimer decode_timer;
    for (;;) {
        const size_t k = out.tokens.size();
        if (options.step_logits) {
            options.step_logits->push_back(logits);
        }
        if (options.force_tokens && k < options.force_tokens->size()) {
            tok = (*options.force_tokens)[k];
        }
        if (tok == model_.eos_id_ && !options.ignore_eos) {
            break;
        }
        if (int(k) == max_new) {
            out.truncated = !options.ignore_eos; // the budget ran out before the end-of-generation token
            break;
        }
        out.tokens.push_back(tok);
        if (options.on_token) {
            options.on_token(tok);
        }
        check_abort("decode");
        progress(options, 0.5f + 0.5f * float(k + 1) / float(max_new));
        if (options.ignore_eos && int(k + 1) == max_new) {
            break;
        }
        tok = decoder_.step(tok, options.step_logits ? &logits : nullptr);
        ++timings_.n_decode_tokens;
    }
    timings_.decode_ms = decode_timer.ms();
    out.text = model_.tokenizer().decode(out.tokens);
    out.segments.push_back(Segment {0, int64_t(std::llround(audio_ms)), out.text, out.tokens, {}, out.truncated});
    progress(options, 1.0f);
    return out;
}

} // namespace

std::unique_ptr<Model> load_canary_qwen(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<CanaryQwenModel>(std::move(file), device);
}

} // namespace transcribe
