// NVIDIA Parakeet-TDT (NeMo EncDecRNNTBPEModel with the TDT loss): NeMo mel -> FastConformer -> the
// transducer's prediction net and joint, decoded greedily with token durations (NeMo's greedy_batch
// TDT semantics), SentencePiece text and NeMo's token / word / segment times.
#include "blocks/speech_encoder.h"
#include "blocks/transducer.h"
#include "core/npy.h"
#include "core/subword_timestamps.h"

#include <algorithm>

namespace transcribe {

namespace {

class ParakeetTdtModel final : public Model {
public:
    ParakeetTdtModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
        : file_(std::move(file)), device_(device), encoder_(*file_), transducer_(*file_, hparams(*file_), encoder_.hparams().d_model) {
        const ModelFile & f = *file_;
        const std::string a = "parakeet_tdt.";
        durations_   = f.get_i32_array(a + "durations");
        max_symbols_ = int(f.get_u32(a + "max_symbols", 10));
        if (durations_.empty() || int(durations_.size()) != transducer_.hparams().extra || max_symbols_ <= 0 ||
            std::any_of(durations_.begin(), durations_.end(), [](int32_t d) { return d < 0 || d > 1000; })) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid TDT durations / max_symbols", f.path().c_str());
        }
        rules_.punctuation        = f.get_str_array(a + "punctuation");
        rules_.segment_separators = f.get_str_array(a + "segment_separators");
        rules_.segment_gap_frames = f.get_u32(a + "segment_gap_threshold", 0);
        tokenizer_ = Tokenizer::from_file(f);
        if (tokenizer_->n_vocab() != transducer_.hparams().vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer has %d pieces, the decoder %d", f.path().c_str(),
                 tokenizer_->n_vocab(), transducer_.hparams().vocab);
        }
        info_.architecture    = "parakeet_tdt";
        info_.name            = f.get_str("general.name", "parakeet-tdt");
        info_.max_audio_ms    = int(f.get_u32(a + "max_audio_ms", 120000));
        info_.languages       = f.has_key(a + "languages") ? f.get_str_array(a + "languages") : std::vector<std::string> {"en"};
        info_.word_timestamps = true;
        info_.token_budget    = false;
        file_->load_weights(device_);
        encoder_.prepare(*file_, device_);
        info_.sample_rate = encoder_.sample_rate();
    }

    std::unique_ptr<Session> new_session(const SessionOptions & options) override;

    static TransducerHParams hparams(const ModelFile & f) {
        TransducerHParams hp;
        hp.vocab        = int(f.get_u32("parakeet_tdt.vocab_size"));
        hp.pred_hidden  = int(f.get_u32("parakeet_tdt.pred_hidden"));
        hp.pred_layers  = int(f.get_u32("parakeet_tdt.pred_layers"));
        hp.joint_hidden = int(f.get_u32("parakeet_tdt.joint_hidden"));
        hp.extra        = int(f.get_i32_array("parakeet_tdt.durations").size());
        if (f.get_u32("parakeet_tdt.blank_id") != uint32_t(hp.vocab)) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: blank id must follow the vocabulary", f.path().c_str());
        }
        return hp;
    }

    std::unique_ptr<ModelFile> file_;
    ggml_backend_dev_t         device_;
    SpeechEncoder              encoder_;
    Transducer                 transducer_;
    std::vector<int32_t>       durations_;
    int                        max_symbols_ = 10;
    SubwordRules               rules_;
};

class ParakeetTdtSession final : public SessionBase {
public:
    ParakeetTdtSession(const ParakeetTdtModel & model, const SessionOptions & opt)
        : SessionBase(model.device_, opt),
          model_(model),
          encode_(model.encoder_, [&model](ggml_context * ctx, ggml_tensor * enc) {
              return model.transducer_.project_encoder(ctx, enc);
          }),
          state_(model.transducer_, exec_) {}

    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;

private:
    const ParakeetTdtModel & model_;
    SpeechEncoder::Run       encode_;
    TransducerState          state_;
};

std::unique_ptr<Session> ParakeetTdtModel::new_session(const SessionOptions & options) {
    return std::make_unique<ParakeetTdtSession>(*this, options);
}

int argmax(const float * v, int n) { return int(std::max_element(v, v + n) - v); }

