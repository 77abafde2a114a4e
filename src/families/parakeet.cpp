// NVIDIA Parakeet (NeMo's FastConformer ASR models): NeMo mel -> FastConformer -> a head, decoded
// greedily as NeMo's greedy_batch decoders do: a transducer (EncDecRNNTBPEModel: the prediction net and
// joint; with the TDT loss tokens carry durations, with the standard RNNT loss they do not) or CTC
// (EncDecCTCModelBPE: a linear layer over every frame, the frames' argmaxes folded); a hybrid
// (EncDecHybridRNNTCTCBPEModel) has both over one encoder and runs either (the transducer unless asked).
// SentencePiece text and NeMo's token / word / segment times, each head's token times by its own rules.
#include "blocks/cache_aware_stream.h"
#include "blocks/speech_encoder.h"
#include "blocks/transducer.h"
#include "core/npy.h"
#include "decoding/subword_timestamps.h"
#include "decoding/ctc_greedy.h"
#include "ops/matmul.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {

enum class Head { Transducer, Ctc };

class ParakeetModel final : public Model {
public:
    ParakeetModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device, Head head)
        : file_(std::move(file)), device_(device), default_head_(head), encoder_(*file_) {
        const ModelFile & f = *file_;
        const std::string a = f.architecture() + ".";
        vocab_ = int(f.get_u32(a + "vocab_size"));
        if (vocab_ <= 0 || f.get_u32(a + "blank_id") != uint32_t(vocab_)) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: blank id must follow the vocabulary", f.path().c_str());
        }
        if (head == Head::Transducer) { // TDT when the file has durations, RNNT when it has none
            durations_   = f.has_key(a + "durations") ? f.get_i32_array(a + "durations") : std::vector<int32_t> {};
            transducer_  = std::make_unique<Transducer>(f, transducer_hparams(f, int(durations_.size())), encoder_.hparams().d_model);
            max_symbols_ = int(f.get_u32(a + "max_symbols", 10));
            if ((f.architecture() == "parakeet_tdt") == durations_.empty() || max_symbols_ <= 0 ||
                std::any_of(durations_.begin(), durations_.end(), [](int32_t d) { return d < 0 || d > 1000; })) {
                fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid transducer durations / max_symbols (parakeet_tdt has "
                     "durations, parakeet_rnnt none)", f.path().c_str());
            }
        }
        if (head == Head::Ctc || f.find("ctc.weight")) { // a CTC model, or a hybrid's second head
            ctc_w_ = f.matmul_weight("ctc.weight", {encoder_.hparams().d_model, vocab_ + 1});
            ctc_b_ = f.tensor("ctc.bias", {vocab_ + 1}, {GGML_TYPE_F32});
        }
        rules_.punctuation        = f.get_str_array(a + "punctuation");
        rules_.segment_separators = f.get_str_array(a + "segment_separators");
        rules_.segment_gap_frames = f.get_u32(a + "segment_gap_threshold", 0);
        ctc_rules_ = rules_;
        if (head == Head::Transducer && ctc_w_) { // the hybrid's CTC decoding section is its own
            ctc_rules_.segment_separators = f.get_str_array(a + "ctc.segment_separators");
            ctc_rules_.segment_gap_frames = f.get_u32(a + "ctc.segment_gap_threshold", 0);
        }
        tokenizer_ = Tokenizer::from_file(f);
        if (tokenizer_->n_vocab() != vocab_) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer has %d pieces, the decoder %d", f.path().c_str(),
                 tokenizer_->n_vocab(), vocab_);
        }
        info_.architecture    = f.architecture();
        info_.name            = f.get_str("general.name", f.architecture());
        info_.max_audio_ms    = int(f.get_u32(a + "max_audio_ms", 120000));
        info_.languages       = f.has_key(a + "languages") ? f.get_str_array(a + "languages") : std::vector<std::string> {"en"};
        info_.word_timestamps = true;
        info_.transducer_head = transducer_ != nullptr;
        info_.ctc_head        = ctc_w_ != nullptr;
        info_.token_budget    = false;
        info_.hotwords        = true;
        if (encoder_.hparams().cache_aware()) {
            for (const AttentionContext & c : encoder_.hparams().att_contexts) {
                info_.att_contexts.push_back(c.left);
                info_.att_contexts.push_back(c.right);
            }
        }
        file_->load_weights(device_);
        encoder_.prepare(*file_, device_);
        info_.sample_rate = encoder_.sample_rate();
        info_.frame_ms    = encoder_.frame_ms();
        try { // a model trained for cache-aware streaming at its default context streams natively
            CacheAwareStreamingConfig::from(encoder_.hparams(), encoder_.hparams().att_contexts.front());
            info_.native_streaming = true;
        } catch (const Error &) {
        }
        for (int32_t id = 0; id < vocab_; ++id) {
            if (tokenizer_->piece(id) == "<EOU>") { // the end-of-utterance models' turn end
                info_.end_of_turn_token = id;
            }
        }
    }

    std::unique_ptr<Session> new_session(const SessionOptions & options) override;

    static TransducerHParams transducer_hparams(const ModelFile & f, int n_durations) {
        const std::string a = f.architecture() + ".";
        TransducerHParams hp;
        hp.vocab        = int(f.get_u32(a + "vocab_size"));
        hp.pred_hidden  = int(f.get_u32(a + "pred_hidden"));
        hp.pred_layers  = int(f.get_u32(a + "pred_layers"));
        hp.joint_hidden = int(f.get_u32(a + "joint_hidden"));
        hp.extra        = n_durations;
        return hp;
    }

    // The head a run asked for, if the model has it.
    Head head_for(DecoderType asked) const {
        if (asked == DecoderType::Default) {
            return default_head_;
        }
        const Head head = asked == DecoderType::Ctc ? Head::Ctc : Head::Transducer;
        if ((head == Head::Ctc && !ctc_w_) || (head == Head::Transducer && !transducer_)) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "model %s has no %s head (it decodes with its %s head only)",
                 info_.name.c_str(), head == Head::Ctc ? "CTC" : "transducer", ctc_w_ ? "CTC" : "transducer");
        }
        return head;
    }

    // The run's attention context: the one it asked for if the model has it, else the model's default.
    AttentionContext attention_context(const RunOptions & options) const {
        const FastConformerHParams & hp = encoder_.hparams();
        if (options.att_context_size.empty()) {
            return hp.att_contexts.front();
        }
        if (options.att_context_size.size() != 2) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "an attention context is two numbers, left and right");
        }
        return hp.resolve({options.att_context_size[0], options.att_context_size[1]});
    }

    // What the encoder stage ends with: the joint's encoder projection (transducer) or the CTC logits.
    ggml_tensor * encoder_head(ggml_context * ctx, ggml_tensor * enc, Head head) const {
        return head == Head::Transducer ? transducer_->project_encoder(ctx, enc) : ops::matmul(ctx, ctc_w_, enc, ctc_b_);
    }

    std::unique_ptr<ModelFile>  file_;
    ggml_backend_dev_t          device_;
    Head                        default_head_;
    SpeechEncoder               encoder_;
    int                         vocab_ = 0;
    std::unique_ptr<Transducer> transducer_;
    std::vector<int32_t>        durations_; // TDT's; none for RNNT
    int                         max_symbols_ = 10;
    ggml_tensor *               ctc_w_ = nullptr, * ctc_b_ = nullptr; // CTC
    SubwordRules                rules_, ctc_rules_; // the transducer's decoding section's, the CTC head's
};

