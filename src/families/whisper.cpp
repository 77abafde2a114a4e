#include "whisper.h"

#include "core/npy.h"
#include "decoding/beam_search.h"
#include "decoding/whisper_long_form.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <strings.h>

namespace transcribe {

namespace {

constexpr int kSequences = 8;                      // decoder sequences a session keeps (beam search's)
constexpr int kMaxAudioMs = 4 * 3600 * 1000;       // transcribe() takes a whole recording; this bounds its mel

} // namespace

WhisperModel::WhisperModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
    : file_(std::move(file)),
      device_(device),
      enc_hp_(ConvTransformerEncoderHParams::from_file(*file_, "whisper")),
      encoder_(*file_, enc_hp_),
      dec_hp_(TransformerDecoderHParams::from_file(*file_, "whisper", enc_hp_.blocks.hidden)),
      decoder_(*file_, dec_hp_) {
    const ModelFile & f = *file_;
    const std::string a = "whisper.";
    tokenizer_ = Tokenizer::from_file(f);
    auto id = [&](const char * key) {
        const uint32_t v = f.get_u32(a + "token." + key);
        if (v >= uint32_t(dec_hp_.vocab_rows) || int(v) >= tokenizer_->n_vocab()) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: token %s (%u) outside the vocabulary", f.path().c_str(), key, v);
        }
        return int32_t(v);
    };
    vocab_.eot             = id("eot");
    vocab_.sot             = id("sot");
    vocab_.sot_prev        = id("sot_prev");
    vocab_.sot_lm          = id("sot_lm");
    vocab_.no_speech       = id("no_speech");
    vocab_.no_timestamps   = id("no_timestamps");
    vocab_.timestamp_begin = id("timestamp_begin");
    vocab_.translate       = id("translate");
    vocab_.transcribe      = id("transcribe");
    vocab_.n_vocab         = dec_hp_.vocab_rows;
    vocab_.language_tokens   = f.get_i32_array(a + "language_tokens");
    vocab_.non_speech_tokens = f.get_i32_array(a + "non_speech_tokens");
    vocab_.blank_tokens      = tokenizer_->encode(" ");
    info_.languages          = f.get_str_array(a + "languages");
    multilingual_            = f.get_bool(a + "multilingual", true);
    if (info_.languages.size() != vocab_.language_tokens.size() || (multilingual_ && info_.languages.empty())) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: languages and their tokens do not match", f.path().c_str());
    }
    for (int32_t t : vocab_.non_speech_tokens) {
        if (t < 0 || t >= vocab_.n_vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: a non-speech token (%d) outside the vocabulary", f.path().c_str(), t);
        }
    }
    if (!multilingual_) {
        info_.languages = {"en"}; // an English-only model has language tokens but never reads them
    }
    const std::vector<int32_t> heads = f.get_i32_array(a + "alignment_heads");
    for (size_t i = 0; i + 1 < heads.size(); i += 2) {
        if (heads[i] < 0 || heads[i] >= dec_hp_.n_layers || heads[i + 1] < 0 || heads[i + 1] >= dec_hp_.n_heads) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: alignment head (%d, %d) outside the decoder", f.path().c_str(),
                 heads[i], heads[i + 1]);
        }
        alignment_heads_.emplace_back(heads[i], heads[i + 1]);
    }
    info_.architecture    = "whisper";
    info_.name            = f.get_str("general.name", "whisper");
    info_.max_audio_ms    = kMaxAudioMs;
    info_.language_prompt = multilingual_;
    info_.translation     = multilingual_;
    info_.beam_search     = true;
    info_.timestamp_prompt = !alignment_heads_.empty(); // word times when asked (word_timestamps=True)
    info_.text_prompt     = true;
    info_.language_detection = multilingual_;
    info_.token_budget    = true;
    file_->load_weights(device_);
    MelConfig mc = mel_config_from_file(f);
    if (mc.variant != MelConfig::Variant::Whisper || mc.n_mels != enc_hp_.n_mels) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: the mel is not Whisper's for %d bins", f.path().c_str(), enc_hp_.n_mels);
    }
    mel_ = std::make_unique<MelFrontend>(std::move(mc));
    info_.sample_rate = mel_->config().sample_rate;
}

