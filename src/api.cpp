// The C API: argument checks, C++ exceptions turned into status codes, thread-local last error.
#include "transcribe.h"

#include "core/audio.h"
#include "engine/batcher.h"
#include "core/backend.h"
#include "core/error.h"
#include "model/family.h"
#include "engine/live_stream.h"
#include "engine/native_live_stream.h"
#include "engine/long_audio.h"
#include "core/log.h"
#include "core/system_memory.h"
#include "engine/pipeline.h"
#include "engine/speech_segments.h"
#include "engine/speaker_segments.h"
#include "families/silero_vad.h"
#include "families/sortformer.h"

#include "ggml.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <strings.h>
#include <mutex>
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
    transcribe_model *                 model;
    std::unique_ptr<RecordingPipeline> pipeline;
};

struct transcribe_diarization {
    SpeakerActivity             activity;
    std::vector<SpeakerSegment> segments;
};

struct transcribe_diarizer {
    std::unique_ptr<Sortformer>        model;
    std::unique_ptr<SortformerSession> session;
    std::mutex                         mutex; // one recording at a time

    // The probabilities and NeMo's segments of one recording (transcribe_diarize and speaker attribution).
    transcribe_diarization diarize(const float * pcm, size_t n, const transcribe_diarize_params & p) {
        std::lock_guard<std::mutex> lock(mutex);
        transcribe_diarization r;
        if (p.mode < TRANSCRIBE_DIARIZE_AUTO || p.mode > TRANSCRIBE_DIARIZE_STREAMING) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "diarize: unknown mode %d", p.mode);
        }
        DiarizeOptions o;
        o.mode                   = p.mode == TRANSCRIBE_DIARIZE_OFFLINE     ? DiarizeMode::Offline
                                   : p.mode == TRANSCRIBE_DIARIZE_STREAMING ? DiarizeMode::Streaming
                                                                            : DiarizeMode::Auto;
        o.spkcache_len           = p.spkcache_len;
        o.fifo_len               = p.fifo_len;
        o.spkcache_update_period = p.spkcache_update_period;
        o.chunk_len              = p.chunk_len;
        o.chunk_left_context     = p.chunk_left_context;
        o.chunk_right_context    = p.chunk_right_context;
        r.activity               = session->run(pcm, n, o);
        const int unit = r.activity.frame_ms / 10; // 10-ms frames a model frame covers (NeMo's subsampling factor)
        r.segments = speaker_segments(r.activity.probs, r.activity.n_frames, r.activity.n_speakers, unit,
                                      {p.onset, p.offset, p.pad_onset, p.pad_offset, p.min_duration_on, p.min_duration_off});
        return r;
    }
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
    advise_huge_pages(out->samples, samples.size() * sizeof(float));
    std::memcpy(out->samples, samples.data(), samples.size() * sizeof(float));
    out->n_samples   = samples.size();
    out->sample_rate = rate;
}

