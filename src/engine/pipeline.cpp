#include "engine/pipeline.h"

#include "core/audio.h"
#include "core/error.h"
#include "core/language_names.h"
#include "core/tokenizer.h"
#include "engine/piece_feeder.h"
#include "engine/speaker_attribution.h"
#include "engine/speaker_turns.h"
#include "engine/speech_segments.h"
#include "engine/transcript_alignment.h"

#include <chrono>
#include <cmath>
#include <strings.h>

namespace transcribe {

RecordingPipeline::RecordingPipeline(Model & model, const SessionOptions & options)
    : model_(model), options_(options), session_(model.new_session(options)) {}

// Samples in one run of the model: the caller's chunk, else the model's own limit.
size_t RecordingPipeline::window_samples(const RecordingRequest & req) const {
    const ModelInfo & info = model_.info();
    const int64_t window_ms = req.chunk_ms > 0 ? req.chunk_ms : info.max_audio_ms;
    const size_t window = size_t(window_ms * info.sample_rate / 1000);
    if (window < size_t(info.sample_rate)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: chunk_ms %lld is below one second", (long long) window_ms);
    }
    return window;
}

SessionOptions RecordingPipeline::companion_options() const {
    SessionOptions o = options_;
    o.n_batch           = 1;
    o.progress_callback = nullptr;
    return o;
}

// The draft of one piece for speculative decoding: the draft model's transcript of it (run in the
// pipeline's draft session, on the session's threads), in the main model's tokens.
std::vector<int32_t> RecordingPipeline::draft_of(Model & draft, uint64_t draft_id, const float * pcm, size_t n,
                                                 const std::function<bool()> & cancelled) {
    if (!draft_ || draft_id_ != draft_id) {
        draft_.reset();
        draft_    = draft.new_session(companion_options());
        draft_id_ = draft_id;
    }
    RunOptions o;
    o.cancelled = cancelled;
    return model_.tokenizer().encode(draft_->run(pcm, n, o).text);
}

// The checks every run makes of its audio and options, and the options the session gets.
RunOptions RecordingPipeline::prepare(const float * pcm, size_t n, const RecordingRequest & req) {
    if (!pcm || n == 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: no audio samples");
    }
    audio_check_finite(pcm, n, "input audio");
    const ModelInfo & info = model_.info();
    RunOptions o = req.options;
    if (req.token_bytes) {
        const Tokenizer & tok = model_.tokenizer();
        o.on_token = [&tok, cb = req.token_bytes](int32_t id) { cb(id, tok.decode_bytes({id})); };
    }
    const std::string source = !o.language.empty() ? o.language : info.languages.empty() ? "" : info.languages[0];
    if (!o.target_language.empty() && strcasecmp(o.target_language.c_str(), source.c_str()) != 0 && !info.translation) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "target language '%s': model %s (%s) does not translate", o.target_language.c_str(),
             info.name.c_str(), info.architecture.c_str());
    }
    if ((o.decoder_type == DecoderType::Ctc && !info.ctc_head) ||
        (o.decoder_type == DecoderType::Transducer && !info.transducer_head)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "model %s (%s) has no %s head%s", info.name.c_str(), info.architecture.c_str(),
             o.decoder_type == DecoderType::Ctc ? "CTC" : "transducer",
             info.ctc_head ? " (it has a CTC head)" : info.transducer_head ? " (it has a transducer head)" : "");
    }
    if (!o.hotwords.empty() && !info.hotwords) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "hotwords: model %s (%s) does not take them (Parakeet and Qwen3-ASR models do)", info.name.c_str(),
             info.architecture.c_str());
    }
    if (!o.prompt.empty() && !info.text_prompt) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "prompt: model %s (%s) takes no text prompt (Canary-Qwen does)", info.name.c_str(),
             info.architecture.c_str());
    }
    if (!std::isfinite(o.hotword_weight) || o.hotword_weight < 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "hotword weight %g: must be a finite number >= 0", double(o.hotword_weight));
    }
    if (o.beam_size < 0 || (o.beam_size > 0 && !info.beam_search)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "beam size %d: model %s (%s) decodes greedily only", o.beam_size, info.name.c_str(),
             info.architecture.c_str());
    }
    if (strcasecmp(o.language.c_str(), "auto") == 0 && !info.language_detection) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "language 'auto': model %s (%s) does not detect the language", info.name.c_str(),
             info.architecture.c_str());
    }
    if (!o.language.empty() && strcasecmp(o.language.c_str(), "auto") != 0) {
        // A language is only accepted as one the model knows, never echoed back as if it had steered
        // anything (models with a language prompt use it).
        bool known = false;
        std::string list;
        const std::string named = language_name_of_code(o.language); // models that list names take codes too
        for (const std::string & l : info.languages) {
            known = known || strcasecmp(l.c_str(), o.language.c_str()) == 0 || l == named;
            list += (list.empty() ? "" : ", ") + l;
        }
        if (!known) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "language '%s': model %s transcribes %s only", o.language.c_str(),
                 info.name.c_str(), list.c_str());
        }
    }
    if (req.aligner) {
        check_aligner(model_, *req.aligner);
    }
    if (req.draft || !req.draft_ids.empty()) {
        if (!info.speculative) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "draft: model %s (%s) does not decode with a draft", info.name.c_str(),
                 info.architecture.c_str());
        }
        if (!req.draft_ids.empty()) {
            o.draft = [ids = req.draft_ids](const float *, size_t) { return ids; };
        } else {
            const ModelInfo & d = req.draft->info();
            if (d.sample_rate != info.sample_rate) {
                fail(TRANSCRIBE_ERR_INVALID_ARG, "draft: model %s takes %d Hz audio, model %s %d Hz", d.name.c_str(),
                     d.sample_rate, info.name.c_str(), info.sample_rate);
            }
            o.draft = [this, draft = req.draft, id = req.draft_id, cancelled = o.cancelled](const float * piece,
                                                                                          size_t n_piece) {
                return draft_of(*draft, id, piece, n_piece, cancelled);
            };
        }
    }
    return o;
}