class ParakeetSession final : public SessionBase {
public:
    ParakeetSession(const ParakeetModel & model, const SessionOptions & opt)
        : SessionBase(model.device_, opt),
          model_(model),
          encode_transducer_(model.encoder_, [&model](ggml_context * ctx, ggml_tensor * enc) { return model.encoder_head(ctx, enc, Head::Transducer); }),
          encode_ctc_(model.encoder_, [&model](ggml_context * ctx, ggml_tensor * enc) { return model.encoder_head(ctx, enc, Head::Ctc); }) {
        if (model.transducer_) {
            state_ = std::make_unique<TransducerState>(*model.transducer_, exec_);
        }
    }

    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;
    std::unique_ptr<NativeStream> open_stream(const RunOptions & options) override;

private:
    // The greedy decoders: tokens into OUT, each token's NeMo offsets (frames) into TIMED.
    // BOOST: the run's hotwords, or null.
    void decode_transducer(const std::vector<float> & enc_proj, int T, const RunOptions & options, PhraseBoost * boost,
                           Transcript & out, std::vector<TimedToken> & timed);
    // The label-looping loop from AT over frames up to T, ENC_PROJ holding rows FIRST_ROW on; AT is where
    // it stopped (a stream's next step goes on from there).
    struct TransducerProgress {
        int t        = 0;
        int on_frame = 0;
    };
    void decode_transducer_frames(const float * enc_proj, int first_row, int T, TransducerProgress & at,
                                  const RunOptions & options, PhraseBoost * boost, Transcript & out,
                                  std::vector<TimedToken> & timed);
    friend class ParakeetStream;
    void decode_ctc(const std::vector<float> & logits, int T, const RunOptions & options, PhraseBoost * boost,
                    Transcript & out, std::vector<TimedToken> & timed);

