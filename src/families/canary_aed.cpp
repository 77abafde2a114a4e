// NVIDIA Canary AED (NeMo EncDecMultiTaskModel: canary-1b-flash, canary-180m-flash): NeMo mel ->
// FastConformer -> a Transformer decoder attending to the encoder states, driven by the canary2 task
// prompt (source and target language, punctuation, timestamps); greedy as NeMo's
// TransformerAEDGreedyInfer decodes (its generated tokens read the position table from row 1 on) or
// NeMo's beam search; text as the aggregate tokenizer joins it, timestamps as NeMo parses them.
#include "blocks/speech_encoder.h"
#include "blocks/transformer_decoder.h"
#include "decoding/aed_timestamps.h"
#include "core/npy.h"
#include "decoding/continuous_batching.h"

#include <algorithm>
#include <cmath>
#include <strings.h>

namespace transcribe {

namespace {

constexpr int kMaxBeam = 8; // sequences a session keeps for beam search (untouched ones cost no memory)

struct PromptTokens {
    int32_t bos = 0, eos = 0, pad = 0, startofcontext = 0, emo_undefined = 0, pnc = 0, nopnc = 0, itn = 0, noitn = 0,
            timestamp = 0, notimestamp = 0, diarize = 0, nodiarize = 0;
};

class CanaryAedModel;

class CanaryAedSession final : public ContinuousBatchingSession {
public:
    CanaryAedSession(const CanaryAedModel & model, const SessionOptions & opt);

private:
    void start(DecodeJob & a) override;
    void finish(DecodeJob & a) override;
    BeamSetup beam_setup(const DecodeJob & a) const override;