std::unique_ptr<Session> WhisperModel::new_session(const SessionOptions & options) {
    return std::make_unique<WhisperSession>(*this, options);
}

int32_t WhisperModel::language_token(const std::string & code) const {
    for (size_t i = 0; i < vocab_.language_tokens.size(); ++i) {
        if (strcasecmp(info_.languages[i].c_str(), code.c_str()) == 0) {
            return vocab_.language_tokens[i];
        }
    }
    std::string known;
    for (const std::string & l : info_.languages) {
        known += (known.empty() ? "" : ", ") + l;
    }
    fail(TRANSCRIBE_ERR_INVALID_ARG, "language '%s': model %s knows %s", code.c_str(), info_.name.c_str(), known.c_str());
}

const std::string & WhisperModel::language_code(int32_t token) const {
    const auto it = std::find(vocab_.language_tokens.begin(), vocab_.language_tokens.end(), token);
    if (it == vocab_.language_tokens.end()) {
        fail(TRANSCRIBE_ERR_INTERNAL, "token %d is not a language token", token);
    }
    return info_.languages[size_t(it - vocab_.language_tokens.begin())];
}

// whisper's Tokenizer.sot_sequence (+ <|notimestamps|>): a multilingual model's names its language and
// task; an English-only model's is the start token alone.
std::vector<int32_t> WhisperModel::sot_sequence(int32_t language_token, bool translate, bool timestamps) const {
    std::vector<int32_t> s {vocab_.sot};
    if (multilingual_) {
        s.push_back(language_token);
        s.push_back(translate ? vocab_.translate : vocab_.transcribe);
    }
    if (!timestamps) {
        s.push_back(vocab_.no_timestamps);
    }
    return s;
}

WhisperSession::WhisperSession(const WhisperModel & model, const SessionOptions & options)
    : SessionBase(model.device_, options),
      model_(model),
      // Both caches of the session's type, as whisper.cpp keeps them (F16 by default).
      decoder_(model.decoder_, exec_, options.kv_type, model.dec_hp_.n_positions, kSequences, model.enc_hp_.n_ctx,
               options.kv_type) {}

const std::vector<float> & WhisperSession::encode(const std::vector<float> & mel) {
    const int n_mels = model_.enc_hp_.n_mels, n_frames = model_.window_frames();
    if (mel.size() != size_t(n_mels) * size_t(n_frames)) {
        fail(TRANSCRIBE_ERR_INTERNAL, "a Whisper window of %zu mel values, not %d x %d", mel.size(), n_mels, n_frames);
    }
    Graph & g = encoder_graphs_.get(0, [&] {
        auto graph = std::make_unique<Graph>(4096, "encoder");
        ConvTransformerEncoder::Taps taps;
        ggml_tensor * out = model_.encoder_.build(graph->ctx(), graph->input("mel", GGML_TYPE_F32, n_frames, n_mels), &taps);
        if (dump_enabled()) {
            graph->output(taps.conv, "enc_conv");
            graph->output(taps.layer0, "enc_layer_0");
        }
        graph->output(out, "enc_out");
        return graph;
    });
    exec_.compute(g, [&] { tensor_set(g.get("mel"), mel); });
    tensor_get_f32(g.get("enc_out"), encoded_);
    if (dump_enabled()) {
        const int64_t T = model_.enc_hp_.n_ctx, H = model_.enc_hp_.blocks.hidden;
        dump_f32("enc_conv", tensor_get_f32(g.get("enc_conv")), {T, H});
        dump_f32("enc_layer_0", tensor_get_f32(g.get("enc_layer_0")), {T, H});
        dump_f32("enc_out", encoded_, {T, H});
    }
    return encoded_;
}