    const ParakeetModel &            model_;
    SpeechEncoder::Run               encode_transducer_, encode_ctc_; // graphs are built for the head a run takes
    std::unique_ptr<TransducerState> state_;
};

std::unique_ptr<Session> ParakeetModel::new_session(const SessionOptions & options) {
    return std::make_unique<ParakeetSession>(*this, options);
}

// NeMo's cache-aware streaming (conformer_stream_step): each encoder step's frames decoded as they come,
// the decoder's state carried from step to step (the transducer's LSTM state and frame, or CTC's previous
// frame), so the tokens are those one decode of all the steps' frames gives.
class ParakeetStream final : public NativeStream {
public:
    ParakeetStream(ParakeetSession & session, const RunOptions & options)
        : session_(session), model_(session.model_), options_(options), head_(model_.head_for(options.decoder_type)),
          encoder_(model_.encoder_, model_.attention_context(options),
                   [this](ggml_context * ctx, ggml_tensor * enc) { return model_.encoder_head(ctx, enc, head_); },
                   head_ == Head::Transducer ? model_.transducer_->hparams().joint_hidden : model_.vocab_ + 1) {
        options_.step_logits = nullptr;
        if (!options.hotwords.empty()) {
            tree_  = std::make_unique<PhraseBoostingTree>(PhraseBoostingTree::from_text(options.hotwords, model_.tokenizer(), model_.vocab_));
            boost_ = std::make_unique<PhraseBoost>(*tree_, options.hotword_weight);
        }
        if (head_ == Head::Transducer) {
            session_.state_->start();
        } else {
            ctc_ = std::make_unique<CtcGreedy>(model_.vocab_ + 1, model_.vocab_, boost_.get());
        }
    }

    void push(const float * pcm, size_t n) override {
        std::vector<CacheAwareEncoderStream::Step> steps;
        encoder_.push(session_.exec_, pcm, n, session_.opt_.n_threads, steps);
        decode(steps);
    }
    void finish() override {
        std::vector<CacheAwareEncoderStream::Step> steps;
        encoder_.finish(session_.exec_, session_.opt_.n_threads, steps);
        decode(steps);
    }
    std::vector<StreamStep> take_steps() override { return std::move(ready_); }
    const std::vector<int32_t> & tokens() const override { return transcript_.tokens; }
    std::string text() const override {
        const SubwordRules & rules = head_ == Head::Transducer ? model_.rules_ : model_.ctc_rules_;
        return strip_space_before_punctuation(model_.tokenizer().decode(transcript_.tokens), rules);
    }

private:
    void decode(const std::vector<CacheAwareEncoderStream::Step> & steps) {
        const int64_t audio_ms = encoder_.samples_pushed() * 1000 / model_.info().sample_rate;
        const int     hop_ms   = model_.encoder_.frame_ms() / 8;
        for (const CacheAwareEncoderStream::Step & s : steps) {
            const size_t before = transcript_.tokens.size();
            if (head_ == Head::Transducer) {
                session_.decode_transducer_frames(s.head_out.data(), s.first_frame, s.first_frame + s.frames, at_,
                                                  options_, boost_.get(), transcript_, timed_);
            } else {
                const size_t from = timed_.size();
                ctc_->feed(s.head_out.data(), s.frames, timed_);
                for (size_t i = from; i < timed_.size(); ++i) {
                    transcript_.tokens.push_back(timed_[i].id);
                }
            }
            StreamStep out;
            out.index        = s.index;
            out.audio_end_ms = std::min(audio_ms, int64_t(s.mel_end) * hop_ms);
            out.tokens.assign(transcript_.tokens.begin() + long(before), transcript_.tokens.end());
            // Until the text starts, all of it is new: the whole decode, its leading space trimmed as text()'s.
            out.text      = text_started_ ? delta_text(before) : model_.tokenizer().decode(transcript_.tokens);
            text_started_ = text_started_ || !out.text.empty();
            ready_.push_back(std::move(out));
        }
    }