// The engine's request for what the C parameters ask.
RecordingRequest run_request(const transcribe_run_params * p) {
    RecordingRequest r;
    const transcribe_run_params d = transcribe_run_params_init();
    if (!p) {
        p = &d;
    }
    r.options.max_new_tokens  = p->max_new_tokens > 0 ? p->max_new_tokens : 256;
    r.options.language        = p->language ? p->language : "";
    r.options.target_language = p->target_language ? p->target_language : "";
    r.options.punctuation     = !p->no_punctuation;
    r.options.timestamps      = p->timestamps;
    r.options.beam_size       = p->beam_size;
    r.options.no_timestamps              = p->no_timestamps;
    r.options.condition_on_previous_text = !p->no_condition_on_previous_text;
    if (p->temperatures && p->n_temperatures > 0) {
        r.options.temperatures.assign(p->temperatures, p->temperatures + p->n_temperatures);
    }
    r.options.best_of = p->best_of;
    r.options.seed    = p->seed;
    if (p->att_context_size) {
        r.options.att_context_size = {p->att_context_size[0], p->att_context_size[1]};
    }
    if (p->decoder_type < TRANSCRIBE_DECODER_DEFAULT || p->decoder_type > TRANSCRIBE_DECODER_CTC) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "decoder_type %d is none of transcribe_decoder_type", int(p->decoder_type));
    }
    r.options.decoder_type    = p->decoder_type == TRANSCRIBE_DECODER_CTC          ? DecoderType::Ctc
                                : p->decoder_type == TRANSCRIBE_DECODER_TRANSDUCER ? DecoderType::Transducer
                                                                                   : DecoderType::Default;
    if (p->hotwords) {
        std::string line;
        for (const char * c = p->hotwords;; ++c) {
            if (*c == '\n' || *c == '\0') {
                if (!line.empty()) {
                    r.options.hotwords.push_back(line);
                }
                line.clear();
                if (*c == '\0') {
                    break;
                }
            } else {
                line += *c;
            }
        }
    }
    r.options.hotword_weight  = p->hotword_weight;
    r.options.prompt          = p->prompt ? p->prompt : "";
    if (p->aligner) {
        r.aligner    = p->aligner->impl.get();
        r.aligner_id = p->aligner->serial;
    }
    r.options.ignore_eos      = p->ignore_eos;
    r.chunk_ms                = p->chunk_ms;
    if (transcribe_vad_model * vad = p->vad) {
        r.new_vad = [vad] { return std::make_unique<SileroVadSession>(*vad->impl, 1); };
        r.vad_id  = vad->serial;
    }
    r.speech = p->vad_params;
    if (p->token_callback) {
        r.token_bytes = [cb = p->token_callback, ud = p->token_user_data](int32_t id, const std::string & bytes) {
            cb(id, bytes.data(), bytes.size(), ud);
        };
    }
    if (p->draft) {
        r.draft    = p->draft->impl.get();
        r.draft_id = p->draft->serial;
    }
    if (p->n_draft_ids < 0 || (p->n_draft_ids > 0 && !p->draft_ids)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: %d draft ids at %p", p->n_draft_ids, (const void *) p->draft_ids);
    }
    r.draft_ids.assign(p->draft_ids, p->draft_ids + p->n_draft_ids);
    if (transcribe_diarizer * d = p->diarizer) {
        const transcribe_diarize_params dp = p->diarize_params;
        r.diarize = [d, dp](const float * pcm, size_t n) { return d->diarize(pcm, n, dp).segments; };
    }
    if (p->abort_callback) {
        r.options.cancelled = [cb = p->abort_callback, ud = p->abort_user_data] { return cb(ud); };
    }
    return r;
}

// OUTPUT_TRUNCATED (with the result kept) where a piece ran out of token budget.
transcribe_status result_status(const transcribe_result & r, const RecordingRequest & req) {
    if (r.transcript.truncated) {
        return report(TRANSCRIBE_ERR_OUTPUT_TRUNCATED,
                      format("transcript truncated: the budget of %d new tokens (or the decoder's length) ran out "
                             "before the end of a piece",
                             req.options.max_new_tokens));
    }
    return TRANSCRIBE_OK;
}