// How a recording is cut: by the VAD's speech regions when one is asked for (VAD one thread: the
// recurrence is a chain of small ops, where a second thread's barriers cost more than it computes,
// bench/RESULTS.md; its time into VAD_MS, ABORT stops it), else at pauses into pieces of the window.
PiecePlan RecordingPipeline::plan(SpeechDetector * vad, const float * pcm, size_t n, const RecordingRequest & req,
                                  const RunOptions & o, double & vad_ms, double & diarize_ms,
                                  const std::function<bool()> & abort) {
    const ModelInfo & info = model_.info();
    const size_t window = window_samples(req);
    std::vector<SpeakerTurn> turns;
    if (per_turn(req, o)) {
        turns = speaker_turns(diarized(req, pcm, n, diarize_ms), n, info.sample_rate);
    }
    PiecePlan p;
    if (!vad) {
        if (turns.empty()) {
            return plan_pieces(pcm, n, info.sample_rate, window);
        }
        std::vector<AudioSpan> pieces;
        for (const SpeakerTurn & turn : turns) {
            const size_t b = turn.span.begin;
            for (AudioSpan s : split_at_pauses(pcm + b, turn.span.end - b, info.sample_rate, window)) {
                pieces.push_back({s.begin + b, s.end + b});
            }
        }
        p = plan_spans(pcm, std::move(pieces), info.sample_rate);
    } else {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<float> probs = vad->probabilities(pcm, n, info.sample_rate, abort);
        const size_t chunk = vad->chunk_samples(info.sample_rate);
        const std::vector<AudioSpan> regions = speech_regions(probs, chunk, n, info.sample_rate, req.speech);
        vad_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (turns.empty()) {
            return plan_speech(model_.tokenizer(), pcm, plan_speech_pieces(regions, probs, chunk, window), info.sample_rate);
        }
        std::vector<SpeechPiece> pieces; // the VAD's speech inside each turn: no piece spans two speakers
        for (const SpeakerTurn & turn : turns) {
            for (SpeechPiece & piece : plan_speech_pieces(clip_to(regions, turn.span), probs, chunk, window)) {
                pieces.push_back(std::move(piece));
            }
        }
        p = plan_speech(model_.tokenizer(), pcm, std::move(pieces), info.sample_rate);
    }
    p.join = [join = std::move(p.join), turns, rate = info.sample_rate](std::vector<Transcript> results) {
        Transcript t = join(std::move(results));
        label_speakers(t, turns, rate);
        return t;
    };
    return p;
}

