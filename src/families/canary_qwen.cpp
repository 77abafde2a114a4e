// Canary-Qwen-2.5B (NeMo SALM): NeMo mel -> FastConformer -> Linear projection -> Qwen3 with the
// audio rows spliced into a fixed prompt, greedy decoding (spec ../shared/spec/canary-qwen-2.5b.md).
#include "blocks/fastconformer.h"
#include "blocks/qwen3.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/family.h"
#include "core/log.h"
#include "core/matmul.h"
#include "core/mel.h"
#include "core/npy.h"

#include <chrono>
#include <cmath>

namespace transcribe {

namespace {

constexpr int DEFAULT_N_CTX = 1024; // the model was trained on at most 1024 tokens

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

class CanaryQwenModel;

class CanaryQwenSession final : public Session {
public:
    CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt);
    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;

private:
    Graph & encoder_graph(int n_frames, int n_valid);
    void check_abort(const char * stage) const;
    void progress(const RunOptions & o, float f) const;

    const CanaryQwenModel & model_;
    SessionOptions          opt_;
    Executor                exec_;
    Qwen3Decoder            decoder_;
    std::map<int, std::unique_ptr<Graph>> encoder_graphs_;
};

class CanaryQwenModel final : public Model {
public:
    CanaryQwenModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
        : file_(std::move(file)),
          device_(device),
          enc_hp_(FastConformerHParams::from_file(*file_, int(file_->get_u32("mel.n_mels")))),
          lm_hp_(Qwen3HParams::from_file(*file_)),
          encoder_(*file_, enc_hp_, "enc"),
          lm_(*file_, lm_hp_, "llm", "token_embd.weight") {
        const std::string a = "canary_qwen.";
        proj_w_  = file_->matmul_weight("proj.weight", {enc_hp_.d_model, lm_hp_.hidden});
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
        if (tokenizer_.n_vocab() > lm_hp_.vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer has %d tokens, embedding %d", file_->path().c_str(),
                 tokenizer_.n_vocab(), lm_hp_.vocab);
        }
        info_.architecture = "canary_qwen";
        info_.name         = file_->get_str("general.name", "canary-qwen");
        info_.max_audio_ms = int(file_->get_u32(a + "max_audio_ms", 40000));
        info_.languages    = file_->has_key(a + "languages") ? file_->get_str_array(a + "languages")
                                                             : std::vector<std::string> {"en"};

        file_->load_weights(device_);
        encoder_.prepare(*file_, device_);
        MelConfig mc = mel_config_from_file(*file_);
        if (mc.n_mels != enc_hp_.n_mels) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: mel bins %d != encoder input %d", file_->path().c_str(),
                 mc.n_mels, enc_hp_.n_mels);
        }
        info_.sample_rate = mc.sample_rate;
        mel_ = std::make_unique<MelFrontend>(std::move(mc));
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
    FastConformerHParams         enc_hp_;
    Qwen3HParams                 lm_hp_;
    FastConformer                encoder_;
    Qwen3                        lm_;
    ggml_tensor *                proj_w_ = nullptr;
    ggml_tensor *                proj_b_ = nullptr;
    std::vector<int32_t>         prefix_, suffix_;
    int32_t                      eos_id_ = 0;
    std::unique_ptr<MelFrontend> mel_;
};

CanaryQwenSession::CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt)
    : model_(model),
      opt_(opt),
      exec_(model.device_, opt.n_threads),
      decoder_(model.lm_, exec_, opt.kv_type,
               std::min(opt.n_ctx > 0 ? opt.n_ctx : DEFAULT_N_CTX, model.lm_hp_.n_ctx_train)) {}

void CanaryQwenSession::check_abort(const char * stage) const {
    if (opt_.abort_callback && opt_.abort_callback(opt_.abort_user_data)) {
        fail(TRANSCRIBE_ERR_ABORTED, "run aborted by the caller (%s)", stage);
    }
}

void CanaryQwenSession::progress(const RunOptions & o, float f) const {
    if (opt_.progress_callback) {
        opt_.progress_callback(o.progress_offset + o.progress_scale * f, opt_.progress_user_data);
    }
}

Graph & CanaryQwenSession::encoder_graph(int n_frames, int n_valid) {
    auto & slot = encoder_graphs_[n_frames];
    if (!slot) {
        if (encoder_graphs_.size() > 8) {
            encoder_graphs_.clear();
            return encoder_graph(n_frames, n_valid);
        }
        auto g = std::make_unique<Graph>(16384, "encoder");
        FastConformer::Taps taps;
        ggml_tensor * enc = model_.encoder_.build(*g, n_frames, n_valid, &taps);
        ggml_tensor * proj = matmul(g->ctx(), model_.proj_w_, enc, model_.proj_b_);
        if (dump_enabled()) {
            g->output(taps.pre_encode, "pre_encode");
            g->output(taps.layer0, "enc_layer_0");
            g->output(taps.last, "enc_layer_last");
        }
        g->output(proj, "proj_out");
        slot = std::move(g);
    }
    return *slot;
}

