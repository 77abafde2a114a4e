// Canary-Qwen-2.5B (NeMo SALM): NeMo mel -> FastConformer -> Linear projection -> Qwen3 with the
// audio rows spliced into a fixed prompt, greedy decoding (spec ../shared/spec/canary-qwen-2.5b.md).
#include "blocks/qwen3.h"
#include "blocks/speech_encoder.h"
#include "decoding/draft_follower.h"
#include "ops/matmul.h"
#include "core/npy.h"
#include "core/system_memory.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {

constexpr int DEFAULT_N_CTX = 1024; // the model was trained on at most 1024 tokens

class CanaryQwenModel;
int context_length(const CanaryQwenModel & model, const SessionOptions & opt);

class CanaryQwenSession final : public SessionBase {
public:
    CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt);
    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;
    void run_batch(const JobSource & next, const JobDone & done) override;
    int  max_batch() const override { return decoder_.n_seq(); }

private:
    // A job holding one of the decoder's sequences.
    struct Active {
        size_t             id  = 0;
        int                seq = 0;
        BatchJob           job;
        Transcript         out;
        int32_t            tok = 0;     // the greedy (or forced) next token, not yet taken
        int                max_new = 0;
        double             audio_ms = 0;
        std::vector<float> logits;      // that produced tok, when the job collects them
        bool               cancelled = false;
        std::unique_ptr<DraftFollower> draft; // speculative decoding: the draft checked after tok
        std::vector<int32_t>           proposed; // this step's draft tokens, fed after tok
        size_t                         column = 0; // where tok is in this step's columns
    };
    void start(Active & a);
    bool take_token(Active & a); // false: the job is complete
    // The tokens this step's columns gave A (tok's successor, then each proposed token's): taken in
    // order while they agree with the draft; the cache rows of proposals not kept are dropped.
    bool take_step(Active & a, const std::vector<int32_t> & next, std::vector<std::vector<float>> * logits);
    void finish(Active & a);
    // Progress of a job's stage: jobs in a batch move out of step, so only what moves the bar forward is
    // reported (one job alone reports every stage).
    void report(const RunOptions & o, float f);

    const CanaryQwenModel & model_;
    SpeechEncoder::Run      encode_;
    Qwen3Decoder            decoder_;
    float                   progress_high_ = -1.0f;
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

int context_length(const CanaryQwenModel & model, const SessionOptions & opt) {
    return std::min(opt.n_ctx > 0 ? opt.n_ctx : DEFAULT_N_CTX, model.lm_hp_.n_ctx_train);
}

// The sequences decoded together: as asked, or as many as an eighth of the memory free now holds
// (at most 8, where batching stops paying on a CPU: bench/RESULTS.md), at least one.
int batch_size(const SessionOptions & opt, size_t bytes_per_sequence) {
    if (opt.n_batch > 0) {
        return opt.n_batch;
    }
    const size_t budget = available_memory_bytes() / 8;
    return int(std::clamp<size_t>(budget / std::max<size_t>(bytes_per_sequence, 1), 1, 8));
}

CanaryQwenSession::CanaryQwenSession(const CanaryQwenModel & model, const SessionOptions & opt)
    : SessionBase(model.device_, opt),
      model_(model),
      encode_(model.encoder_,
              [&model](ggml_context * ctx, ggml_tensor * enc) { return ops::matmul(ctx, model.proj_w_, enc, model.proj_b_); }),
      decoder_(model.lm_, exec_, opt.kv_type, context_length(model, opt),
               batch_size(opt, Qwen3Decoder::bytes_per_sequence(model.lm_hp_, opt.kv_type, context_length(model, opt)))) {}

Transcript CanaryQwenSession::run(const float * pcm, size_t n_samples, const RunOptions & options) {
    bool given = false;
    std::exception_ptr error;
    Transcript result;
    run_batch(
        [&](BatchJob & job) {
            if (given) {
                return false;
            }
            job   = BatchJob {pcm, n_samples, options};
            given = true;
            return true;
        },
        [&](size_t, Transcript * t, std::exception_ptr e) {
            if (t) {
                result = std::move(*t);
            }
            error = e;
        });
    if (error) {
        std::rethrow_exception(error);
    }
    return result;
}

