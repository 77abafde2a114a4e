// The C API: argument checks, C++ exceptions turned into status codes, thread-local last error.
#include "transcribe.h"

#include "core/audio.h"
#include "core/batcher.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/family.h"
#include "core/long_audio.h"
#include "core/log.h"
#include "core/speech_segments.h"
#include "families/silero_vad.h"

#include "ggml.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <new>
#include <string>
#include <thread>
#include <vector>

using namespace transcribe;

struct transcribe_model {
    std::unique_ptr<Model>    impl;
    uint64_t                  serial = 0; // unique per load: a freed model's address may come back
    std::string               backend;
    std::vector<const char *> language_ptrs;
    double                    load_ms = 0;
};

struct transcribe_vad_model {
    std::unique_ptr<SileroVad> impl;
    uint64_t                   serial = 0; // unique per load: a freed model's address may come back
};

struct transcribe_vad_session {
    std::unique_ptr<SileroVadSession> impl;
};

struct transcribe_vad_result {
    int                       chunk = 0;
    std::vector<float>        probs;
    std::vector<AudioSpan> regions;
    std::vector<float>        state;
};

struct transcribe_session {
    transcribe_model *       model;
    std::unique_ptr<Session> impl;
    SessionOptions           options;
    // Made on the first run that asks for the VAD model loaded as vad_serial.
    uint64_t                          vad_serial = 0;
    std::unique_ptr<SileroVadSession> vad;
    // Speculative decoding: a session of the draft model loaded as draft_serial, made on the first run
    // that asks for it, used only on the thread that drives this session.
    uint64_t                 draft_serial = 0;
    std::unique_ptr<Session> draft;
};

struct transcribe_result {
    Transcript transcript;
};

struct transcribe_batcher {
    transcribe_session *     session = nullptr;
    std::unique_ptr<Batcher> impl;
};

namespace {

thread_local std::string t_last_error;

transcribe_status report(transcribe_status status, const std::string & message) {
    t_last_error = message;
    log(status == TRANSCRIBE_ERR_OUTPUT_TRUNCATED ? TRANSCRIBE_LOG_WARN : TRANSCRIBE_LOG_ERROR, "%s", message.c_str());
    return status;
}

// Runs f, mapping every exception to a status; nothing escapes.
template <typename F> transcribe_status guarded(F && f) {
    try {
        t_last_error.clear();
        return f();
    } catch (const Error & e) {
        return report(e.status(), e.what());
    } catch (const std::bad_alloc &) {
        return report(TRANSCRIBE_ERR_OOM, "out of memory");
    } catch (const std::exception & e) {
        return report(TRANSCRIBE_ERR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return report(TRANSCRIBE_ERR_INTERNAL, "internal error: unknown exception");
    }
}

void route_ggml_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        std::string s(text);
        while (!s.empty() && s.back() == '\n') {
            s.pop_back();
        }
        if (!s.empty()) {
            log(level == GGML_LOG_LEVEL_ERROR ? TRANSCRIBE_LOG_ERROR : TRANSCRIBE_LOG_DEBUG, "ggml: %s", s.c_str());
        }
    }
}

void init_once() {
    static bool done = [] {
        ggml_log_set(route_ggml_log, nullptr);
        return true;
    }();
    (void) done;
}

void fill_audio(std::vector<float> && samples, int rate, transcribe_audio * out) {
    out->samples = static_cast<float *>(std::malloc(samples.size() * sizeof(float)));
    if (!out->samples) {
        throw std::bad_alloc();
    }
    std::memcpy(out->samples, samples.data(), samples.size() * sizeof(float));
    out->n_samples   = samples.size();
    out->sample_rate = rate;
}

struct RunRequest {
    RunOptions             options;
    int                    chunk_ms = 0;
    transcribe_vad_model * vad      = nullptr;
    transcribe_vad_params  speech {};
    transcribe_token_callback token_callback  = nullptr;
    void *                    token_user_data = nullptr;
    transcribe_model *        draft           = nullptr;
    std::vector<int32_t>      draft_ids;
};

