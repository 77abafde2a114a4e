// /v1/audio/transcriptions and /v1/audio/translations: the form's fields checked, the audio decoded under
// the server's limits, the transcript in the format asked for (or streamed as OpenAI's events).
#include "server.h"

#include "../common/decoder_type.h"
#include "../common/formats.h"
#include "../common/text_stream.h"
#include "http/connection_watch.h"
#include "http/multipart.h"
#include "openai_formats.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

using namespace transcribe_tools;

namespace transcribe_server {

// What every transcription request runs with; R must outlive the run.
transcribe_run_params run_params(const ServerState & st, const RunRequest & r) {
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = st.max_new_tokens;
    rp.language       = r.language.empty() ? nullptr : r.language.c_str();
    rp.target_language = r.target_language.empty() ? nullptr : r.target_language.c_str();
    rp.timestamps     = r.timestamps;
    rp.no_timestamps  = r.no_timestamps;
    rp.temperatures   = r.temperatures.data();
    rp.n_temperatures = int(r.temperatures.size());
    rp.beam_size      = r.beam_size;
    rp.decoder_type   = r.decoder_type;
    rp.hotwords       = r.hotwords.empty() ? nullptr : r.hotwords.c_str();
    rp.hotword_weight = r.hotword_weight;
    rp.prompt         = !r.prompt.empty() && st.info.text_prompt ? r.prompt.c_str() : nullptr;
    rp.vad            = r.no_vad ? nullptr : st.vad;
    rp.vad_params     = r.speech_set ? r.speech : st.vad_params;
    rp.draft          = r.draft ? st.draft : nullptr;
    rp.aligner        = st.aligner;
    if (r.diarize) {
        rp.diarizer       = st.diarizer;
        rp.diarize_params = st.diarize_params;
    }
    return rp;
}

namespace {

std::string form_field(const Form & form, const char * name, const std::string & fallback) {
    const auto it = form.find(name);
    return it == form.end() ? fallback : it->second.content;
}

// Every value of a repeated form field, under its name with or without OpenAI's "[]".
std::vector<std::string> form_values(const Form & form, const std::string & name) {
    std::vector<std::string> out;
    for (const std::string & key : {name, name + "[]"}) {
        const auto range = form.equal_range(key);
        for (auto it = range.first; it != range.second; ++it) {
            out.push_back(it->second.content);
        }
    }
    return out;
}

// A container people upload that libsndfile does not read, named from its first bytes ("" otherwise).
std::string unsupported_container(const std::string & b) {
    if (b.size() >= 12 && b.compare(4, 4, "ftyp") == 0) {
        return "MP4/M4A (AAC) audio is not supported, convert it to wav, flac, ogg or mp3; ";
    }
    if (b.size() >= 4 && b.compare(0, 4, "\x1A\x45\xDF\xA3") == 0) {
        return "WebM/Matroska audio is not supported, convert it to wav, flac, ogg or mp3; ";
    }
    return "";
}

// How a finished transcript is written back: the response format and what shapes it.
struct ResponseShape {
    std::string format_name = "json"; // json, text, srt, vtt, verbose_json, diarized_json
    bool        translate = false;
    std::string language; // verbose_json's: the target (translation) or the spoken language
    double      duration = 0;
    bool        segments = true, words = false; // verbose_json's granularities
};

struct ResponseBody {
    std::string content, content_type;
};

// The body a response of SHAPE carries for OUT (the streamed `transcript.formats` event carries the same
// bytes as the plain responses).
ResponseBody response_body(const ServerState & st, const Output & out, const ResponseShape & shape) {
    const auto dumped = [](const json & j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
    const std::string & name = shape.format_name;
    if (name == "verbose_json") {
        // The spoken language where the model tells it (Whisper's detected one), else the one asked for.
        const std::string & language = !shape.translate && !out.language.empty() ? out.language : shape.language;
        return {dumped(verbose_json(out, shape.translate ? "translate" : "transcribe", language, shape.duration,
                                    shape.segments, shape.words)),
                "application/json"};
    }
    if (name == "diarized_json") {
        return {dumped(diarized_json(out, shape.duration)), "application/json"};
    }
    if (name == "text") {
        return {render(out, Format::Txt, nullptr, st.info.name), "text/plain; charset=utf-8"};
    }
    if (name == "srt" || name == "vtt") {
        // Subtitles follow words where the model gives them (cues of at most ~7 s / 42 characters).
        const Timestamps cues = st.info.word_timestamps ? Timestamps::Word : Timestamps::Segment;
        return {render(out, name == "srt" ? Format::Srt : Format::Vtt, nullptr, st.info.name, cues),
                name == "srt" ? "application/x-subrip; charset=utf-8" : "text/vtt; charset=utf-8"};
    }
    return {dumped({{"text", out.text}}), "application/json"};
}

// OpenAI's streaming transcription: a text/event-stream of transcript.text.delta events as tokens are
// decoded, then one transcript.text.done with the text, and the stream ends. The run happens while
// the response is written (the HTTP layer calls the stream after the handler returns), so the lease and
// the audio move into it. The run goes on a thread of its own (with a shared session its tokens come from
// the batch's thread) and this one writes what it has made, so a slow client never holds up the
// decoding; a client that goes away stops the run.
void stream_transcription(ServerState & st, HttpResponse & res, SessionPool::Lease lease,
                          const transcribe_audio & audio, const RunRequest & request, std::vector<ResponseShape> formats) {
    struct Job {
        Job(SessionPool::Lease l, const transcribe_audio & a, RunRequest r, std::vector<ResponseShape> f)
            : lease(std::move(l)), audio(a), request(std::move(r)), formats(std::move(f)) {}
        Job(const Job &) = delete;
        ~Job() { transcribe_audio_free(&audio); }
        SessionPool::Lease         lease;
        transcribe_audio           audio;
        RunRequest                 request;
        std::vector<ResponseShape> formats;
    };
    auto job = std::make_shared<Job>(std::move(lease), audio, request, std::move(formats));
    res.set_header("Cache-Control", "no-cache");
    res.content_type = "text/event-stream";
    res.stream = [job, &st](ChunkSink & sink) {
        struct Events {
            std::mutex              mutex;
            std::condition_variable cv;
            std::string             pending; // SSE bytes not yet written
            TextStream              text;
            bool                    finished = false;
            std::atomic<bool>       gone {false};
        } ev;
        note_audio_seconds(double(job->audio.n_samples) / st.info.sample_rate);
        transcribe_run_params rp = run_params(st, job->request);
        rp.token_user_data = &ev;
        rp.token_callback  = [](int32_t, const char * bytes, size_t n, void * user) {
            Events & e = *static_cast<Events *>(user);
            std::lock_guard<std::mutex> lock(e.mutex);
            const std::string delta = e.text.push(bytes, n);
            if (!delta.empty()) {
                e.pending += sse_event({{"type", "transcript.text.delta"}, {"delta", delta}});
                e.cv.notify_one();
            }
        };
        transcribe_result * result = nullptr;
        transcribe_status   status = TRANSCRIBE_OK;
        std::string         why;
        std::thread runner([&] {
            status = job->lease.run(job->audio.samples, job->audio.n_samples, rp, [&ev] { return ev.gone.load(); }, &result);
            why = transcribe_last_error(); // this thread's
            std::lock_guard<std::mutex> lock(ev.mutex);
            ev.finished = true;
            ev.cv.notify_one();
        });
        for (bool finished = false; !finished;) {
            std::string out;
            {
                std::unique_lock<std::mutex> lock(ev.mutex);
                ev.cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return ev.finished || !ev.pending.empty(); });
                out.swap(ev.pending);
                finished = ev.finished;
            }
            if (!ev.gone && ((!out.empty() && !sink.write(out)) || !sink.open())) {
                ev.gone = true;
            }
        }
        runner.join();
        std::string e;
        if (status == TRANSCRIBE_OK || status == TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {
            const Output out = output_from_result(result);
            if (job->request.diarize) { // diarized_json: every speaker segment once the transcript is whole
                for (const json & seg : diarized_segments(out)) {
                    e += sse_event(seg);
                }
            }
            // Our extension (`formats`): the transcript in each format asked for, as the plain responses
            // would carry it, so a client (the web page) gets every download from one decode.
            if (!job->formats.empty()) {
                json bodies = json::object();
                for (ResponseShape shape : job->formats) {
                    shape.duration = double(job->audio.n_samples) / st.info.sample_rate;
                    bodies[shape.format_name] = response_body(st, out, shape).content;
                }
                e += sse_event({{"type", "transcript.formats"}, {"formats", bodies}});
            }
            e += sse_event({{"type", "transcript.text.done"}, {"text", trimmed(transcribe_result_text(result))}});
            ++st.served;
        } else {
            st.aborted += status == TRANSCRIBE_ERR_ABORTED;
            e = sse_event({{"type", "error"},
                           {"error", {{"message", std::string(transcribe_status_string(status)) + ": " + why},
                                      {"type", "server_error"}}}});
        }
        transcribe_result_free(result);
        sink.write(e);
    };
}

// A request's form refused: the status, OpenAI's message and the field at fault.
struct RequestError : std::runtime_error {
    RequestError(int s, const std::string & message, const char * p = nullptr) : std::runtime_error(message), status(s), param(p) {}
    int          status;
    const char * param;
};

// What a transcription request asks for, read from its form before any audio is decoded.
struct TranscriptionRequest {
    RunRequest                 run;
    ResponseShape              shape;
    bool                       stream = false;
    std::vector<ResponseShape> extra_formats; // our `formats`: streamed at the end in each of these
};

// The form's fields checked against the model and the server (RequestError for the first that is wrong).
TranscriptionRequest parse_transcription_request(const ServerState & st, const Form & form, bool translate) {
    if (form.find("file") == form.end()) {
        throw RequestError(400, "missing form field 'file'", "file");
    }
    const std::string format_name = form_field(form, "response_format", "json");
    const bool verbose = format_name == "verbose_json", diarized = format_name == "diarized_json";
    Format format = Format::Json;
    if (!verbose && !diarized && format_name != "text" && !parse_format(format_name, &format)) {
        throw RequestError(400,
                           "unsupported response_format '" + format_name + "' (json, text, srt, vtt, verbose_json, diarized_json)",
                           "response_format");
    }
    if (diarized && (translate || !st.diarizer)) {
        throw RequestError(400,
                           translate ? std::string("diarized_json is a transcription format (not for translations)")
                                     : "diarized_json needs a diarizer: start the server with --diarize SORTFORMER.gguf",
                           "response_format");
    }
    if (!form_values(form, "known_speaker_names").empty() || !form_values(form, "known_speaker_references").empty()) {
        throw RequestError(400, "known speakers are not supported: speakers are labelled A, B, ... in order of arrival",
                           "known_speaker_names");
    }
    bool want_words = false, want_segments = true;
    const std::vector<std::string> granularities = form_values(form, "timestamp_granularities");
    if (!granularities.empty()) {
        want_segments = false;
        for (const std::string & g : granularities) {
            if (g != "word" && g != "segment") {
                throw RequestError(400, "unsupported timestamp granularity '" + g + "' (word, segment)",
                                   "timestamp_granularities");
            }
            want_words    = want_words || g == "word";
            want_segments = want_segments || g == "segment";
        }
        if (!verbose && form_values(form, "formats").empty()) {
            throw RequestError(400, "timestamp_granularities needs response_format verbose_json (or formats)",
                               "timestamp_granularities");
        }
        if (want_words && !st.info.word_timestamps && !st.info.timestamp_prompt) {
            throw RequestError(400, std::string("model ") + st.info.name + " gives no word timestamps",
                               "timestamp_granularities");
        }
    }
    const bool stream = form_field(form, "stream", "false") == "true";
    // Our extension: with stream=true, formats=a,b,... (response formats) adds one transcript.formats event
    // at the end holding the transcript in each, shaped by timestamp_granularities as verbose_json would be.
    std::vector<std::string> extra_formats;
    for (const std::string & listed : form_values(form, "formats")) {
        for (size_t at = 0; at <= listed.size();) {
            const size_t end = std::min(listed.find(',', at), listed.size());
            std::string name = trimmed(listed.substr(at, end - at));
            if (!name.empty()) {
                Format ignored;
                if (name != "text" && name != "verbose_json" && name != "diarized_json" && !parse_format(name, &ignored)) {
                    throw RequestError(400,
                                       "unsupported format '" + name + "' in formats (json, text, srt, vtt, verbose_json, diarized_json)",
                                       "formats");
                }
                if (name == "diarized_json" && !diarized) {
                    throw RequestError(400, "formats: diarized_json comes with response_format diarized_json", "formats");
                }
                extra_formats.push_back(name);
            }
            at = end + 1;
        }
    }
    if (!extra_formats.empty() && !stream) {
        throw RequestError(400, "formats is for stream: true (the plain response is one format)", "formats");
    }
    if (stream && (verbose || (!granularities.empty() && extra_formats.empty()) ||
                   (format_name != "json" && format_name != "text" && !diarized))) {
        throw RequestError(400,
                           "stream: true takes response_format json, text or diarized_json (and timestamp_granularities only "
                           "with formats)",
                           "stream");
    }
    RunRequest request;
    request.language = form_field(form, "language", "");
    request.target_language = translate ? form_field(form, "target_language", "en") : "";
    request.timestamps      = want_words && st.info.timestamp_prompt;
    request.diarize         = diarized;
    // Our extension: beam_size=N (models with beam search).
    const std::string beam = form_field(form, "beam_size", "0");
    if (beam.empty() || beam.size() > 2 || beam.find_first_not_of("0123456789") != std::string::npos || std::stoi(beam) > 8) {
        throw RequestError(400, "beam_size must be a whole number from 0 to 8 (got '" + beam + "')", "beam_size");
    }
    request.beam_size = std::stoi(beam);
    // Our extension: decoder_type=tdt|rnnt|ctc picks a hybrid Parakeet's head (NeMo's decoder_type).
    const std::string decoder = form_field(form, "decoder_type", "");
    if (!decoder_type_from_name(decoder, &request.decoder_type)) {
        throw RequestError(400, "decoder_type must be tdt, rnnt or ctc (got '" + decoder + "')", "decoder_type");
    }
    // Our extension: hotwords=a,b,c (or one phrase a line) and hotword_weight=W boost phrases (Parakeet).
    for (char c : form_field(form, "hotwords", "")) {
        request.hotwords += c == ',' ? '\n' : c;
    }
    const std::string weight = form_field(form, "hotword_weight", "1");
    char * weight_end = nullptr;
    request.hotword_weight = std::strtof(weight.c_str(), &weight_end);
    if (weight.empty() || *weight_end != '\0' || !(request.hotword_weight >= 0.0f && request.hotword_weight <= 100.0f)) {
        throw RequestError(400, "hotword_weight must be a number from 0 to 100 (got '" + weight + "')", "hotword_weight");
    }
    if (!request.hotwords.empty() && !st.info.hotwords) {
        throw RequestError(400, "hotwords: this model does not take them (Parakeet and Qwen3-ASR models do)", "hotwords");
    }
    // OpenAI's chunking_strategy: "auto" (the server's VAD where it has one) or {"type": "server_vad",
    // "threshold", "prefix_padding_ms", "silence_duration_ms"}: the speech regions' threshold, the padding
    // each gets and the silence that ends one (Silero's min_silence_duration_ms).
    const std::string chunking = form_field(form, "chunking_strategy", "");
    if (!chunking.empty() && chunking != "auto") {
        const json c = json::parse(chunking, nullptr, false);
        if (c.is_discarded() || !c.is_object() || c.value("type", "") != "server_vad") {
            throw RequestError(400, "chunking_strategy must be \"auto\" or a server_vad object (got '" + chunking + "')",
                               "chunking_strategy");
        }
        if (!st.vad) {
            throw RequestError(400, "chunking_strategy server_vad needs the server started with --vad SILERO.gguf",
                               "chunking_strategy");
        }
        request.speech_set = true;
        request.speech     = st.vad_params;
        const auto number = [&](const char * key, double lo, double hi, double * out) {
            if (!c.contains(key)) {
                return;
            }
            if (!c[key].is_number() || !(c[key].get<double>() >= lo && c[key].get<double>() <= hi)) {
                throw RequestError(400, std::string("chunking_strategy.") + key + " must be a number from " +
                                            std::to_string(int(lo)) + " to " + std::to_string(int(hi)),
                                   "chunking_strategy");
            }
            *out = c[key].get<double>();
        };
        double threshold = request.speech.threshold, pad = request.speech.speech_pad_ms,
               silence = request.speech.min_silence_ms;
        number("threshold", 0, 1, &threshold);
        number("prefix_padding_ms", 0, 10000, &pad);
        number("silence_duration_ms", 0, 10000, &silence);
        request.speech.threshold      = float(threshold);
        request.speech.speech_pad_ms  = int(pad);
        request.speech.min_silence_ms = int(silence);
    }
    // Our extension: draft=false decodes without the server's draft model (the same ids, at plain speed).
    const std::string draft = form_field(form, "draft", "true");
    if (draft != "true" && draft != "false") {
        throw RequestError(400, "draft must be true or false (got '" + draft + "')", "draft");
    }
    request.draft = draft == "true";
    // `model` is accepted for compatibility: the loaded model answers every request. `prompt` is context
    // for a model with a text prompt, and ignored by the others (see RunRequest).
    request.prompt = form_field(form, "prompt", "");
    // Our extension: without_timestamps=true decodes without timestamp tokens (Whisper's without_timestamps).
    const std::string no_ts = form_field(form, "without_timestamps", "false");
    if (no_ts != "true" && no_ts != "false") {
        throw RequestError(400, "without_timestamps must be true or false (got '" + no_ts + "')", "without_timestamps");
    }
    request.no_timestamps = no_ts == "true";
    // OpenAI's temperature (Whisper): one value decodes at it alone; ours, a comma-separated list, is the
    // sequence the fallback tries (OpenAI's 0 climbs on its own; here a fixed value stays, so results repeat).
    request.temperatures.clear();
    std::string list = form_field(form, "temperature", "0");
    for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        char * end = nullptr;
        const float t = std::strtof(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !(t >= 0.0f && t <= 1.0f) || request.temperatures.size() >= 16) {
            throw RequestError(400, "temperature must be a number from 0 to 1, or a comma-separated list of them (got '" +
                                        list + "')", "temperature");
        }
        request.temperatures.push_back(t);
        at = comma + 1;
    }