// Length checks, the encoder and the prompt into the job's sequence; a.tok is then the first token.
void CanaryQwenSession::start(Active & a) {
    const RunOptions & o = a.job.options;
    check_audio_length(a.job.n_samples, model_.info());
    a.audio_ms = 1000.0 * double(a.job.n_samples) / model_.info().sample_rate;
    const int n_audio = model_.encoder_.frames(a.job.n_samples);
    a.max_new = o.max_new_tokens > 0 ? o.max_new_tokens : 256;
    const int n_prompt = int(model_.prefix_.size() + model_.suffix_.size()) + n_audio;
    if (n_prompt + a.max_new > decoder_.n_ctx()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d prompt positions (%d audio) + %d new tokens exceed the context of %d",
             n_prompt, n_audio, a.max_new, decoder_.n_ctx());
    }
    check_abort("start");
    check_cancelled(o, "start");
    report(o, 0.0f);
    if (o.draft && !o.force_tokens) {
        StageTimer draft_timer;
        a.draft = std::make_unique<DraftFollower>(o.draft(a.job.pcm, a.job.n_samples));
        timings_.draft_ms += draft_timer.ms();
        check_abort("draft");
        check_cancelled(o, "draft");
    }

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
    a.tok = decoder_.prefill(a.seq, {{model_.prefix_}, audio, {model_.suffix_}}, want_logits ? &a.logits : nullptr,
                             dump_enabled() ? &lm_input : nullptr);
    timings_.prefill_ms += prefill_timer.ms();
    timings_.n_prefill_tokens += n_prompt;
    dump_f32("lm_input", lm_input, {n_prompt, model_.lm_hp_.hidden});
    dump_f32("logits_gen0", a.logits, {int64_t(a.logits.size())});
    report(o, 0.5f);
}

bool CanaryQwenSession::take_token(Active & a) {
    const RunOptions & o = a.job.options;
    const size_t k = a.out.tokens.size();
    if (o.step_logits) {
        o.step_logits->push_back(a.logits);
    }
    if (o.force_tokens && k < o.force_tokens->size()) {
        a.tok = (*o.force_tokens)[k];
    }
    if (a.tok == model_.eos_id_ && !o.ignore_eos) {
        return false;
    }
    if (int(k) == a.max_new) {
        a.out.truncated = !o.ignore_eos; // the budget ran out before the end-of-generation token
        return false;
    }
    a.out.tokens.push_back(a.tok);
    if (a.draft) {
        a.draft->observe(a.out.tokens);
    }
    if (o.on_token) {
        o.on_token(a.tok);
    }
    check_abort("decode");
    if (o.cancelled && o.cancelled()) {
        a.cancelled = true;
        return false;
    }
    report(o, 0.5f + 0.5f * float(k + 1) / float(a.max_new));
    return !(o.ignore_eos && int(k + 1) == a.max_new);
}

bool CanaryQwenSession::take_step(Active & a, const std::vector<int32_t> & next, std::vector<std::vector<float>> * logits) {
    const int n_fed = 1 + int(a.proposed.size());
    const int first = decoder_.n_past(a.seq) - n_fed; // the cache length before this step
    int kept = 0;
    bool more = true;
    for (;; ++kept) {
        a.tok = next[a.column + size_t(kept)];
        if (logits) {
            a.logits.swap((*logits)[a.column + size_t(kept)]);
        }
        more = take_token(a);
        // A proposal equal to the decoder's own choice was fed where that choice goes: the next column
        // is then the decoder's token after it.
        if (!more || size_t(kept) >= a.proposed.size() || a.tok != a.proposed[size_t(kept)]) {
            break;
        }
    }
    timings_.n_decode_tokens += kept + 1;
    if (!a.proposed.empty()) {
        timings_.n_drafted += int(a.proposed.size());
        timings_.n_accepted += kept;
        ++timings_.n_verify_steps;
    }
    if (more && kept + 1 < n_fed) {
        decoder_.rewind(a.seq, first + 1 + kept);
    }
    return more;
}