RunRequest run_request(const transcribe_run_params * p) {
    RunRequest r;
    const transcribe_run_params d = transcribe_run_params_init();
    if (!p) {
        p = &d;
    }
    r.options.max_new_tokens = p->max_new_tokens > 0 ? p->max_new_tokens : 256;
    r.options.language       = p->language ? p->language : "";
    r.options.target_language = p->target_language ? p->target_language : "";
    r.options.punctuation    = !p->no_punctuation;
    r.options.timestamps     = p->timestamps;
    r.options.beam_size      = p->beam_size;
    r.chunk_ms               = p->chunk_ms;
    r.options.ignore_eos     = p->ignore_eos;
    r.vad                    = p->vad;
    r.speech                 = p->vad_params;
    r.token_callback         = p->token_callback;
    r.token_user_data        = p->token_user_data;
    r.draft                  = p->draft;
    if (p->n_draft_ids < 0 || (p->n_draft_ids > 0 && !p->draft_ids)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: %d draft ids at %p", p->n_draft_ids, (const void *) p->draft_ids);
    }
    r.draft_ids.assign(p->draft_ids, p->draft_ids + p->n_draft_ids);
    if (p->abort_callback) {
        r.options.cancelled = [cb = p->abort_callback, ud = p->abort_user_data] { return cb(ud); };
    }
    return r;
}

// Samples in one run of the model: the caller's chunk, else the model's own limit.
size_t window_samples(const ModelInfo & info, const RunRequest & req) {
    const int64_t window_ms = req.chunk_ms > 0 ? req.chunk_ms : info.max_audio_ms;
    const size_t window = size_t(window_ms * info.sample_rate / 1000);
    if (window < size_t(info.sample_rate)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: chunk_ms %lld is below one second", (long long) window_ms);
    }
    return window;
}

// The draft of one piece for speculative decoding: the draft model's transcript of it (run in the
// session's draft session, on the session's threads), in the main model's tokens.
std::vector<int32_t> draft_of(transcribe_session * s, transcribe_model * draft, const float * pcm, size_t n,
                              const std::function<bool()> & cancelled) {
    if (!s->draft || s->draft_serial != draft->serial) {
        SessionOptions o = s->options;
        o.n_batch           = 1;
        o.progress_callback = nullptr;
        s->draft.reset();
        s->draft        = draft->impl->new_session(o);
        s->draft_serial = draft->serial;
    }
    RunOptions o;
    o.cancelled = cancelled;
    return s->model->impl->tokenizer().encode(s->draft->run(pcm, n, o).text);
}

// The checks every run makes of its audio and options, and the options the session gets.
RunOptions run_options(transcribe_session * s, const float * pcm, size_t n, const RunRequest & req) {
    if (!pcm || n == 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: no audio samples");
    }
    audio_check_finite(pcm, n, "input audio");
    const ModelInfo & info = s->model->impl->info();
    RunOptions o = req.options;
    if (req.token_callback) {
        const Tokenizer & tok = s->model->impl->tokenizer();
        o.on_token = [&tok, &req](int32_t id) {
            const std::string bytes = tok.decode_bytes({id});
            req.token_callback(id, bytes.data(), bytes.size(), req.token_user_data);
        };
    }
    const std::string source = !o.language.empty() ? o.language : info.languages.empty() ? "" : info.languages[0];
    if (!o.target_language.empty() && strcasecmp(o.target_language.c_str(), source.c_str()) != 0 && !info.translation) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "target language '%s': model %s (%s) does not translate", o.target_language.c_str(),
             info.name.c_str(), info.architecture.c_str());
    }
    if (o.beam_size < 0 || (o.beam_size > 0 && !info.beam_search)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "beam size %d: model %s (%s) decodes greedily only", o.beam_size, info.name.c_str(),
             info.architecture.c_str());
    }
    if (!o.language.empty()) {
        // A language is only accepted as one the model knows, never echoed back as if it had steered
        // anything (models with a language prompt use it).
        bool known = false;
        std::string list;
        for (const std::string & l : info.languages) {
            known = known || strcasecmp(l.c_str(), o.language.c_str()) == 0;
            list += (list.empty() ? "" : ", ") + l;
        }
        if (!known) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "language '%s': model %s transcribes %s only", o.language.c_str(),
                 info.name.c_str(), list.c_str());
        }
    }
    if (req.draft || !req.draft_ids.empty()) {
        if (!info.speculative) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "draft: model %s (%s) does not decode with a draft", info.name.c_str(),
                 info.architecture.c_str());
        }
        if (!req.draft_ids.empty()) {
            o.draft = [ids = req.draft_ids](const float *, size_t) { return ids; };
        } else {
            const ModelInfo & d = req.draft->impl->info();
            if (d.sample_rate != info.sample_rate) {
                fail(TRANSCRIBE_ERR_INVALID_ARG, "draft: model %s takes %d Hz audio, model %s %d Hz", d.name.c_str(),
                     d.sample_rate, info.name.c_str(), info.sample_rate);
            }
            o.draft = [s, draft = req.draft, cancelled = o.cancelled](const float * piece, size_t n_piece) {
                return draft_of(s, draft, piece, n_piece, cancelled);
            };
        }
    }
    return o;
}