transcribe_status give_result(Transcript && t, const RecordingRequest & req, transcribe_result ** out) {
    auto r = std::make_unique<transcribe_result>();
    r->transcript = std::move(t);
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
        out->n_att_contexts = int(i.att_contexts.size() / 2);
        out->att_contexts   = i.att_contexts.empty() ? nullptr : i.att_contexts.data();
        out->native_streaming  = i.native_streaming;
        out->end_of_turn_token = i.end_of_turn_token;
        out->word_timestamps = i.word_timestamps;
        out->language_prompt = i.language_prompt;
        out->token_budget    = i.token_budget;
        out->speculative     = i.speculative;
        out->translation     = i.translation;
        out->beam_search     = i.beam_search;
        out->timestamp_prompt = i.timestamp_prompt;
        out->transducer_head  = i.transducer_head;
        out->ctc_head         = i.ctc_head;
        out->hotwords         = i.hotwords;
        out->text_prompt      = i.text_prompt;
        out->language_detection = i.language_detection;
        out->forced_aligner     = i.forced_aligner;
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
        s->model    = model;
        s->pipeline = std::make_unique<RecordingPipeline>(*model->impl, o);
        *out_session = s.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_session_free(transcribe_session * session) { delete session; }

int transcribe_session_batch_size(const transcribe_session * session) {
    return session ? session->pipeline->session().max_batch() : 0;
}

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
    p.decoder_type    = TRANSCRIBE_DECODER_DEFAULT;
    p.hotwords        = nullptr;
    p.hotword_weight  = 1.0f;
    p.aligner         = nullptr;
    p.prompt          = nullptr;
    p.no_timestamps   = false;
    p.no_condition_on_previous_text = false;
    p.temperatures    = nullptr;
    p.n_temperatures  = 0;
    p.best_of         = 0;
    p.seed            = 0;
    p.att_context_size = nullptr;
    p.diarizer        = nullptr;
    p.diarize_params  = transcribe_diarize_params_init();
    return p;
}

transcribe_status transcribe_run(transcribe_session * session, const float * pcm, size_t n_samples,
                                 const transcribe_run_params * params, transcribe_result ** out_result) {
    return guarded([&] {
        if (!session || !out_result) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_run: null argument");
        }
        *out_result = nullptr;
        const RecordingRequest req = run_request(params);
        return give_result(session->pipeline->run(pcm, n_samples, req), req, out_result);
    });
}