    // The text the tokens from FIRST (> 0) on add, as they join onto the ones before (word-initial spaces
    // kept): the pieces after the previous token, decoded with it, past its own text.
    std::string delta_text(size_t first) const {
        const Tokenizer & tok = model_.tokenizer();
        const std::vector<int32_t> & all = transcript_.tokens;
        if (first == all.size()) {
            return "";
        }
        const std::vector<int32_t> with_previous(all.begin() + long(first) - 1, all.end());
        const std::string previous = tok.decode_bytes({all[first - 1]}), joined = tok.decode_bytes(with_previous);
        return joined.compare(0, previous.size(), previous) == 0 ? joined.substr(previous.size()) : joined;
    }

    ParakeetSession &       session_;
    const ParakeetModel &   model_;
    RunOptions              options_;
    Head                    head_;
    CacheAwareEncoderStream encoder_;
    std::unique_ptr<PhraseBoostingTree> tree_;
    std::unique_ptr<PhraseBoost>        boost_;
    std::unique_ptr<CtcGreedy>          ctc_;
    ParakeetSession::TransducerProgress at_;
    Transcript                          transcript_;
    std::vector<TimedToken>             timed_;
    std::vector<StreamStep>             ready_;
    bool                                text_started_ = false;
};

std::unique_ptr<NativeStream> ParakeetSession::open_stream(const RunOptions & options) {
    return std::make_unique<ParakeetStream>(*this, options);
}

int argmax(const float * v, int n) { return int(std::max_element(v, v + n) - v); }