// The VAD's speech pieces of a recording (VAD one thread: the recurrence is a chain of small ops, where a
// second thread's barriers cost more than it computes, bench/RESULTS.md); VAD_MS gets its time.
std::vector<SpeechPiece> speech_plan(SileroVadSession & vad, const float * pcm, size_t n, const ModelInfo & info,
                                     const RunRequest & req, size_t window, double & vad_ms,
                                     const std::function<bool()> & abort) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> probs = vad.run(pcm, n, info.sample_rate, abort);
    const size_t chunk = size_t(req.vad->impl->branch(info.sample_rate).chunk);
    const std::vector<AudioSpan> regions = speech_regions(probs, chunk, n, info.sample_rate, req.speech);
    vad_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return plan_speech_pieces(regions, probs, chunk, window);
}

// OUTPUT_TRUNCATED (with the result kept) where a piece ran out of token budget.
transcribe_status result_status(const transcribe_result & r, const RunRequest & req) {
    if (r.transcript.truncated) {
        return report(TRANSCRIBE_ERR_OUTPUT_TRUNCATED,
                      format("transcript truncated: the budget of %d new tokens ran out before the end of a piece",
                             req.options.max_new_tokens));
    }
    return TRANSCRIBE_OK;
}

// How a recording is cut: by the VAD's speech regions when one is asked for (run by VAD on this thread,
// its time into VAD_MS; ABORT stops it), else at pauses into pieces of the window.
PiecePlan recording_plan(transcribe_session * s, SileroVadSession * vad, const float * pcm, size_t n,
                         const RunRequest & req, double & vad_ms, const std::function<bool()> & abort) {
    const ModelInfo & info = s->model->impl->info();
    const size_t window = window_samples(info, req);
    if (!req.vad) {
        return plan_pieces(pcm, n, info.sample_rate, window);
    }
    return plan_speech(s->model->impl->tokenizer(), pcm, speech_plan(*vad, pcm, n, info, req, window, vad_ms, abort),
                       info.sample_rate);
}

transcribe_status run_one(transcribe_session * s, const float * pcm, size_t n, const RunRequest & req,
                          transcribe_result ** out) {
    const RunOptions o = run_options(s, pcm, n, req);
    if (req.vad && s->vad_serial != req.vad->serial) {
        s->vad.reset();
        s->vad        = std::make_unique<SileroVadSession>(*req.vad->impl, 1);
        s->vad_serial = req.vad->serial;
    }
    const SessionOptions & so = s->options;
    double vad_ms = 0;
    const PiecePlan plan = recording_plan(s, s->vad.get(), pcm, n, req, vad_ms, [&] {
        return (so.abort_callback && so.abort_callback(so.abort_user_data)) || (o.cancelled && o.cancelled());
    });
    auto r = std::make_unique<transcribe_result>();
    r->transcript = transcribe_plan(*s->impl, plan, o);
    if (req.vad) {
        Timings t = s->impl->timings();
        t.vad_ms  = vad_ms;
        s->impl->set_timings(t);
    }
    *out = r.release();
    return result_status(**out, req);
}

AudioLimits audio_limits(const transcribe_audio_limits * l) {
    AudioLimits a;
    if (l) {
        a.max_seconds = l->max_seconds;
        if (l->abort_callback) {
            a.abort = [cb = l->abort_callback, ud = l->abort_user_data] { return cb(ud); };
        }
    }
    return a;
}

// The audio loaders' one body: API names the entry point in errors, DECODE(rate) decodes.
template <typename Decode>
transcribe_status load_audio(const char * api, bool args_ok, int target_rate, transcribe_audio * out, Decode && decode) {
    return guarded([&] {
        if (!args_ok || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "%s: null argument", api);
        }
        *out = transcribe_audio {nullptr, 0, 0};
        const int rate = target_rate > 0 ? target_rate : 16000;
        fill_audio(decode(rate), rate, out);
        return TRANSCRIBE_OK;
    });
}

} // namespace