Transcript CanaryQwenSession::run(const float * pcm, size_t n_samples, const RunOptions & options) {
    using clock = std::chrono::steady_clock;
    timings_ = Timings {};
    const int sr = model_.info().sample_rate;
    const double audio_ms = 1000.0 * double(n_samples) / sr;
    if (audio_ms > model_.info().max_audio_ms) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "audio of %.1f s exceeds the model's %.1f s per run", audio_ms / 1000.0,
             model_.info().max_audio_ms / 1000.0);
    }
    const int hop = model_.mel_->config().hop_length;
    const int n_valid = int(n_samples / size_t(hop));
    const int n_audio = FastConformer::subsampled_length(n_valid);
    const int max_new = options.max_new_tokens > 0 ? options.max_new_tokens : 256;
    const int n_prompt = int(model_.prefix_.size() + model_.suffix_.size()) + n_audio;
    if (n_prompt + max_new > decoder_.n_ctx()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d prompt positions (%d audio) + %d new tokens exceed the context of %d",
             n_prompt, n_audio, max_new, decoder_.n_ctx());
    }
    check_abort("start");
    progress(options, 0.0f);

    auto t0 = clock::now();
    MelFeatures mel = model_.mel_->compute(pcm, n_samples, opt_.n_threads);
    timings_.mel_ms = ms_since(t0);
    dump_f32("mel", mel.data, {mel.n_mels, mel.n_frames});
    check_abort("mel");
    progress(options, 0.05f);

    t0 = clock::now();
    Graph & eg = encoder_graph(mel.n_frames, mel.n_valid);
    exec_.compute(eg, [&] { model_.encoder_.set_inputs(eg, mel.data, mel.n_frames, mel.n_valid); });
    std::vector<float> audio_rows = tensor_get_f32(eg.get("proj_out"));
    timings_.encode_ms = ms_since(t0);
    if (dump_enabled()) {
        const int64_t d = model_.enc_hp_.d_model;
        dump_f32("pre_encode", tensor_get_f32(eg.get("pre_encode")), {n_audio, d});
        dump_f32("enc_layer_0", tensor_get_f32(eg.get("enc_layer_0")), {n_audio, d});
        const std::vector<float> last = tensor_get_f32(eg.get("enc_layer_last"));
        dump_f32("enc_layer_last", last, {n_audio, d});
        dump_f32("enc_out", last, {n_audio, d});
        dump_f32("proj_out", audio_rows, {n_audio, model_.lm_hp_.hidden});
    }
    check_abort("encoder");
    progress(options, 0.35f);

    t0 = clock::now();
    Qwen3Decoder::Piece audio;
    audio.rows   = audio_rows.data();
    audio.n_rows = n_audio;
    const bool want_logits = dump_enabled() || options.step_logits;
    std::vector<float> logits, lm_input;
    int32_t tok = decoder_.prefill({{model_.prefix_}, audio, {model_.suffix_}}, want_logits ? &logits : nullptr,
                                   dump_enabled() ? &lm_input : nullptr);
    timings_.prefill_ms       = ms_since(t0);
    timings_.n_prefill_tokens = n_prompt;
    dump_f32("lm_input", lm_input, {n_prompt, model_.lm_hp_.hidden});
    dump_f32("logits_gen0", logits, {int64_t(logits.size())});
    progress(options, 0.5f);

    Transcript out;
    t0 = clock::now();
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
        check_abort("decode");
        progress(options, 0.5f + 0.5f * float(k + 1) / float(max_new));
        if (options.ignore_eos && int(k + 1) == max_new) {
            break;
        }
        tok = decoder_.step(tok, options.step_logits ? &logits : nullptr);
        ++timings_.n_decode_tokens;
    }
    timings_.decode_ms = ms_since(t0);
    out.text = model_.tokenizer().decode(out.tokens);
    out.segments.push_back(Segment {0, int64_t(std::llround(audio_ms)), out.text, out.tokens, out.truncated});
    progress(options, 1.0f);
    return out;
}

} // namespace

std::unique_ptr<Model> load_canary_qwen(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<CanaryQwenModel>(std::move(file), device);
}

} // namespace transcribe