    TranscriptionRequest out;
    ResponseShape & shape = out.shape;
    shape.format_name = format_name;
    shape.translate   = translate;
    shape.language    = translate ? request.target_language
                                  : !request.language.empty() ? request.language : st.info.n_languages ? st.info.languages[0] : "en";
    shape.segments    = want_segments;
    shape.words       = want_words;
    for (const std::string & name : extra_formats) {
        out.extra_formats.push_back(shape);
        out.extra_formats.back().format_name = name;
    }
    out.run    = std::move(request);
    out.stream = stream;
    return out;
}

} // namespace

// /v1/audio/transcriptions, or with TRANSLATE /v1/audio/translations (into English, OpenAI's route, or the
// language a `target_language` field names): the form read, the audio decoded, the run, the response.
void handle_transcription(ServerState & st, const HttpRequest & http, HttpResponse & res, bool translate) {
    const std::string boundary = form_boundary(http.header("content-type"));
    if (boundary.empty()) {
        send_error(res, 415, "Content-Type must be multipart/form-data with a boundary (got '" + http.header("content-type") + "')");
        return;
    }
    Form form;
    if (!parse_form(http.body, boundary, &form)) {
        send_error(res, 400, "malformed multipart/form-data body");
        return;
    }
    TranscriptionRequest parsed;
    try {
        parsed = parse_transcription_request(st, form, translate);
    } catch (const RequestError & e) {
        send_error(res, e.status, e.what(), e.param);
        return;
    }
    const RunRequest & request = parsed.run;

    // A session first (503 without decoding anything when the queue is full), then the audio, decoded
    // under the duration limit and stopped when the client goes away.
    SessionPool::Lease lease = st.pool->acquire();
    if (!lease) {
        send_error(res, 503, "server busy: too many requests are waiting, retry later");
        return;
    }
    ConnectionWatch watch(http.fd);
    const std::string & bytes = form.find("file")->second.content;
    transcribe_audio audio {};
    transcribe_audio_limits limits {st.max_audio_s, [](void * w) { return static_cast<ConnectionWatch *>(w)->closed(); },
                                    &watch};
    const transcribe_status decoded =
        transcribe_audio_load_memory_limited(bytes.data(), bytes.size(), st.info.sample_rate, &limits, &audio);
    if (decoded == TRANSCRIBE_ERR_INPUT_TOO_LONG) {
        send_error(res, 413, transcribe_last_error(), "file");
        return;
    }
    if (decoded != TRANSCRIBE_OK) {
        send_error(res, 400, unsupported_container(bytes) + "could not decode the uploaded audio: " + transcribe_last_error() +
                                 " (supported: wav, flac, ogg (vorbis, opus), mp3 and the other formats libsndfile reads)",
                   "file");
        return;
    }
    if (parsed.stream) {
        stream_transcription(st, res, std::move(lease), audio, request, std::move(parsed.extra_formats));
        return;
    }
    transcribe_result * result = nullptr;
    const transcribe_status status =
        lease.run(audio.samples, audio.n_samples, run_params(st, request), [&watch] { return watch.closed(); }, &result);
    const double duration = double(audio.n_samples) / st.info.sample_rate;
    note_audio_seconds(duration);
    transcribe_audio_free(&audio);
    if (status == TRANSCRIBE_ERR_ABORTED) {
        ++st.aborted;
    }
    if (status != TRANSCRIBE_OK && status != TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {
        const std::string why = transcribe_last_error();
        const bool client_side = status == TRANSCRIBE_ERR_INVALID_ARG || status == TRANSCRIBE_ERR_AUDIO_DECODE ||
                                 status == TRANSCRIBE_ERR_INPUT_TOO_LONG || status == TRANSCRIBE_ERR_ABORTED;
        send_error(res, client_side ? 400 : 500, std::string(transcribe_status_string(status)) + ": " + why);
        return;
    }
    const Output out = output_from_result(result);
    transcribe_result_free(result);
    ++st.served;
    parsed.shape.duration = duration;
    ResponseBody body = response_body(st, out, parsed.shape);
    res.set_content(std::move(body.content), body.content_type);
}

} // namespace transcribe_server