extern "C" {

const char * transcribe_status_string(transcribe_status status) {
    switch (status) {
        case TRANSCRIBE_OK:                    return "OK";
        case TRANSCRIBE_ERR_INVALID_ARG:       return "INVALID_ARG";
        case TRANSCRIBE_ERR_FILE_NOT_FOUND:    return "FILE_NOT_FOUND";
        case TRANSCRIBE_ERR_FILE_READ:         return "FILE_READ";
        case TRANSCRIBE_ERR_BAD_GGUF:          return "BAD_GGUF";
        case TRANSCRIBE_ERR_UNSUPPORTED_ARCH:  return "UNSUPPORTED_ARCH";
        case TRANSCRIBE_ERR_MISSING_TENSOR:    return "MISSING_TENSOR";
        case TRANSCRIBE_ERR_BAD_SHAPE:         return "BAD_SHAPE";
        case TRANSCRIBE_ERR_AUDIO_DECODE:      return "AUDIO_DECODE";
        case TRANSCRIBE_ERR_BACKEND:           return "BACKEND";
        case TRANSCRIBE_ERR_OOM:               return "OOM";
        case TRANSCRIBE_ERR_ABORTED:           return "ABORTED";
        case TRANSCRIBE_ERR_INPUT_TOO_LONG:    return "INPUT_TOO_LONG";
        case TRANSCRIBE_ERR_OUTPUT_TRUNCATED:  return "OUTPUT_TRUNCATED";
        case TRANSCRIBE_ERR_INTERNAL:          return "INTERNAL";
    }
    return "UNKNOWN";
}

const char * transcribe_last_error(void) { return t_last_error.c_str(); }

const char * transcribe_version(void) { return TRANSCRIBE_VERSION; }

void transcribe_log_set(transcribe_log_callback callback, void * user_data) { log_set(callback, user_data); }

transcribe_load_params transcribe_load_params_init(void) {
    transcribe_load_params p;
    p.backend  = TRANSCRIBE_BACKEND_AUTO;
    p.device   = 0;
    p.use_mmap = false;
    p.cpu_repack = true;
    return p;
}

transcribe_status transcribe_backend_from_name(const char * name, transcribe_backend * out) {
    return guarded([&] {
        if (!name || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_backend_from_name: null argument");
        }
        const std::pair<const char *, transcribe_backend> names[] = {
            {"auto", TRANSCRIBE_BACKEND_AUTO}, {"cpu", TRANSCRIBE_BACKEND_CPU},       {"cuda", TRANSCRIBE_BACKEND_CUDA},
            {"vulkan", TRANSCRIBE_BACKEND_VULKAN}, {"metal", TRANSCRIBE_BACKEND_METAL},
        };
        for (const auto & [n, b] : names) {
            if (strcasecmp(n, name) == 0) {
                *out = b;
                return TRANSCRIBE_OK;
            }
        }
        fail(TRANSCRIBE_ERR_INVALID_ARG, "unknown backend '%s' (auto, cpu, cuda, vulkan, metal)", name);
    });
}

transcribe_status transcribe_model_load(const char * path, const transcribe_load_params * params,
                                        transcribe_model ** out_model) {
    return guarded([&] {
        if (!out_model) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_model_load: out_model is NULL");
        }
        *out_model = nullptr;
        if (!path || !*path) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_model_load: no path");
        }
        init_once();
        const transcribe_load_params p = params ? *params : transcribe_load_params_init();
        const auto t0 = std::chrono::steady_clock::now();
        ggml_backend_dev_t dev = select_device(p.backend, p.device);
        auto m = std::make_unique<transcribe_model>();
        WeightOptions wo;
        wo.use_mmap   = p.use_mmap;
        wo.cpu_repack = p.cpu_repack;
        m->impl    = load_model(path, wo, dev);
        m->backend = ggml_backend_dev_name(dev);
        static std::atomic<uint64_t> loads {0};
        m->serial  = ++loads;
        for (const auto & l : m->impl->info().languages) {
            m->language_ptrs.push_back(l.c_str());
        }
        m->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        *out_model = m.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_model_free(transcribe_model * model) { delete model; }

transcribe_status transcribe_model_get_info(const transcribe_model * model, transcribe_model_info * out) {
    return guarded([&] {
        if (!model || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_model_get_info: null argument");
        }
        const ModelInfo & i = model->impl->info();
        out->architecture = i.architecture.c_str();
        out->name         = i.name.c_str();
        out->backend      = model->backend.c_str();
        out->sample_rate  = i.sample_rate;
        out->max_audio_ms = i.max_audio_ms;
        out->n_vocab      = model->impl->tokenizer().n_vocab();
        out->n_languages  = int(model->language_ptrs.size());
        out->languages    = model->language_ptrs.data();
        out->load_ms      = model->load_ms;
        out->word_timestamps = i.word_timestamps;
        out->language_prompt = i.language_prompt;
        out->token_budget    = i.token_budget;
        out->speculative     = i.speculative;
        out->translation     = i.translation;
        out->beam_search     = i.beam_search;
        out->timestamp_prompt = i.timestamp_prompt;
        return TRANSCRIBE_OK;
    });
}

transcribe_status transcribe_tokenize(const transcribe_model * model, const char * text, int32_t * ids, int max_ids,
                                      int * n_ids) {
    return guarded([&] {
        if (!model || !text || !n_ids || (max_ids > 0 && !ids) || max_ids < 0) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_tokenize: null or negative argument");
        }
        const std::vector<int32_t> v = model->impl->tokenizer().encode(text);
        *n_ids = int(v.size());
        const size_t n = std::min(v.size(), size_t(max_ids));
        if (n) {
            std::memcpy(ids, v.data(), n * sizeof(int32_t));
        }
        if (v.size() > size_t(max_ids)) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_tokenize: %zu ids do not fit in %d", v.size(), max_ids);
        }
        return TRANSCRIBE_OK;
    });
}