Transcript ParakeetTdtSession::run(const float * pcm, size_t n_samples, const RunOptions & options) {
    timings_ = Timings {};
    check_audio_length(n_samples, model_.info());
    check_abort("start");
    check_cancelled(options, "start");
    progress(options, 0.0f);

    const TransducerHParams & hp = model_.transducer_.hparams();
    const int T = model_.encoder_.frames(n_samples), J = hp.joint_hidden, V1 = hp.vocab + 1;
    const std::vector<float> enc_proj = encode_(exec_, pcm, n_samples, opt_.n_threads, timings_);
    dump_f32("joint_enc_proj", enc_proj, {T, J});
    check_abort("encoder");
    check_cancelled(options, "encoder");
    progress(options, 0.6f);

    // Greedy TDT: at frame t the joint gives a token and a duration; a token is emitted (the prediction
    // net steps on it) and t advances by its duration (0: stay on the frame, at most max_symbols tokens
    // there); a blank only advances, by at least one frame.
    StageTimer decode_timer;
    state_.start();
    dump_f32("pred_out_sos", state_.pred_out(), {hp.pred_hidden});
    dump_f32("pred_state_sos_h", state_.h(), {hp.pred_layers, hp.pred_hidden});
    dump_f32("pred_state_sos_c", state_.c(), {hp.pred_layers, hp.pred_hidden});
    dump_f32("joint_pred_proj_sos", state_.pred_proj(), {J});
    Transcript out;
    int on_frame = 0;
    for (int t = 0; t < T;) {
        const std::vector<float> & logits = state_.joint(&enc_proj[size_t(t) * size_t(J)]);
        if (options.step_logits) {
            options.step_logits->push_back(logits);
        }
        if (t == 0 && out.tokens.empty() && on_frame == 0) {
            dump_f32("joint_logits_t0", logits, {int64_t(logits.size())});
        }
        const int token    = argmax(logits.data(), V1);
        const int duration = model_.durations_[size_t(argmax(logits.data() + V1, hp.extra))];
        if (token == hp.blank()) {
            t += std::max(duration, 1);
            on_frame = 0;
            continue;
        }
        out.tokens.push_back(token);
        if (options.on_token) {
            options.on_token(token);
        }
        out.token_frames.push_back(t);
        out.token_durations.push_back(duration);
        state_.predict(token);
        ++timings_.n_decode_tokens;
        ++on_frame;
        if (duration > 0) {
            t += duration;
            on_frame = 0;
        } else if (on_frame >= model_.max_symbols_) {
            ++t; // the label-looping decoder forces the frame on after max_symbols tokens
            on_frame = 0;
        }
        check_abort("decode");
        check_cancelled(options, "decode");
        progress(options, 0.6f + 0.4f * float(std::min(t, T)) / float(T));
    }
    timings_.decode_ms = decode_timer.ms();

    // Text and times by NeMo's rules; offsets in encoder frames.
    out.timed = true;
    const Tokenizer & tok = model_.tokenizer();
    const SubwordRules & rules = model_.rules_;
    out.text = strip_space_before_punctuation(tok.decode(out.tokens), rules);
    std::vector<TimedToken> timed;
    for (size_t i = 0; i < out.tokens.size(); ++i) {
        timed.push_back({out.tokens[i], out.token_frames[i], out.token_frames[i] + out.token_durations[i]});
    }
    refine_punctuation_times(timed, tok, rules);
    const int64_t ms = model_.encoder_.frame_ms();
    const std::vector<TimedText> words = word_offsets(timed, tok, rules);
    for (const TimedText & w : words) {
        out.words.push_back({w.text, w.start * ms, w.end * ms});
    }
    for (const TimedText & s : segment_offsets(words, rules)) {
        Segment seg;
        seg.t0_ms = s.start * ms;
        seg.t1_ms = s.end * ms;
        seg.text  = s.text;
        seg.words.assign(out.words.begin() + long(s.first), out.words.begin() + long(s.first + s.count));
        const TimedText & last = words[s.first + s.count - 1];
        seg.tokens.assign(out.tokens.begin() + long(words[s.first].first), out.tokens.begin() + long(last.first + last.count));
        out.segments.push_back(std::move(seg));
    }
    progress(options, 1.0f);
    return out;
}

} // namespace

std::unique_ptr<Model> load_parakeet_tdt(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<ParakeetTdtModel>(std::move(file), device);
}

} // namespace transcribe