// Speakers by turns (each transcribed alone) for models without word times; by words otherwise.
bool RecordingPipeline::per_turn(const RecordingRequest & req, const RunOptions & o) const {
    const ModelInfo & info = model_.info();
    return req.diarize && !req.aligner && !info.word_timestamps && !(info.timestamp_prompt && o.timestamps);
}

Transcript RecordingPipeline::run(const float * pcm, size_t n, const RecordingRequest & req) {
    const RunOptions o = prepare(pcm, n, req);
    if (req.new_vad && (!vad_ || vad_id_ != req.vad_id)) {
        vad_.reset();
        vad_    = req.new_vad();
        vad_id_ = req.vad_id;
    }
    double vad_ms = 0, diarize_ms = 0;
    const PiecePlan pieces = plan(req.new_vad ? vad_.get() : nullptr, pcm, n, req, o, vad_ms, diarize_ms, [&] {
        return (options_.abort_callback && options_.abort_callback(options_.abort_user_data)) || (o.cancelled && o.cancelled());
    });
    Transcript t = transcribe_plan(*session_, pieces, o);
    align(t, pcm, n, req, o);
    attribute(t, pcm, n, req, o, diarize_ms);
    if (req.new_vad || req.diarize) {
        Timings timings    = session_->timings();
        timings.vad_ms     = vad_ms;
        timings.diarize_ms = diarize_ms;
        session_->set_timings(timings);
    }
    return t;
}

std::vector<RecordingPipeline::Outcome> RecordingPipeline::run_many(const float * const * pcm, const size_t * n, int count,
                                                                    const RecordingRequest & req) {
    std::vector<Outcome> out(static_cast<size_t>(count));
    const size_t window = window_samples(req);
    std::vector<int>        together;
    std::vector<RunOptions> options(static_cast<size_t>(count));
    std::vector<char>       handled(static_cast<size_t>(count), 0);
    if (!req.new_vad && !req.token_bytes && !per_turn(req, req.options)) {
        for (int i = 0; i < count; ++i) {
            if (pcm[i] && n[i] > 0 && n[i] <= window) {
                handled[size_t(i)] = 1;
                try {
                    options[size_t(i)] = prepare(pcm[i], n[i], req);
                    together.push_back(i);
                } catch (...) {
                    out[size_t(i)].error = std::current_exception();
                    out[size_t(i)].ran   = true;
                }
            }
        }
    }
    bool aborted = false;
    double diarize_ms = 0; // of the recordings decoded together
    if (!together.empty()) {
        size_t given = 0;
        try {
            session_->run_batch(
                [&](BatchJob & job) {
                    if (given == together.size()) {
                        return false;
                    }
                    const int i   = together[given++];
                    job.pcm       = pcm[i];
                    job.n_samples = n[i];
                    job.options   = options[size_t(i)];
                    return true;
                },
                [&](size_t id, Transcript * t, std::exception_ptr error) {
                    const int i = together[id];
                    Outcome & o = out[size_t(i)];
                    o.ran = true;
                    if (t) {
                        try {
                            // Joined as run()'s one-piece plan joins it: an untimed segment spans the speech,
                            // not the recording's leading and trailing silence.
                            *t = plan_spans(pcm[i], {{0, n[i]}}, model_.info().sample_rate).join({std::move(*t)});
                            align(*t, pcm[i], n[i], req, options[size_t(i)]);
                            attribute(*t, pcm[i], n[i], req, options[size_t(i)], diarize_ms);
                            o.transcript = std::make_unique<Transcript>(std::move(*t));
                        } catch (...) {
                            o.error = std::current_exception();
                        }
                    } else {
                        o.error = error;
                    }
                });
            if (req.diarize) {
                Timings timings    = session_->timings();
                timings.diarize_ms = diarize_ms;
                session_->set_timings(timings);
            }
        } catch (...) {
            // The session's abort (or a failure of the batch itself): what has no result gets its error.
            aborted = true;
            for (int i : together) {
                if (!out[size_t(i)].transcript) {
                    out[size_t(i)].error = std::current_exception();
                    out[size_t(i)].ran   = true;
                }
            }
        }
    }
    for (int i = 0; i < count && !aborted; ++i) {
        if (handled[size_t(i)]) {
            continue;
        }
        Outcome & o = out[size_t(i)];
        o.ran = true;
        try {
            o.transcript = std::make_unique<Transcript>(run(pcm[i], n[i], req));
        } catch (const Error & e) {
            o.error = std::current_exception();
            aborted = e.status() == TRANSCRIBE_ERR_ABORTED; // the caller wants everything stopped
        } catch (...) {
            o.error = std::current_exception();
        }
    }
    return out;
}