transcribe_status transcribe_detokenize(const transcribe_model * model, const int32_t * ids, int n_ids, char * buf,
                                        size_t buf_size, size_t * n_bytes) {
    return guarded([&] {
        if (!model || (n_ids > 0 && !ids) || n_ids < 0 || !n_bytes || (buf_size > 0 && !buf)) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_detokenize: null or negative argument");
        }
        const std::string s = model->impl->tokenizer().decode(std::vector<int32_t>(ids, ids + n_ids));
        *n_bytes = s.size();
        if (s.size() + 1 > buf_size) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_detokenize: %zu bytes do not fit in a buffer of %zu", s.size() + 1,
                 buf_size);
        }
        std::memcpy(buf, s.c_str(), s.size() + 1);
        return TRANSCRIBE_OK;
    });
}

transcribe_session_params transcribe_session_params_init(void) {
    transcribe_session_params p;
    p.n_threads          = 0;
    p.kv_type            = TRANSCRIBE_KV_F16;
    p.n_ctx              = 0;
    p.abort_callback     = nullptr;
    p.abort_user_data    = nullptr;
    p.progress_callback  = nullptr;
    p.progress_user_data = nullptr;
    p.n_batch            = 0;
    return p;
}

transcribe_status transcribe_session_create(transcribe_model * model, const transcribe_session_params * params,
                                            transcribe_session ** out_session) {
    return guarded([&] {
        if (!model || !out_session) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_session_create: null argument");
        }
        *out_session = nullptr;
        const transcribe_session_params p = params ? *params : transcribe_session_params_init();
        if (p.kv_type != TRANSCRIBE_KV_F16 && p.kv_type != TRANSCRIBE_KV_F32) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_session_create: unknown KV type %d", int(p.kv_type));
        }
        SessionOptions o;
        o.n_threads = p.n_threads > 0 ? p.n_threads : int(std::max(1u, std::thread::hardware_concurrency()));
        o.kv_type   = p.kv_type == TRANSCRIBE_KV_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
        o.n_ctx     = p.n_ctx;
        if (p.n_batch < 0 || p.n_batch > 64) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_session_create: batch of %d (0..64)", p.n_batch);
        }
        o.n_batch   = p.n_batch;
        o.abort_callback     = p.abort_callback;
        o.abort_user_data    = p.abort_user_data;
        o.progress_callback  = p.progress_callback;
        o.progress_user_data = p.progress_user_data;
        auto s = std::make_unique<transcribe_session>();
        s->model   = model;
        s->options = o;
        s->impl    = model->impl->new_session(o);
        *out_session = s.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_session_free(transcribe_session * session) { delete session; }

int transcribe_session_batch_size(const transcribe_session * session) { return session ? session->impl->max_batch() : 0; }

transcribe_status transcribe_audio_load(const char * path, int target_rate, transcribe_audio * out) {
    return load_audio("transcribe_audio_load", path != nullptr, target_rate, out,
                      [&](int rate) { return audio_decode_file(path, rate); });
}

transcribe_status transcribe_audio_load_memory(const void * data, size_t size, int target_rate, transcribe_audio * out) {
    return load_audio("transcribe_audio_load_memory", true, target_rate, out,
                      [&](int rate) { return audio_decode_memory(data, size, rate); });
}

transcribe_status transcribe_audio_load_limited(const char * path, int target_rate, const transcribe_audio_limits * limits,
                                                transcribe_audio * out) {
    return load_audio("transcribe_audio_load_limited", path != nullptr, target_rate, out,
                      [&](int rate) { return audio_decode_file(path, rate, audio_limits(limits)); });
}

transcribe_status transcribe_audio_load_memory_limited(const void * data, size_t size, int target_rate,
                                                       const transcribe_audio_limits * limits, transcribe_audio * out) {
    return load_audio("transcribe_audio_load_memory_limited", true, target_rate, out,
                      [&](int rate) { return audio_decode_memory(data, size, rate, audio_limits(limits)); });
}