    const CanaryAedModel &  model_;
    SpeechEncoder::Run      encode_;
    TransformerDecoderState decoder_;
};

class CanaryAedModel final : public Model {
public:
    CanaryAedModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
        : file_(std::move(file)),
          device_(device),
          encoder_(*file_),
          dec_hp_(TransformerDecoderHParams::from_file(*file_, "canary_aed", encoder_.hparams().d_model)),
          dec_(*file_, dec_hp_) {
        const ModelFile & f = *file_;
        const std::string a = "canary_aed.";
        if (f.get_str(a + "prompt_format") != "canary2") {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: prompt format %s (canary2 only)", f.path().c_str(),
                 f.get_str(a + "prompt_format").c_str());
        }
        auto id = [&](const char * key) {
            const uint32_t v = f.get_u32(a + "token." + key);
            if (v >= uint32_t(dec_hp_.vocab_rows)) {
                fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: token %s (%u) outside the vocabulary", f.path().c_str(), key, v);
            }
            return int32_t(v);
        };
        t_ = {id("bos"),   id("eos"),   id("pad"),       id("startofcontext"), id("emo_undefined"), id("pnc"), id("nopnc"),
              id("itn"),   id("noitn"), id("timestamp"), id("notimestamp"),    id("diarize"),       id("nodiarize")};
        info_.languages  = f.get_str_array(a + "languages");
        language_tokens_ = f.get_i32_array(a + "language_tokens");
        if (info_.languages.empty() || language_tokens_.size() != info_.languages.size()) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: languages and their tokens do not match", f.path().c_str());
        }
        prompt_as_text_ = f.get_str(a + "prompt_encoding", "ids") == "text";
        greedy_delta_ = f.get_i32(a + "greedy_max_generation_delta", -1);
        beam_delta_   = f.get_i32(a + "beam_max_generation_delta", -1);
        length_penalty_ = f.has_key(a + "beam_length_penalty") ? f.get_f32(a + "beam_length_penalty") : 0.0f;
        tokenizer_ = Tokenizer::from_file(f);
        if (tokenizer_->n_vocab() > dec_hp_.vocab_rows) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: tokenizer has %d tokens, the decoder %d rows", f.path().c_str(),
                 tokenizer_->n_vocab(), dec_hp_.vocab_rows);
        }
        info_.architecture    = "canary_aed";
        info_.name            = f.get_str("general.name", "canary-aed");
        info_.max_audio_ms    = int(f.get_u32(a + "max_audio_ms", 40000));
        info_.language_prompt = true;
        info_.translation     = info_.languages.size() > 1;
        info_.beam_search     = true;
        info_.timestamp_prompt = true;
        info_.token_budget    = true;
        file_->load_weights(device_);
        encoder_.prepare(*file_, device_);
        info_.sample_rate = encoder_.sample_rate();
    }

    std::unique_ptr<Session> new_session(const SessionOptions & options) override {
        return std::make_unique<CanaryAedSession>(*this, options);
    }

    // The index of LANG among the model's languages (INVALID_ARG naming them where it is not one).
    size_t language_index(const std::string & lang, const char * what) const {
        for (size_t i = 0; i < info_.languages.size(); ++i) {
            if (strcasecmp(info_.languages[i].c_str(), lang.c_str()) == 0) {
                return i;
            }
        }
        std::string known;
        for (const std::string & l : info_.languages) {
            known += (known.empty() ? "" : ", ") + l;
        }
        fail(TRANSCRIBE_ERR_INVALID_ARG, "%s language '%s': model %s knows %s", what, lang.c_str(), info_.name.c_str(),
             known.c_str());
    }

    // NeMo's canary2 prompt (Canary2PromptFormatter, an empty decoder context): the special tokens'
    // ids (the aggregate tokenizer's special prompt), or, with one SentencePiece model, the prompt's text
    // as that model encodes it.
    std::vector<int32_t> prompt(const RunOptions & o) const {
        const std::string source = o.language.empty() ? info_.languages[0] : o.language;
        const std::string target = o.target_language.empty() ? source : o.target_language;
        const size_t src = language_index(source, "source"), tgt = language_index(target, "target");
        if (prompt_as_text_) {
            return tokenizer_->encode("<|startofcontext|><|startoftranscript|><|emo:undefined|><|" + info_.languages[src] +
                                      "|><|" + info_.languages[tgt] + (o.punctuation ? "|><|pnc|>" : "|><|nopnc|>") +
                                      "<|noitn|>" + (o.timestamps ? "<|timestamp|>" : "<|notimestamp|>") + "<|nodiarize|>");
        }
        return {t_.startofcontext, t_.bos, t_.emo_undefined, language_tokens_[src], language_tokens_[tgt],
                o.punctuation ? t_.pnc : t_.nopnc, t_.noitn, o.timestamps ? t_.timestamp : t_.notimestamp, t_.nodiarize};
    }

    // Tokens a run may generate after a prompt of P: up to the decoder's max_sequence_length, or the
    // encoder's output length (NeMo's src_len: every output frame, the masked one included) +
    // max_generation_delta where that is smaller (GreedySequenceGenerator._prepare_for_search).
    int generation_cap(int P, int n_frames, bool beam) const {
        const int delta = beam ? beam_delta_ : greedy_delta_;
        const int max_len = delta >= 0 ? std::min(dec_hp_.n_positions, n_frames + delta) : dec_hp_.n_positions;
        return max_len - P;
    }

    std::unique_ptr<ModelFile> file_;
    ggml_backend_dev_t         device_;
    SpeechEncoder              encoder_;
    TransformerDecoderHParams  dec_hp_;
    TransformerDecoder         dec_;
    PromptTokens               t_;
    std::vector<int32_t>       language_tokens_;
    bool                       prompt_as_text_ = false;
    int                        greedy_delta_ = -1, beam_delta_ = -1;
    float                      length_penalty_ = 0.0f;
};

int session_sequences(const SessionOptions & opt) { return std::max(opt.n_batch > 0 ? opt.n_batch : kMaxBeam, kMaxBeam); }

CanaryAedSession::CanaryAedSession(const CanaryAedModel & model, const SessionOptions & opt)
    : ContinuousBatchingSession(model.device_, opt, decoder_, model.t_.eos),
      model_(model),
      encode_(model.encoder_, [](ggml_context *, ggml_tensor * enc) { return enc; }),
      decoder_(model.dec_, exec_, opt.kv_type, model.dec_hp_.n_positions, session_sequences(opt),
               model.encoder_.frames(size_t(double(model.info().max_audio_ms) * model.info().sample_rate / 1000.0) + 1)) {}