int32_t WhisperSession::detect_language(std::vector<float> * probs) {
    // One decoder pass over [sot]: its logits, the non-language ones masked.
    TransformerDecoderState::PromptOutputs outs;
    decoder_.prefill(0, encoded_.data(), model_.enc_hp_.n_ctx, {model_.vocab_.sot}, 0, &outs);
    return whisper_detect_language(outs.logits, model_.vocab_, probs);
}

std::vector<WhisperWordTiming> WhisperSession::align_words(const std::vector<int32_t> & text_tokens, int num_frames,
                                                          const std::string & language, bool translate) {
    if (text_tokens.empty()) {
        return {};
    }
    const WhisperVocab & v = model_.vocab_;
    const int32_t lang = model_.multilingual_ ? model_.language_token(language) : -1;
    std::vector<int32_t> tokens = model_.sot_sequence(lang, translate, true);
    const int sot_length = int(tokens.size());
    tokens.push_back(v.no_timestamps);
    tokens.insert(tokens.end(), text_tokens.begin(), text_tokens.end());
    tokens.push_back(v.eot);
    const TransformerDecoderState::CrossAttention x = decoder_.cross_attention(0, tokens);
    // Each alignment head's scores (q / d^0.25) . (k / d^0.25), as whisper's qkv_attention makes them.
    const int H = model_.dec_hp_.hidden, hd = H / model_.dec_hp_.n_heads, T = int(tokens.size());
    const float scale = std::pow(float(hd), -0.25f);
    WhisperAlignmentInput in;
    in.n_frames = x.n_enc;
    in.n_vocab  = model_.dec_hp_.vocab_rows;
    in.logits   = std::move(x.logits);
    std::vector<float> q(static_cast<size_t>(hd)), k(static_cast<size_t>(x.n_enc) * static_cast<size_t>(hd));
    for (const auto & [layer, head] : model_.alignment_heads_) {
        const std::vector<float> & Q = x.queries[size_t(layer)], & K = x.keys[size_t(layer)];
        for (int f = 0; f < x.n_enc; ++f) {
            for (int d = 0; d < hd; ++d) {
                k[size_t(f) * size_t(hd) + size_t(d)] = K[size_t(f) * size_t(H) + size_t(head * hd + d)] * scale;
            }
        }
        std::vector<float> scores(size_t(T) * size_t(x.n_enc));
        for (int t = 0; t < T; ++t) {
            for (int d = 0; d < hd; ++d) {
                q[size_t(d)] = Q[size_t(t) * size_t(H) + size_t(head * hd + d)] * scale;
            }
            for (int f = 0; f < x.n_enc; ++f) {
                float dot = 0.0f;
                for (int d = 0; d < hd; ++d) {
                    dot += q[size_t(d)] * k[size_t(f) * size_t(hd) + size_t(d)];
                }
                scores[size_t(t) * size_t(x.n_enc) + size_t(f)] = dot;
            }
        }
        in.head_scores.push_back(std::move(scores));
    }
    return whisper_find_alignment(in, text_tokens, sot_length, num_frames, model_.tokenizer(), v, language);
}