transcribe_status transcribe_audio_from_pcm(const float * interleaved, size_t n_frames, int sample_rate, int n_channels,
                                            int target_rate, transcribe_audio * out) {
    return guarded([&] {
        if (!out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_audio_from_pcm: null argument");
        }
        *out = transcribe_audio {nullptr, 0, 0};
        const int rate = target_rate > 0 ? target_rate : 16000;
        if (interleaved && n_channels > 0) {
            audio_check_finite(interleaved, n_frames * size_t(n_channels), "input audio");
        }
        fill_audio(audio_to_mono(interleaved, n_frames, sample_rate, n_channels, rate), rate, out);
        return TRANSCRIBE_OK;
    });
}

void transcribe_audio_free(transcribe_audio * audio) {
    if (audio) {
        std::free(audio->samples);
        audio->samples   = nullptr;
        audio->n_samples = 0;
    }
}

transcribe_run_params transcribe_run_params_init(void) {
    transcribe_run_params p;
    p.language       = nullptr;
    p.max_new_tokens = 256;
    p.chunk_ms       = 0;
    p.ignore_eos     = false;
    p.vad            = nullptr;
    p.vad_params     = transcribe_vad_params_init();
    p.token_callback  = nullptr;
    p.token_user_data = nullptr;
    p.abort_callback  = nullptr;
    p.abort_user_data = nullptr;
    p.draft           = nullptr;
    p.draft_ids       = nullptr;
    p.n_draft_ids     = 0;
    p.target_language = nullptr;
    p.no_punctuation  = false;
    p.timestamps      = false;
    p.beam_size       = 0;
    return p;
}

transcribe_status transcribe_run(transcribe_session * session, const float * pcm, size_t n_samples,
                                 const transcribe_run_params * params, transcribe_result ** out_result) {
    return guarded([&] {
        if (!session || !out_result) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: null argument");
        }
        *out_result = nullptr;
        return run_one(session, pcm, n_samples, run_request(params), out_result);
    });
}