transcribe_status transcribe_align(transcribe_session * session, const float * pcm, size_t n_samples, const char * text,
                                   const char * language, transcribe_result ** out_result) {
    return guarded([&] {
        if (!session || !text || !out_result) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_align: null argument");
        }
        *out_result = nullptr;
        auto r = std::make_unique<transcribe_result>();
        r->transcript = session->pipeline->align_text(pcm, n_samples, text, language ? language : "");
        *out_result = r.release();
        return TRANSCRIBE_OK;
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
        b->impl    = std::make_unique<Batcher>(session->pipeline->session());
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
        const RecordingRequest req = run_request(params);
        return give_result(batcher->session->pipeline->run_shared(*batcher->impl, pcm, n_samples, req), req, out_result);
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
        const RecordingRequest req = run_request(params);
        std::vector<RecordingPipeline::Outcome> outcomes = session->pipeline->run_many(pcm, n_samples, n, req);
        for (int i = 0; i < n; ++i) {
            RecordingPipeline::Outcome & o = outcomes[size_t(i)];
            if (o.transcript) {
                statuses[i] = give_result(std::move(*o.transcript), req, &results[i]);
            } else if (o.error) {
                statuses[i] = guarded([&]() -> transcribe_status { std::rethrow_exception(o.error); });
            }
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
const char * transcribe_result_language(const transcribe_result * r) { return r ? r->transcript.language.c_str() : ""; }

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
int transcribe_result_segment_speaker(const transcribe_result * r, int i) {
    const Segment * s = segment_at(r, i);
    return s ? s->speaker : -1;
}

transcribe_status transcribe_result_segment_decode(const transcribe_result * r, int i, transcribe_segment_decode * out) {
    const Segment * s = segment_at(r, i);
    if (!s || !out || !s->has_decode) {
        return TRANSCRIBE_ERR_INVALID_ARG;
    }
    *out = {s->decode.seek, s->decode.temperature, s->decode.avg_logprob, s->decode.compression_ratio, s->decode.no_speech_prob};
    return TRANSCRIBE_OK;
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
        out->text    = word.text.c_str();
        out->t0_ms   = word.t0_ms;
        out->t1_ms   = word.t1_ms;
        out->speaker = word.speaker;
        return TRANSCRIBE_OK;
    });
}
void transcribe_result_free(transcribe_result * r) { delete r; }

transcribe_status transcribe_session_get_timings(const transcribe_session * session, transcribe_timings * out) {
    return guarded([&] {
        if (!session || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_session_get_timings: null argument");
        }
        const Timings & t = session->pipeline->session().timings();
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
        out->diarize_ms        = t.diarize_ms;
        return TRANSCRIBE_OK;
    });
}

transcribe_diarize_params transcribe_diarize_params_init(void) {
    const DiarizationParams d;
    return {d.onset, d.offset, d.pad_onset, d.pad_offset, d.min_duration_on, d.min_duration_off, TRANSCRIBE_DIARIZE_AUTO,
            -1, -1, -1, -1, -1, -1};
}

transcribe_status transcribe_diarize_params_from_yaml(const char * path, transcribe_diarize_params * out) {
    return guarded([&] {
        if (!path || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_diarize_params_from_yaml: null argument");
        }
        std::FILE * f = std::fopen(path, "r");
        if (!f) {
            fail(TRANSCRIBE_ERR_FILE_NOT_FOUND, "post-processing file %s: cannot open", path);
        }
        // NeMo's post_processing yaml: `parameters:` then indented `key: number` lines (comments allowed).
        const std::pair<const char *, double *> keys[] = {{"onset", &out->onset},         {"offset", &out->offset},
                                                          {"pad_onset", &out->pad_onset}, {"pad_offset", &out->pad_offset},
                                                          {"min_duration_on", &out->min_duration_on},
                                                          {"min_duration_off", &out->min_duration_off}};
        char line[512];
        bool in_parameters = false, any = false;
        while (std::fgets(line, sizeof line, f)) {
            std::string l(line);
            l = l.substr(0, l.find('#'));
            const size_t colon = l.find(':');
            if (colon == std::string::npos) {
                continue;
            }
            const bool indented = !l.empty() && (l[0] == ' ' || l[0] == '\t');
            const std::string key = l.substr(l.find_first_not_of(" \t"), colon - l.find_first_not_of(" \t"));
            if (!indented) {
                in_parameters = key == "parameters";
                continue;
            }
            for (const auto & [name, value] : keys) {
                if (in_parameters && key == name) {
                    char * end = nullptr;
                    const std::string v = l.substr(colon + 1);
                    *value = std::strtod(v.c_str(), &end);
                    if (end == v.c_str()) {
                        std::fclose(f);
                        fail(TRANSCRIBE_ERR_INVALID_ARG, "post-processing file %s: %s is not a number", path, name);
                    }
                    any = true;
                }
            }
        }
        std::fclose(f);
        if (!any) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "post-processing file %s: no `parameters:` values", path);
        }
        return TRANSCRIBE_OK;
    });
}