Transcript ParakeetSession::run(const float * pcm, size_t n_samples, const RunOptions & options) {
    timings_ = Timings {};
    check_audio_length(n_samples, model_.info());
    check_abort("start");
    check_cancelled(options, "start");
    const Head head = model_.head_for(options.decoder_type);
    progress(options, 0.0f);

    const int T = model_.encoder_.frames(n_samples);
    const AttentionContext context = model_.attention_context(options);
    encode_transducer_.set_attention_context(context);
    encode_ctc_.set_attention_context(context);
    const std::vector<float> head_out =
        (head == Head::Transducer ? encode_transducer_ : encode_ctc_)(exec_, pcm, n_samples, opt_.n_threads, timings_);
    check_abort("encoder");
    check_cancelled(options, "encoder");
    progress(options, 0.6f);

    StageTimer decode_timer;
    Transcript out;
    std::vector<TimedToken> timed;
    std::unique_ptr<PhraseBoostingTree> tree;
    std::unique_ptr<PhraseBoost> boost;
    if (!options.hotwords.empty()) {
        tree  = std::make_unique<PhraseBoostingTree>(PhraseBoostingTree::from_text(options.hotwords, model_.tokenizer(), model_.vocab_));
        boost = std::make_unique<PhraseBoost>(*tree, options.hotword_weight);
    }
    if (head == Head::Transducer) {
        decode_transducer(head_out, T, options, boost.get(), out, timed);
    } else {
        decode_ctc(head_out, T, options, boost.get(), out, timed);
    }
    timings_.decode_ms = decode_timer.ms();

    // Text and times by NeMo's rules; offsets in encoder frames.
    out.timed = true;
    const Tokenizer & tok = model_.tokenizer();
    const SubwordRules & rules = head == Head::Transducer ? model_.rules_ : model_.ctc_rules_;
    out.text = strip_space_before_punctuation(tok.decode(out.tokens), rules);
    if (head == Head::Ctc) {
        refine_ctc_punctuation_times(timed, tok, rules);
    } else if (!model_.durations_.empty()) { // TDT's rule; NeMo refines no RNNT time
        refine_punctuation_times(timed, tok, rules);
    }
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

// Greedy transducer decoding, NeMo's label-looping loop: at frame t the joint gives a token (TDT: and a
// duration); a token is emitted (the prediction net steps on it) and t advances by its duration (RNNT:
// 0, stay on the frame; at most max_symbols tokens there); a blank only advances, by at least one frame.
// A token's offsets: TDT its frame, frame + duration; RNNT (NeMo's _compute_offsets over the per-frame
// alignments, each frame one step) its frame, frame + 1.
void ParakeetSession::decode_transducer(const std::vector<float> & enc_proj, int T, const RunOptions & options,
                                        PhraseBoost * boost, Transcript & out, std::vector<TimedToken> & timed) {
    const TransducerHParams & hp = model_.transducer_->hparams();
    const int J = hp.joint_hidden;
    TransducerState & state = *state_;
    dump_f32("joint_enc_proj", enc_proj, {T, J});
    state.start();
    dump_f32("pred_out_sos", state.pred_out(), {hp.pred_hidden});
    dump_f32("pred_state_sos_h", state.h(), {hp.pred_layers, hp.pred_hidden});
    dump_f32("pred_state_sos_c", state.c(), {hp.pred_layers, hp.pred_hidden});
    dump_f32("joint_pred_proj_sos", state.pred_proj(), {J});
    TransducerProgress at;
    decode_transducer_frames(enc_proj.data(), 0, T, at, options, boost, out, timed);
}

void ParakeetSession::decode_transducer_frames(const float * enc_proj, int first_row, int T, TransducerProgress & at,
                                               const RunOptions & options, PhraseBoost * boost, Transcript & out,
                                               std::vector<TimedToken> & timed) {
    const TransducerHParams & hp = model_.transducer_->hparams();
    const int J = hp.joint_hidden, V1 = hp.vocab + 1;
    TransducerState & state = *state_;
    const bool tdt = hp.extra > 0; // else RNNT: no durations
    int & t = at.t, & on_frame = at.on_frame;
    while (t < T) {
        const std::vector<float> & logits = state.joint(&enc_proj[size_t(t - first_row) * size_t(J)]);
        if (options.step_logits) {
            options.step_logits->push_back(logits);
        }
        if (t == 0 && out.tokens.empty() && on_frame == 0) {
            dump_f32("joint_logits_t0", logits, {int64_t(logits.size())});
        }
        int token          = argmax(logits.data(), V1);
        const int duration = tdt ? model_.durations_[size_t(argmax(logits.data() + V1, hp.extra))] : 0;
        if (token == hp.blank()) {
            t += std::max(duration, 1);
            on_frame = 0;
            continue;
        }
        if (boost) { // the joint said a token; the hotwords may say which (NeMo's label-looping fusion)
            token = boost->pick(logits.data());
            boost->emit(token);
        }
        out.tokens.push_back(token);
        if (options.on_token) {
            options.on_token(token);
        }
        out.token_frames.push_back(t);
        if (tdt) {
            out.token_durations.push_back(duration);
        }
        timed.push_back({token, t, t + (tdt ? duration : 1)});
        state.predict(token);
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
}

// Greedy CTC (decoding/ctc_greedy); the log-probabilities are made only for dumps and step_logits.
void ParakeetSession::decode_ctc(const std::vector<float> & logits, int T, const RunOptions & options, PhraseBoost * boost,
                                 Transcript & out, std::vector<TimedToken> & timed) {
    const int V1 = model_.vocab_ + 1, blank = model_.vocab_;
    std::vector<float> log_probs;
    if (options.step_logits || dump_enabled()) {
        log_probs.resize(size_t(T) * size_t(V1));
        for (int t = 0; t < T; ++t) {
            const float * row = &logits[size_t(t) * size_t(V1)];
            const double top = *std::max_element(row, row + V1);
            double sum = 0;
            for (int v = 0; v < V1; ++v) {
                sum += std::exp(double(row[v]) - top);
            }
            const double log_sum = top + std::log(sum);
            for (int v = 0; v < V1; ++v) {
                log_probs[size_t(t) * size_t(V1) + size_t(v)] = float(double(row[v]) - log_sum);
            }
            if (options.step_logits) {
                options.step_logits->emplace_back(log_probs.begin() + long(t) * V1, log_probs.begin() + long(t + 1) * V1);
            }
        }
        dump_f32("log_probs", log_probs, {T, V1});
    }
    timed = ctc_greedy(logits.data(), T, V1, blank, boost);
    for (const TimedToken & t : timed) {
        out.tokens.push_back(t.id);
        out.token_frames.push_back(int32_t(t.end)); // its first frame
        if (options.on_token) {
            options.on_token(t.id);
        }
    }
    timings_.n_decode_tokens += int(timed.size());
    check_abort("decode");
    check_cancelled(options, "decode");
}

} // namespace

std::unique_ptr<Model> load_parakeet_transducer(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<ParakeetModel>(std::move(file), device, Head::Transducer);
}

std::unique_ptr<Model> load_parakeet_ctc(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<ParakeetModel>(std::move(file), device, Head::Ctc);
}

} // namespace transcribe