transcribe_status transcribe_batcher_create(transcribe_session * session, transcribe_batcher ** out) {
    return guarded([&] {
        if (!session || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_batcher_create: null argument");
        }
        *out = nullptr;
        auto b = std::make_unique<transcribe_batcher>();
        b->session = session;
        b->impl    = std::make_unique<Batcher>(*session->impl);
        *out = b.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_batcher_free(transcribe_batcher * batcher) { delete batcher; }

transcribe_status transcribe_batcher_run(transcribe_batcher * batcher, const float * pcm, size_t n_samples,
                                         const transcribe_run_params * params, transcribe_result ** out_result) {
    return guarded([&] {
        if (!batcher || !out_result) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_batcher_run: null argument");
        }
        *out_result = nullptr;
        transcribe_session * s = batcher->session;
        const RunRequest req = run_request(params);
        Batcher::Recording rec;
        rec.options = run_options(s, pcm, n_samples, req);
        // With a VAD, this caller's own VAD session: it runs on the calling thread, beside the batch.
        std::unique_ptr<SileroVadSession> vad = req.vad ? std::make_unique<SileroVadSession>(*req.vad->impl, 1) : nullptr;
        double vad_ms = 0;
        rec.plan = recording_plan(s, vad.get(), pcm, n_samples, req, vad_ms,
                                  [&] { return rec.options.cancelled && rec.options.cancelled(); });
        auto r = std::make_unique<transcribe_result>();
        r->transcript = batcher->impl->run(std::move(rec));
        *out_result = r.release();
        return result_status(**out_result, req);
    });
}

transcribe_status transcribe_run_batch(transcribe_session * session, const float * const * pcm, const size_t * n_samples,
                                       int n, const transcribe_run_params * params, transcribe_result ** results,
                                       transcribe_status * statuses) {
    return guarded([&] {
        if (!session || !pcm || !n_samples || n < 0 || !results || !statuses) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run_batch: null or negative argument");
        }
        for (int i = 0; i < n; ++i) {
            results[i]  = nullptr;
            statuses[i] = TRANSCRIBE_ERR_ABORTED; // until it has run
        }
        const RunRequest req = run_request(params);
        const ModelInfo & info = session->model->impl->info();
        const size_t window = window_samples(info, req);
        // Recordings within one window are decoded together (when tokens stream to a callback they go
        // one by one: its calls would not say whose token each is); longer ones and those the VAD cuts
        // run after, each with its pieces decoded together.
        std::vector<int>        together;
        std::vector<RunOptions> options(static_cast<size_t>(n));
        std::vector<char>       handled(static_cast<size_t>(n), 0);
        if (!req.vad && !req.token_callback) {
            for (int i = 0; i < n; ++i) {
                if (pcm[i] && n_samples[i] > 0 && n_samples[i] <= window) {
                    handled[size_t(i)] = 1;
                    statuses[i] = guarded([&] {
                        options[size_t(i)] = run_options(session, pcm[i], n_samples[i], req);
                        together.push_back(i);
                        return TRANSCRIBE_OK;
                    });
                }
            }
        }
        bool aborted = false;
        if (!together.empty()) {
            size_t given = 0;
            const transcribe_status st = guarded([&] {
                session->impl->run_batch(
                    [&](BatchJob & job) {
                        if (given == together.size()) {
                            return false;
                        }
                        const int i   = together[given++];
                        job.pcm       = pcm[i];
                        job.n_samples = n_samples[i];
                        job.options   = options[size_t(i)];
                        return true;
                    },
                    [&](size_t id, Transcript * t, std::exception_ptr error) {
                        const int i = together[id];
                        if (t) {
                            auto r = std::make_unique<transcribe_result>();
                            r->transcript = std::move(*t);
                            results[i]  = r.release();
                            statuses[i] = result_status(*results[i], req);
                        } else {
                            statuses[i] = guarded([&]() -> transcribe_status { std::rethrow_exception(error); });
                        }
                    });
                return TRANSCRIBE_OK;
            });
            aborted = st != TRANSCRIBE_OK; // the session's abort (or a failure of the batch itself)
            if (aborted) {
                for (int i : together) {
                    if (!results[i]) {
                        statuses[i] = st;
                    }
                }
            }
        }
        for (int i = 0; i < n && !aborted; ++i) {
            if (handled[size_t(i)]) {
                continue;
            }
            statuses[i] = guarded([&] { return run_one(session, pcm[i], n_samples[i], req, &results[i]); });
            aborted = statuses[i] == TRANSCRIBE_ERR_ABORTED; // the caller wants everything stopped
        }
        transcribe_status first = TRANSCRIBE_OK;
        for (int i = 0; i < n; ++i) {
            if (statuses[i] != TRANSCRIBE_OK && first == TRANSCRIBE_OK) {
                first = statuses[i];
            }
        }
        return first;
    });
}

const char * transcribe_result_text(const transcribe_result * r) { return r ? r->transcript.text.c_str() : ""; }
bool transcribe_result_truncated(const transcribe_result * r) { return r && r->transcript.truncated; }
int transcribe_result_n_tokens(const transcribe_result * r) { return r ? int(r->transcript.tokens.size()) : 0; }
const int32_t * transcribe_result_tokens(const transcribe_result * r) { return r ? r->transcript.tokens.data() : nullptr; }
int transcribe_result_n_segments(const transcribe_result * r) { return r ? int(r->transcript.segments.size()) : 0; }

static const Segment * segment_at(const transcribe_result * r, int i) {
    return r && i >= 0 && size_t(i) < r->transcript.segments.size() ? &r->transcript.segments[size_t(i)] : nullptr;
}
int64_t transcribe_result_segment_t0_ms(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s ? s->t0_ms : -1;
}
int64_t transcribe_result_segment_t1_ms(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s ? s->t1_ms : -1;
}
const char * transcribe_result_segment_text(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s ? s->text.c_str() : "";
}
bool transcribe_result_segment_truncated(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s && s->truncated;
}
int transcribe_result_segment_n_tokens(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s ? int(s->tokens.size()) : 0;
}
const int32_t * transcribe_result_segment_tokens(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s ? s->tokens.data() : nullptr;
}
static const std::vector<Word> * words_of(const transcribe_result * r, int segment) {
    if (!r) {
        return nullptr;
    }
    if (segment < 0) {
        return &r->transcript.words;
    }
    const Segment * s = segment_at(r, segment);
    return s ? &s->words : nullptr;
}
int transcribe_result_n_words(const transcribe_result * r, int segment) {
    const std::vector<Word> * w = words_of(r, segment);
    return w ? int(w->size()) : 0;
}
transcribe_status transcribe_get_word(const transcribe_result * r, int segment, int i, transcribe_word * out) {
    return guarded([&] {
        const std::vector<Word> * w = words_of(r, segment);
        if (!w || !out || i < 0 || size_t(i) >= w->size()) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_get_word: no word %d in segment %d", i, segment);
        }
        const Word & word = (*w)[size_t(i)];
        out->text  = word.text.c_str();
        out->t0_ms = word.t0_ms;
        out->t1_ms = word.t1_ms;
        return TRANSCRIBE_OK;
    });
}
void transcribe_result_free(transcribe_result * r) { delete r; }