WhisperDecodeOutcome WhisperSession::decode(const std::vector<float> & mel, const WhisperDecodeRequest & req) {
    const WhisperVocab & v = model_.vocab_;
    const int n_audio = model_.enc_hp_.n_ctx;
    StageTimer enc_timer;
    encode(mel);
    timings_.encode_ms += enc_timer.ms();
    check_abort("encoder");

    WhisperDecodeOutcome out;
    TransformerDecoderState::PromptOutputs outs;
    int32_t language = model_.multilingual_ ? v.language_tokens.front() : -1;
    if (!req.language.empty()) {
        language = model_.multilingual_ ? model_.language_token(req.language) : language;
        out.language = model_.multilingual_ ? model_.language_code(language) : "en";
    } else if (model_.multilingual_) {
        language     = detect_language(&out.language_probs);
        out.language = model_.language_code(language);
    } else {
        out.language = "en";
    }
    if (req.prompt.size()) { // [<|startofprev|>] + the prompt's last n_text_ctx / 2 - 1 tokens
        const size_t keep = std::min(req.prompt.size(), size_t(model_.dec_hp_.n_positions / 2 - 1));
        out.initial_tokens.push_back(v.sot_prev);
        out.initial_tokens.insert(out.initial_tokens.end(), req.prompt.end() - long(keep), req.prompt.end());
    }
    const int sot_index = int(out.initial_tokens.size());
    const std::vector<int32_t> sot = model_.sot_sequence(language, req.translate, req.options.timestamps);
    out.initial_tokens.insert(out.initial_tokens.end(), sot.begin(), sot.end());

    StageTimer prefill_timer;
    decoder_.prefill(0, encoded_.data(), n_audio, out.initial_tokens, 0, &outs, sot_index);
    timings_.prefill_ms += prefill_timer.ms();
    timings_.n_prefill_tokens += int(out.initial_tokens.size());
    out.no_speech_prob = softmax_at(outs.row_logits.data(), int(outs.row_logits.size()), v.no_speech);

    StageTimer decode_timer;
    std::vector<int> seqs(kSequences);
    for (int i = 0; i < kSequences; ++i) {
        seqs[size_t(i)] = i;
    }
    out.result = whisper_decode(decoder_, seqs, std::move(outs.logits), out.initial_tokens, v, req.options,
                                [&] { check_abort("decode"); }, req.on_token, req.raw_step_logits);
    timings_.decode_ms += decode_timer.ms();
    timings_.n_decode_steps += out.result.n_steps;
    timings_.n_decode_tokens += int(out.result.tokens.size());
    out.text = strip_whitespace(model_.tokenizer().decode(out.result.tokens));
    return out;
}