transcribe_status transcribe_diarizer_load(const char * path, int n_threads, transcribe_diarizer ** out) {
    return guarded([&] {
        if (!path || !out) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_diarizer_load: null argument");
        }
        *out = nullptr;
        init_once();
        auto d     = std::make_unique<transcribe_diarizer>();
        d->model   = std::make_unique<Sortformer>(path, ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
        d->session = std::make_unique<SortformerSession>(
            *d->model, n_threads > 0 ? n_threads : int(std::max(1u, std::thread::hardware_concurrency())));
        *out = d.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_diarizer_free(transcribe_diarizer * diarizer) { delete diarizer; }
int  transcribe_diarizer_sample_rate(const transcribe_diarizer * d) { return d ? d->model->sample_rate() : 0; }
int  transcribe_diarizer_n_speakers(const transcribe_diarizer * d) { return d ? d->model->n_speakers() : 0; }

transcribe_status transcribe_diarize(transcribe_diarizer * diarizer, const float * pcm, size_t n_samples,
                                     const transcribe_diarize_params * params, transcribe_diarization ** out_result) {
    return guarded([&] {
        if (!diarizer || !out_result || !pcm || n_samples == 0) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_diarize: null argument or no samples");
        }
        *out_result = nullptr;
        audio_check_finite(pcm, n_samples, "input audio");
        const transcribe_diarize_params p = params ? *params : transcribe_diarize_params_init();
        *out_result = new transcribe_diarization(diarizer->diarize(pcm, n_samples, p));
        return TRANSCRIBE_OK;
    });
}

int transcribe_diarization_n_frames(const transcribe_diarization * r) { return r ? r->activity.n_frames : 0; }
int transcribe_diarization_n_speakers(const transcribe_diarization * r) { return r ? r->activity.n_speakers : 0; }
int transcribe_diarization_frame_ms(const transcribe_diarization * r) { return r ? r->activity.frame_ms : 0; }
const float * transcribe_diarization_probs(const transcribe_diarization * r) { return r ? r->activity.probs.data() : nullptr; }
int transcribe_diarization_n_segments(const transcribe_diarization * r) { return r ? int(r->segments.size()) : 0; }
static const SpeakerSegment * speaker_segment_at(const transcribe_diarization * r, int i) {
    return r && i >= 0 && size_t(i) < r->segments.size() ? &r->segments[size_t(i)] : nullptr;
}
double transcribe_diarization_segment_start(const transcribe_diarization * r, int i) {
    const SpeakerSegment * s = speaker_segment_at(r, i);
    return s ? s->start : -1.0;
}
double transcribe_diarization_segment_end(const transcribe_diarization * r, int i) {
    const SpeakerSegment * s = speaker_segment_at(r, i);
    return s ? s->end : -1.0;
}
int transcribe_diarization_segment_speaker(const transcribe_diarization * r, int i) {
    const SpeakerSegment * s = speaker_segment_at(r, i);
    return s ? s->speaker : -1;
}
void transcribe_diarization_free(transcribe_diarization * r) { delete r; }

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

// ---------------------------------------------------------------- live streams

struct transcribe_stream {
    std::unique_ptr<LiveTurns> impl;
    LiveStream *               offline = nullptr; // impl, re-decoding an offline model's turns
    NativeLiveStream *         native  = nullptr; // impl, through a model that transcribes as it hears
    std::string                text;              // the last event's text, kept for the caller
};

transcribe_stream_params transcribe_stream_params_init(void) {
    const LiveStreamOptions d;
    transcribe_stream_params p;
    p.sample_rate         = d.sample_rate;
    p.turn_detection      = d.detect_turns;
    p.threshold           = d.turns.threshold;
    p.prefix_padding_ms   = d.turns.prefix_padding_ms;
    p.silence_duration_ms = d.turns.silence_duration_ms;
    p.partial_interval_ms = d.partial_interval_ms;
    p.end_of_turn         = false;
    return p;
}

transcribe_status transcribe_stream_create(transcribe_vad_model * vad, const transcribe_stream_params * params,
                                           transcribe_stream ** out_stream) {
    return guarded([&] {
        if (!out_stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_stream_create: null argument");
        }
        *out_stream = nullptr;
        const transcribe_stream_params p = params ? *params : transcribe_stream_params_init();
        LiveStreamOptions o;
        o.sample_rate               = p.sample_rate;
        o.detect_turns              = p.turn_detection;
        o.turns.threshold           = p.threshold;
        o.turns.prefix_padding_ms   = p.prefix_padding_ms;
        o.turns.silence_duration_ms = p.silence_duration_ms;
        o.partial_interval_ms       = p.partial_interval_ms;
        std::unique_ptr<SpeechDetector> detector;
        if (p.turn_detection && vad) {
            detector = std::make_unique<SileroVadSession>(*vad->impl, 1);
        }
        auto s     = std::make_unique<transcribe_stream>();
        auto impl  = std::make_unique<LiveStream>(o, std::move(detector));
        s->offline = impl.get();
        s->impl    = std::move(impl);
        *out_stream = s.release();
        return TRANSCRIBE_OK;
    });
}

transcribe_status transcribe_stream_create_native(transcribe_session * session, transcribe_vad_model * vad,
                                                  const transcribe_stream_params * params,
                                                  const transcribe_run_params * run, transcribe_stream ** out_stream) {
    return guarded([&] {
        if (!session || !out_stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_stream_create_native: null argument");
        }
        *out_stream = nullptr;
        const transcribe_stream_params p = params ? *params : transcribe_stream_params_init();
        NativeLiveOptions o;
        o.sample_rate             = p.sample_rate;
        o.turns                   = p.turn_detection ? NativeTurns::Vad : p.end_of_turn ? NativeTurns::EndOfTurnToken
                                                                                        : NativeTurns::Commits;
        o.vad.threshold           = p.threshold;
        o.vad.prefix_padding_ms   = p.prefix_padding_ms;
        o.vad.silence_duration_ms = p.silence_duration_ms;
        Session &          model_session = session->pipeline->session();
        const Model &      model         = session->pipeline->model();
        const RunOptions   options       = run_request(run).options;
        if (!model.info().native_streaming) {
            model_session.open_stream(options); // its INVALID_ARG names the alternative
        }
        NativeLiveModel m;
        m.sample_rate = model.info().sample_rate;
        m.end_of_turn = model.info().end_of_turn_token;
        m.open        = [&model_session, options] { return model_session.open_stream(options); };
        m.detokenize  = [&model](const std::vector<int32_t> & ids) { return model.tokenizer().decode(ids); };
        std::unique_ptr<SpeechDetector> detector; // without one, turn detection is the stream's INVALID_ARG
        if (p.turn_detection && vad) {
            detector = std::make_unique<SileroVadSession>(*vad->impl, 1);
        }
        auto s    = std::make_unique<transcribe_stream>();
        auto impl = std::make_unique<NativeLiveStream>(o, std::move(m), std::move(detector));
        s->native = impl.get();
        s->impl   = std::move(impl);
        *out_stream = s.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_stream_free(transcribe_stream * stream) { delete stream; }

transcribe_status transcribe_stream_push(transcribe_stream * stream, const float * pcm, size_t n_samples) {
    return guarded([&] {
        if (!stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_stream_push: null argument");
        }
        stream->impl->push(pcm, n_samples);
        return TRANSCRIBE_OK;
    });
}

transcribe_status transcribe_stream_commit(transcribe_stream * stream) {
    return guarded([&] {
        if (!stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_stream_commit: null argument");
        }
        stream->impl->commit();
        return TRANSCRIBE_OK;
    });
}

transcribe_status transcribe_stream_clear(transcribe_stream * stream) {
    return guarded([&] {
        if (!stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_stream_clear: null argument");
        }
        stream->impl->clear();
        return TRANSCRIBE_OK;
    });
}

bool transcribe_stream_decode_due(const transcribe_stream * stream) { return stream && stream->impl->decode_due(); }

size_t transcribe_stream_turns_waiting(const transcribe_stream * stream) {
    return stream ? stream->impl->turns_waiting() : 0;
}

transcribe_status transcribe_stream_decode(transcribe_stream * stream, transcribe_session * session,
                                           transcribe_batcher * batcher, const transcribe_run_params * params) {
    return guarded([&] {
        if (stream && stream->native) {
            stream->native->decode();
            return TRANSCRIBE_OK;
        }
        if (!stream || (!session && !batcher)) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_stream_decode: null argument");
        }
        RecordingPipeline & pipeline = *(batcher ? batcher->session : session)->pipeline;
        const RecordingRequest req = run_request(params);
        const int rate = pipeline.model().info().sample_rate, stream_rate = stream->offline->options().sample_rate;
        bool truncated = false;
        stream->offline->decode([&](const float * pcm, size_t n) {
            std::vector<float> resampled;
            if (stream_rate != rate) {
                resampled = audio_to_mono(pcm, n, stream_rate, 1, rate);
                pcm = resampled.data(), n = resampled.size();
            }
            Transcript t = batcher ? pipeline.run_shared(*batcher->impl, pcm, n, req) : pipeline.run(pcm, n, req);
            truncated = truncated || t.truncated;
            return std::move(t.text);
        });
        if (truncated) {
            return report(TRANSCRIBE_ERR_OUTPUT_TRUNCATED,
                          format("a turn's transcript was truncated: the budget of %d new tokens ran out",
                                 req.options.max_new_tokens));
        }
        return TRANSCRIBE_OK;
    });
}

bool transcribe_stream_next_event(transcribe_stream * stream, transcribe_stream_event * out) {
    LiveEvent e {LiveEventKind::Delta};
    if (!stream || !out || !stream->impl->next_event(e)) {
        return false;
    }
    stream->text = std::move(e.text);
    out->type    = e.kind == LiveEventKind::SpeechStarted   ? TRANSCRIBE_STREAM_SPEECH_STARTED
                   : e.kind == LiveEventKind::SpeechStopped ? TRANSCRIBE_STREAM_SPEECH_STOPPED
                   : e.kind == LiveEventKind::Committed     ? TRANSCRIBE_STREAM_COMMITTED
                   : e.kind == LiveEventKind::Delta         ? TRANSCRIBE_STREAM_DELTA
                                                            : TRANSCRIBE_STREAM_COMPLETED;
    out->item           = e.item;
    out->audio_start_ms = e.audio_start_ms;
    out->audio_end_ms   = e.audio_end_ms;
    out->text           = stream->text.c_str();
    return true;
}

// ---------------------------------------------------------------- native streams

struct transcribe_native_stream {
    std::unique_ptr<NativeStream> impl;
    std::deque<StreamStep>        steps;
    StreamStep                    step; // the one last handed out, kept for the caller
    std::string                   text;
};

transcribe_status transcribe_native_stream_open(transcribe_session * session, const transcribe_run_params * params,
                                                transcribe_native_stream ** out_stream) {
    return guarded([&] {
        if (!session || !out_stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_native_stream_open: null argument");
        }
        *out_stream = nullptr;
        const RecordingRequest r = run_request(params);
        auto s  = std::make_unique<transcribe_native_stream>();
        s->impl = session->pipeline->session().open_stream(r.options);
        *out_stream = s.release();
        return TRANSCRIBE_OK;
    });
}

void transcribe_native_stream_free(transcribe_native_stream * stream) { delete stream; }

namespace {
template <typename F> transcribe_status with_native_stream(transcribe_native_stream * stream, const char * what, F && f) {
    return guarded([&] {
        if (!stream) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "%s: null stream", what);
        }
        f();
        for (StreamStep & s : stream->impl->take_steps()) {
            stream->steps.push_back(std::move(s));
        }
        return TRANSCRIBE_OK;
    });
}
} // namespace

transcribe_status transcribe_native_stream_push(transcribe_native_stream * stream, const float * pcm, size_t n_samples) {
    return with_native_stream(stream, "transcribe_native_stream_push", [&] {
        if (!pcm && n_samples) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "transcribe_native_stream_push: null samples");
        }
        stream->impl->push(pcm, n_samples);
    });
}

transcribe_status transcribe_native_stream_finish(transcribe_native_stream * stream) {
    return with_native_stream(stream, "transcribe_native_stream_finish", [&] { stream->impl->finish(); });
}

bool transcribe_native_stream_next_step(transcribe_native_stream * stream, transcribe_stream_step * out) {
    if (!stream || !out || stream->steps.empty()) {
        return false;
    }
    stream->step = std::move(stream->steps.front());
    stream->steps.pop_front();
    out->index        = stream->step.index;
    out->audio_end_ms = stream->step.audio_end_ms;
    out->n_tokens     = int(stream->step.tokens.size());
    out->tokens       = stream->step.tokens.data();
    out->text         = stream->step.text.c_str();
    return true;
}

const char * transcribe_native_stream_text(transcribe_native_stream * stream) {
    if (!stream) {
        return "";
    }
    stream->text = stream->impl->text();
    return stream->text.c_str();
}