transcribe_status transcribe_session_get_timings(const transcribe_session * session, transcribe_timings * out) {
    return guarded([&] {
        if (!session || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_session_get_timings: null argument");
        }
        const Timings & t = session->impl->timings();
        out->load_ms          = session->model->load_ms;
        out->mel_ms           = t.mel_ms;
        out->encode_ms        = t.encode_ms;
        out->prefill_ms       = t.prefill_ms;
        out->decode_ms        = t.decode_ms;
        out->n_prefill_tokens = t.n_prefill_tokens;
        out->n_decode_tokens  = t.n_decode_tokens;
        out->vad_ms           = t.vad_ms;
        out->draft_ms          = t.draft_ms;
        out->n_decode_steps    = t.n_decode_steps;
        out->n_drafted_tokens  = t.n_drafted;
        out->n_accepted_tokens = t.n_accepted;
        out->n_verify_steps    = t.n_verify_steps;
        return TRANSCRIBE_OK;
    });
}

transcribe_vad_params transcribe_vad_params_init(void) { return default_speech_params(); }

transcribe_status transcribe_vad_model_load(const char * path, transcribe_vad_model ** out_model) {
    return guarded([&] {
        if (!out_model) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_vad_model_load: out_model is NULL");
        }
        *out_model = nullptr;
        if (!path || !*path) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_vad_model_load: no path");
        }
        init_once();
        static std::atomic<uint64_t> loads {0};
        auto m    = std::make_unique<transcribe_vad_model>();
        m->impl   = std::make_unique<SileroVad>(path);
        m->serial = ++loads;
        *out_model = m.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_vad_model_free(transcribe_vad_model * model) { delete model; }

transcribe_status transcribe_vad_session_create(transcribe_vad_model * model, int n_threads,
                                                transcribe_vad_session ** out_session) {
    return guarded([&] {
        if (!model || !out_session) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_vad_session_create: null argument");
        }
        *out_session = nullptr;
        auto s  = std::make_unique<transcribe_vad_session>();
        s->impl = std::make_unique<SileroVadSession>(*model->impl, n_threads > 0 ? n_threads : 1);
        *out_session = s.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_vad_session_free(transcribe_vad_session * session) { delete session; }

transcribe_status transcribe_vad_detect(transcribe_vad_session * session, const float * pcm, size_t n_samples,
                                        int sample_rate, const transcribe_vad_params * params,
                                        transcribe_vad_result ** out_result) {
    return guarded([&] {
        if (!session || !out_result || (n_samples > 0 && !pcm)) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_vad_detect: null argument");
        }
        *out_result = nullptr;
        if (n_samples > 0) {
            audio_check_finite(pcm, n_samples, "input audio");
        }
        const transcribe_vad_params p = params ? *params : transcribe_vad_params_init();
        const SileroVadBranch & b = session->impl->model().branch(sample_rate);
        auto r   = std::make_unique<transcribe_vad_result>();
        r->chunk = b.chunk;
        r->probs = session->impl->run(pcm, n_samples, sample_rate);
        r->regions = speech_regions(r->probs, size_t(b.chunk), n_samples, sample_rate, p);
        r->state = session->impl->state();
        *out_result = r.release();
        return TRANSCRIBE_OK;
    });
}

int transcribe_vad_result_chunk_samples(const transcribe_vad_result * r) { return r ? r->chunk : 0; }
int transcribe_vad_result_n_probs(const transcribe_vad_result * r) { return r ? int(r->probs.size()) : 0; }
const float * transcribe_vad_result_probs(const transcribe_vad_result * r) { return r ? r->probs.data() : nullptr; }
int transcribe_vad_result_n_segments(const transcribe_vad_result * r) { return r ? int(r->regions.size()) : 0; }
int64_t transcribe_vad_result_segment_begin(const transcribe_vad_result * r, int i) {
    return r && i >= 0 && size_t(i) < r->regions.size() ? int64_t(r->regions[size_t(i)].begin) : -1;
}
int64_t transcribe_vad_result_segment_end(const transcribe_vad_result * r, int i) {
    return r && i >= 0 && size_t(i) < r->regions.size() ? int64_t(r->regions[size_t(i)].end) : -1;
}
const float * transcribe_vad_result_state(const transcribe_vad_result * r) { return r ? r->state.data() : nullptr; }
void transcribe_vad_result_free(transcribe_vad_result * r) { delete r; }

} // extern "C"