Transcript WhisperSession::run(const float * pcm, size_t n_samples, const RunOptions & o) {
    check_audio_length(n_samples, model_.info());
    timings_ = {};
    StageTimer mel_timer;
    const MelFeatures mel = model_.mel().compute(pcm, n_samples, opt_.n_threads);
    timings_.mel_ms = mel_timer.ms();
    const int n_mels = mel.n_mels, window = model_.window_frames();
    // Frames [seek, seek + size) of the recording's mel, zeroed past them up to a window.
    std::vector<float> cut(size_t(n_mels) * size_t(window));
    auto window_at = [&](int seek, int size) {
        std::fill(cut.begin(), cut.end(), 0.0f);
        for (int m = 0; m < n_mels; ++m) {
            const float * row = mel.data.data() + size_t(m) * size_t(mel.n_frames) + size_t(seek);
            std::copy(row, row + size, cut.begin() + long(m) * window);
        }
        return cut;
    };

    WhisperDecodeRequest req;
    req.options.timestamps = !o.no_timestamps;
    req.options.beam_size  = o.beam_size;
    req.options.n_ctx      = model_.dec_hp_.n_positions;
    req.options.sample_len = std::min(model_.dec_hp_.n_positions / 2, o.max_new_tokens > 0 ? o.max_new_tokens : 1 << 30);
    req.on_token           = o.on_token;
    const bool auto_language = o.language.empty() || strcasecmp(o.language.c_str(), "auto") == 0;
    if (!auto_language) {
        req.language = model_.multilingual_ ? model_.language_code(model_.language_token(o.language)) : "en";
        if (!model_.multilingual_ && strcasecmp(o.language.c_str(), "en") != 0) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "language '%s': model %s is English-only (en)", o.language.c_str(),
                 model_.info().name.c_str());
        }
    } else if (model_.multilingual_) {
        // transcribe(): the language of the first 30 seconds of the padded mel, taken as they are.
        std::vector<float> first(size_t(n_mels) * size_t(window));
        for (int m = 0; m < n_mels; ++m) {
            const float * row = mel.data.data() + size_t(m) * size_t(mel.n_frames);
            std::copy(row, row + window, first.begin() + long(m) * window);
        }
        encode(first);
        req.language = model_.language_code(detect_language());
    } else {
        req.language = "en";
    }
    if (!o.target_language.empty() && strcasecmp(o.target_language.c_str(), req.language.c_str()) != 0) {
        if (strcasecmp(o.target_language.c_str(), "en") != 0) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "target language '%s': Whisper translates into English (en) only",
                 o.target_language.c_str());
        }
        req.translate = true;
    }

    if (o.temperatures.empty() || o.best_of < 0 || o.best_of > kSequences) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "temperatures: at least one; best_of: 0 to %d (got %d)", kSequences, o.best_of);
    }
    for (float t : o.temperatures) {
        if (!(t >= 0.0f && t <= 100.0f)) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "temperature %g: not from 0 to 100", double(t));
        }
    }
    std::mt19937_64 rng(o.seed);
    req.options.rng     = &rng;
    req.options.best_of = o.best_of;
    WhisperLongFormOptions lf;
    lf.temperatures               = o.temperatures;
    lf.condition_on_previous_text = o.condition_on_previous_text;
    lf.n_text_ctx                 = model_.dec_hp_.n_positions;
    lf.window_frames              = window;
    lf.input_stride               = window / model_.enc_hp_.n_ctx;
    lf.hop_length                 = model_.mel().config().hop_length;
    lf.sample_rate                = model_.mel().config().sample_rate;
    if (!o.prompt.empty()) {
        lf.initial_prompt_tokens = model_.tokenizer().encode(" " + strip_whitespace(o.prompt));
    }
    WhisperWindowAligner aligner;
    if (o.timestamps && !model_.alignment_heads_.empty()) { // word_timestamps=True
        aligner = [&](const std::vector<int32_t> & text_tokens, int num_frames) {
            return align_words(text_tokens, num_frames, req.language, req.translate);
        };
    }
    const WhisperLongFormResult r = whisper_long_form(
        mel.n_valid, model_.vocab_, model_.tokenizer(), lf,
        [&](int seek, int size, const std::vector<int32_t> & prompt, float temperature) {
            check_cancelled(o, "window");
            progress(o, float(seek) / float(std::max(1, mel.n_valid)));
            const std::vector<float> & w = window_at(seek, size);
            if (seek == 0) {
                dump_f32("mel", w, {n_mels, window});
            }
            req.prompt              = prompt;
            req.options.temperature = temperature;
            const WhisperDecodeOutcome d = decode(w, req);
            WhisperWindowResult wr;
            wr.tokens            = d.result.tokens;
            wr.avg_logprob       = d.result.avg_logprob;
            wr.no_speech_prob    = d.no_speech_prob;
            wr.temperature       = temperature;
            wr.compression_ratio = whisper_compression_ratio(d.text);
            return wr;
        }, aligner);

    Transcript t;
    t.language = req.language;
    t.text     = strip_whitespace(r.text);
    t.tokens.assign(r.all_tokens.begin() + long(lf.initial_prompt_tokens.size()), r.all_tokens.end());
    t.timed    = true; // segments carry the windows' times even without timestamp tokens
    for (const WhisperSegment & s : r.segments) {
        Segment seg;
        seg.t0_ms      = std::llround(s.start * 1000.0);
        seg.t1_ms      = std::llround(s.end * 1000.0);
        seg.text       = strip_whitespace(s.text);
        seg.tokens     = s.tokens;
        seg.has_decode = true;
        seg.decode     = {s.seek, s.temperature, s.no_speech_prob, s.avg_logprob, s.compression_ratio};
        for (const WhisperWordTiming & w : s.words) {
            seg.words.push_back(Word {strip_whitespace(w.word), std::llround(w.start * 1000.0), std::llround(w.end * 1000.0)});
        }
        t.words.insert(t.words.end(), seg.words.begin(), seg.words.end());
        t.segments.push_back(std::move(seg));
    }
    progress(o, 1.0f);
    return t;
}

std::unique_ptr<Model> load_whisper(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<WhisperModel>(std::move(file), device);
}

} // namespace transcribe