void CanaryQwenSession::finish(Active & a) {
    a.out.text = model_.tokenizer().decode(a.out.tokens);
    a.out.segments.push_back(Segment {0, int64_t(std::llround(a.audio_ms)), a.out.text, a.out.tokens, {}, a.out.truncated});
    report(a.job.options, 1.0f);
}

void CanaryQwenSession::report(const RunOptions & o, float f) {
    const float at = o.progress_offset + o.progress_scale * f;
    if (at >= progress_high_) {
        progress_high_ = at;
        progress(o, f);
    }
}

void CanaryQwenSession::run_batch(const JobSource & next, const JobDone & done) {
    timings_       = Timings {};
    progress_high_ = -1.0f;
    std::vector<Active> active;
    active.reserve(size_t(decoder_.n_seq()));
    std::vector<int> free_seqs; // the lowest first: a masked attention reads up to the last stretch in use
    for (int s = decoder_.n_seq() - 1; s >= 0; --s) {
        free_seqs.push_back(s);
    }
    std::vector<int>                seqs;
    std::vector<int32_t>            tokens, next_tokens;
    std::vector<std::vector<float>> step_logits;
    size_t n_jobs = 0;
    // Hands a job that took its last token (or failed) to DONE and frees its sequence.
    auto end_job = [&](Active & a, std::exception_ptr error) {
        free_seqs.push_back(a.seq);
        if (!error && a.cancelled) {
            error = std::make_exception_ptr(Error(TRANSCRIBE_ERR_ABORTED, "run cancelled by the caller (decode)"));
        }
        if (error) {
            done(a.id, nullptr, error);
        } else {
            finish(a);
            done(a.id, &a.out, nullptr);
        }
    };
    for (;;) {
        // New jobs join between steps while there are free sequences.
        BatchJob job;
        while (!free_seqs.empty() && next(job)) {
            Active a;
            a.id  = n_jobs++;
            a.seq = free_seqs.back();
            a.job = std::move(job);
            job   = BatchJob {};
            free_seqs.pop_back();
            try {
                start(a);
            } catch (const Error & e) {
                if (e.status() == TRANSCRIBE_ERR_ABORTED && !(a.job.options.cancelled && a.job.options.cancelled())) {
                    throw; // the session's abort: everything stops
                }
                end_job(a, std::current_exception());
                continue;
            }
            if (take_token(a)) {
                active.push_back(std::move(a));
            } else {
                end_job(a, nullptr);
            }
        }
        if (active.empty()) {
            return;
        }

        StageTimer step_timer;
        seqs.clear();
        tokens.clear();
        bool want_logits = false;
        for (Active & a : active) {
            a.column = seqs.size();
            seqs.push_back(a.seq);
            tokens.push_back(a.tok);
            want_logits = want_logits || a.job.options.step_logits;
            a.proposed.clear();
            if (a.draft) {
                // Every proposal kept adds a token, and the step's last column decides one more.
                const int budget = a.max_new - int(a.out.tokens.size()) - 1;
                const int room   = decoder_.n_ctx() - decoder_.n_past(a.seq) - 1;
                a.proposed = a.draft->propose(std::min(budget, room));
                seqs.insert(seqs.end(), a.proposed.size(), a.seq);
                tokens.insert(tokens.end(), a.proposed.begin(), a.proposed.end());
            }
        }
        decoder_.step(seqs, tokens, next_tokens, want_logits ? &step_logits : nullptr);
        ++timings_.n_decode_steps;
        for (size_t i = 0; i < active.size();) {
            if (take_step(active[i], next_tokens, want_logits ? &step_logits : nullptr)) {
                ++i;
                continue;
            }
            end_job(active[i], nullptr);
            active.erase(active.begin() + std::ptrdiff_t(i));
        }
        timings_.decode_ms += step_timer.ms();
    }
}

} // namespace

std::unique_ptr<Model> load_canary_qwen(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<CanaryQwenModel>(std::move(file), device);
}

} // namespace transcribe