void CanaryAedSession::start(DecodeJob & a) {
    const RunOptions & o = a.job.options;
    check_audio_length(a.job.n_samples, model_.info());
    const std::vector<int32_t> prompt = model_.prompt(o);
    const int n_audio = model_.encoder_.frames(a.job.n_samples);
    const bool beam = o.beam_size > 0;
    const int cap = model_.generation_cap(int(prompt.size()), model_.encoder_.output_frames(a.job.n_samples), beam);
    if (cap < 1) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "a prompt of %zu tokens leaves no room in the decoder's %d positions",
             prompt.size(), model_.dec_hp_.n_positions);
    }
    a.max_new = std::min(o.max_new_tokens > 0 ? o.max_new_tokens : 256, cap);
    check_abort("start");
    check_cancelled(o, "start");
    report(o, 0.0f);

    Timings enc;
    const std::vector<float> states = encode_(exec_, a.job.pcm, a.job.n_samples, opt_.n_threads, enc);
    timings_.mel_ms += enc.mel_ms;
    timings_.encode_ms += enc.encode_ms;
    check_abort("encoder");
    check_cancelled(o, "encoder");
    report(o, 0.35f);

    StageTimer prefill_timer;
    const bool want = dump_enabled() || o.step_logits || beam;
    TransformerDecoderState::PromptOutputs outs;
    // NeMo's greedy decoder feeds generated token s at position-table row s (the prompt took rows
    // 0..P-1); its beam search at the token's own position.
    const int shift = beam ? 0 : int(prompt.size()) - 1;
    a.tok = decoder_.prefill(a.seq, states.data(), n_audio, prompt, shift, want ? &outs : nullptr);
    a.keep_logits = dump_enabled() && !beam;
    a.logits = std::move(outs.logits);
    timings_.prefill_ms += prefill_timer.ms();
    timings_.n_prefill_tokens += int(prompt.size());
    const int64_t P = int64_t(prompt.size()), H = model_.dec_hp_.hidden;
    if (!outs.enc_proj.empty()) {
        dump_f32("enc_dec_proj", outs.enc_proj, {n_audio, H});
    }
    dump_f32("dec_embed_prompt", outs.embedded, {P, H});
    dump_f32("dec_layer_0_prompt", outs.first_layer, {P, H});
    dump_f32("dec_final_prompt", outs.final_norm, {P, H});
    report(o, 0.5f);
}

ContinuousBatchingSession::BeamSetup CanaryAedSession::beam_setup(const DecodeJob & a) const {
    BeamSetup s;
    s.beam_size      = a.job.options.beam_size;
    s.eos            = model_.t_.eos;
    s.pad            = model_.t_.pad;
    s.length_penalty = model_.length_penalty_;
    s.prompt_length  = decoder_.n_past(a.seq); // start() prefilled the prompt: its length, not encoded again
    return s;
}

void CanaryAedSession::finish(DecodeJob & a) {
    if (!a.kept_logits.empty()) {
        // NeMo's trace: one row a generated token, the end-of-text included (a budget's last check is not).
        const size_t n = std::min(a.kept_logits.size(), a.out.tokens.size() + (a.out.truncated ? 0 : 1));
        std::vector<float> rows;
        for (size_t i = 0; i < n; ++i) {
            rows.insert(rows.end(), a.kept_logits[i].begin(), a.kept_logits[i].end());
        }
        dump_f32("greedy_step_logits", rows, {int64_t(n), int64_t(n ? a.kept_logits[0].size() : 0)});
    }
    // NeMo's hypothesis ends before its trailing <|endoftext|> / <pad> tokens.
    std::vector<int32_t> & ids = a.out.tokens;
    while (!ids.empty() && (ids.back() == model_.t_.eos || ids.back() == model_.t_.pad)) {
        ids.pop_back();
    }
    const double audio_ms = 1000.0 * double(a.job.n_samples) / model_.info().sample_rate;
    a.out.text = model_.tokenizer().decode(ids);
    if (!a.job.options.timestamps) {
        a.out.segments.push_back(Segment {0, int64_t(std::llround(audio_ms)), a.out.text, ids, {}, a.out.truncated});
        return;
    }
    const AedTimestamps ts = parse_aed_timestamps(a.out.text);
    const int64_t ms = model_.encoder_.frame_ms();
    a.out.text  = ts.text;
    a.out.timed = !ts.words.empty();
    for (const TimedText & w : ts.words) {
        a.out.words.push_back({w.text, w.start * ms, w.end * ms});
    }
    for (const TimedText & s : ts.segments) {
        Segment seg;
        seg.t0_ms = s.start * ms;
        seg.t1_ms = s.end * ms;
        seg.text  = s.text;
        seg.words.assign(a.out.words.begin() + long(s.first), a.out.words.begin() + long(s.first + s.count));
        seg.truncated = a.out.truncated;
        a.out.segments.push_back(std::move(seg));
    }
    if (ts.words.empty()) {
        a.out.segments.push_back(Segment {0, int64_t(std::llround(audio_ms)), a.out.text, ids, {}, a.out.truncated});
    } else {
        a.out.segments.front().tokens = ids;
    }
}

} // namespace

std::unique_ptr<Model> load_canary_aed(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<CanaryAedModel>(std::move(file), device);
}

} // namespace transcribe