Transcript RecordingPipeline::run_shared(Batcher & batcher, const float * pcm, size_t n, const RecordingRequest & req) {
    Batcher::Recording rec;
    rec.options = prepare(pcm, n, req);
    std::unique_ptr<SpeechDetector> vad = req.new_vad ? req.new_vad() : nullptr;
    double vad_ms = 0, diarize_ms = 0;
    const RunOptions o = rec.options;
    rec.plan = plan(vad.get(), pcm, n, req, o, vad_ms, diarize_ms,
                    [&] { return rec.options.cancelled && rec.options.cancelled(); });
    Transcript t = batcher.run(std::move(rec));
    if (req.aligner) { // any thread: a session of its own
        align(t, pcm, n, req, o, req.aligner->new_session(companion_options()).get());
    }
    attribute(t, pcm, n, req, o, diarize_ms);
    return t;
}

Transcript RecordingPipeline::align_text(const float * pcm, size_t n, const std::string & text, const std::string & language) {
    check_aligner(model_, model_);
    if (!pcm && n > 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "align: null audio");
    }
    Transcript t;
    t.text     = utf8_sanitize(text);
    t.language = language;
    t.segments.push_back(Segment {0, int64_t(n) * 1000 / model_.info().sample_rate, t.text, {}, {}, false});
    align_transcript(t, pcm, n, model_, *session_, nullptr);
    return t;
}

void RecordingPipeline::align(Transcript & t, const float * pcm, size_t n, const RecordingRequest & req,
                              const RunOptions & o, Session * session) {
    if (!req.aligner) {
        return;
    }
    if (!session) {
        if (!aligner_ || aligner_id_ != req.aligner_id) {
            aligner_.reset();
            aligner_    = req.aligner->new_session(companion_options());
            aligner_id_ = req.aligner_id;
        }
        session = aligner_.get();
    }
    align_transcript(t, pcm, n, *req.aligner, *session, o.cancelled);
}

void RecordingPipeline::attribute(Transcript & t, const float * pcm, size_t n, const RecordingRequest & req,
                                  const RunOptions & o, double & diarize_ms) const {
    if (req.diarize && !per_turn(req, o)) {
        attribute_speakers(t, diarized(req, pcm, n, diarize_ms));
    }
}

std::vector<SpeakerSegment> RecordingPipeline::diarized(const RecordingRequest & req, const float * pcm, size_t n,
                                                        double & diarize_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<SpeakerSegment> segments = req.diarize(pcm, n);
    diarize_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return segments;
}

} // namespace transcribe
