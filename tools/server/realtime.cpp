// OpenAI's Realtime API, transcription sessions (GET /v1/realtime?intent=transcription, a WebSocket):
// the client appends base64 PCM16 audio; turns come from the server's Silero VAD (server_vad) or the
// client's commits; each turn's transcript is what the REST route gives for the turn's samples, with
// deltas while the turn is still spoken (a transcribe_stream, engine/live_stream.h). A model that
// transcribes as it hears (NeMo's cache-aware streaming models) runs natively instead, on a session of
// the connection's own: a delta per step, nothing re-decoded, and for an end-of-utterance model OpenAI's
// semantic_vad (a turn ends where the model says <EOU>). Events follow the
// `openai` npm package's resources/realtime types (the GA shapes; the beta transcription_session.update
// is answered too). A bad event gets an `error` event and the session goes on.
#include "server.h"

#include "openai_formats.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace transcribe_server {

namespace {

// RFC 4648 base64 (padding optional at the end, nothing else skipped); false for anything else.
bool base64_decode(const std::string & in, std::string * out) {
    static const auto table = [] {
        std::array<int8_t, 256> t {};
        t.fill(-1);
        const char * alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; ++i) {
            t[size_t(uint8_t(alphabet[i]))] = int8_t(i);
        }
        return t;
    }();
    size_t n = in.size();
    while (n > 0 && in[n - 1] == '=' && in.size() - n < 2) {
        --n;
    }
    if (n % 4 == 1 || (in.size() != n && in.size() % 4 != 0)) {
        return false;
    }
    out->clear();
    out->reserve(n / 4 * 3 + 2);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; ++i) {
        const int8_t v = table[size_t(uint8_t(in[i]))];
        if (v < 0) {
            return false;
        }
        acc = (acc << 6) | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out->push_back(char((acc >> bits) & 0xff));
        }
    }
    return true;
}

struct Settings {
    int         rate = 24000; // OpenAI's audio/pcm; 16000 is ours
    bool        server_vad = true;
    bool        semantic_vad = false; // turns end at the model's end-of-utterance token
    float       threshold = 0.5f;
    int         prefix_padding_ms = 300, silence_duration_ms = 500;
    std::string language;
    std::string prompt; // as the REST route's (RunRequest::prompt)
};

// The connection's thread reads events, pushes audio and writes every event out; a decoder thread of
// the session's transcribes what is due (with a session of the pool's), so turn edges keep being found
// while a turn is transcribed, and wakes the reader when it has events to send.
class RealtimeSession {
public:
    RealtimeSession(ServerState & st, WebSocketChannel & channel, long serial)
        : st_(st), channel_(channel), id_("sess_" + std::to_string(serial)) {}
    ~RealtimeSession() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        cv_.notify_all();
        if (decoder_.joinable()) {
            decoder_.join();
        }
        transcribe_stream_free(stream_);
        transcribe_session_free(own_session_);
    }

    void run() {
        if (native() && transcribe_session_create(st_.model, &st_.session_params, &own_session_) != TRANSCRIBE_OK) {
            error("server_error", std::string("cannot create a session: ") + transcribe_last_error(), nullptr, "");
            return;
        }
        if (!restart(Settings {}, nullptr)) {
            settings_.server_vad   = false; // no VAD loaded: the model's own turns, or commits only
            settings_.semantic_vad = st_.info.end_of_turn_token >= 0 && native();
            restart(settings_, nullptr);
        }
        send({{"type", "session.created"}, {"session", session_json()}});
        decoder_ = std::thread([this] { decode_loop(); });
        for (std::string message;;) {
            const WebSocketChannel::Read r = channel_.read(message);
            if (r == WebSocketChannel::Read::Closed) {
                return;
            }
            if (r == WebSocketChannel::Read::Oversized) {
                error("message_too_large", "event larger than the server's limit: skipped", nullptr, "");
            } else if (r == WebSocketChannel::Read::Message) {
                on_message(message);
            }
            flush();
        }
    }

private:
    bool native() const { return st_.info.native_streaming; }

    bool send(json event) {
        event["event_id"] = "event_" + std::to_string(++events_);
        // event_id first, as OpenAI's events have it
        json ordered = {{"event_id", event["event_id"]}};
        for (auto it = event.begin(); it != event.end(); ++it) {
            if (it.key() != "event_id") {
                ordered[it.key()] = it.value();
            }
        }
        return channel_.write(ordered.dump(-1, ' ', false, json::error_handler_t::replace));
    }

    void error(const char * code, const std::string & message, const char * param, const std::string & client_event) {
        json e = {{"type", "invalid_request_error"}, {"code", code}, {"message", message},
                  {"param", param ? json(param) : json(nullptr)},
                  {"event_id", client_event.empty() ? json(nullptr) : json(client_event)}};
        send({{"type", "error"}, {"error", e}});
    }

    json session_json() const {
        json turn = nullptr;
        if (settings_.semantic_vad) {
            turn = {{"type", "semantic_vad"}, {"eagerness", "auto"}};
        } else if (settings_.server_vad) {
            turn = {{"type", "server_vad"}, {"threshold", settings_.threshold},
                    {"prefix_padding_ms", settings_.prefix_padding_ms}, {"silence_duration_ms", settings_.silence_duration_ms}};
        }
        json transcription = {{"model", st_.info.name}};
        transcription["language"] = settings_.language.empty() ? json(nullptr) : json(settings_.language);
        transcription["prompt"]   = settings_.prompt;
        return {{"type", "transcription"},
                {"id", id_},
                {"object", "realtime.transcription_session"},
                {"audio", {{"input", {{"format", {{"type", "audio/pcm"}, {"rate", settings_.rate}}},
                                      {"transcription", transcription},
                                      {"noise_reduction", nullptr},
                                      {"turn_detection", turn}}}}}};
    }

    // A new stream for new settings (the audio so far keeps its place in the session's time line).
    bool restart(const Settings & s, std::string * why) {
        transcribe_stream_params p = transcribe_stream_params_init();
        p.sample_rate         = s.rate;
        p.turn_detection      = s.server_vad;
        p.threshold           = s.threshold;
        p.prefix_padding_ms   = s.prefix_padding_ms;
        p.silence_duration_ms = s.silence_duration_ms;
        p.end_of_turn         = s.semantic_vad;
        if (s.server_vad && !st_.vad) {
            if (why) {
                *why = "server_vad needs the server started with --vad SILERO.gguf (or turn_detection: null)";
            }
            return false;
        }
        transcribe_stream * stream = nullptr;
        RunRequest          defaults;
        const transcribe_run_params rp = run_params(st_, defaults);
        if ((native() ? transcribe_stream_create_native(own_session_, st_.vad, &p, &rp, &stream)
                      : transcribe_stream_create(st_.vad, &p, &stream)) != TRANSCRIBE_OK) {
            if (why) {
                *why = transcribe_last_error();
            }
            return false;
        }
        {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [&] { return !decoding_; });
            swapping_ = true; // the decoder keeps off the stream until it is swapped
        }
        if (stream_) { // the old stream's ended turns are finished first, in its time line
            RunRequest request;
            request.language = settings_.language;
            request.prompt   = settings_.prompt;
            bool busy = false;
            const std::string failure = decode(stream_, request, &busy);
            if (!failure.empty() || busy) {
                error(busy ? "server_busy" : "transcription_failed", busy ? "server busy: a turn was dropped" : failure, nullptr, "");
            }
        }
        flush();
        std::lock_guard<std::mutex> lock(mutex_);
        swapping_ = false;
        if (stream_) {
            offset_ms_ += pushed_ms_;
            item_base_ = next_item_;
            transcribe_stream_free(stream_);
        }
        stream_    = stream;
        pushed_ms_ = pushed_samples_ = 0;
        settings_  = s;
        return true;
    }

    std::string item_id(int64_t item) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "item_%s_%04lld", id_.c_str() + 5, (long long) (item_base_ + item));
        next_item_ = std::max(next_item_, item_base_ + item + 1);
        return buf;
    }

    // SESSION's changes on top of the current settings (GA shape, or the beta one where BETA).
    bool apply(const json & session, bool beta, const std::string & client_event) {
        Settings s = settings_;
        const json * input = nullptr;
        if (!session.is_object()) {
            error("invalid_value", "session must be an object", "session", client_event);
            return false;
        }
        if (beta) {
            input = &session;
            if (session.contains("input_audio_format")) {
                if (session["input_audio_format"] != "pcm16") {
                    error("invalid_value", "input_audio_format: only pcm16 is supported", "session.input_audio_format", client_event);
                    return false;
                }
                s.rate = 24000;
            }
        } else {
            if (session.contains("type") && session["type"] != "transcription") {
                error("invalid_value", "this is a transcription session (session.type 'transcription')", "session.type", client_event);
                return false;
            }
            if (session.contains("audio") && session["audio"].is_object() && session["audio"].contains("input")) {
                input = &session["audio"]["input"];
            }
            if (input && input->is_object() && input->contains("format") && !(*input)["format"].is_null()) {
                const json & f = (*input)["format"];
                const int rate = f.is_object() && f.contains("rate") && f["rate"].is_number_integer() ? f["rate"].get<int>() : 24000;
                if (!f.is_object() || f.value("type", "audio/pcm") != "audio/pcm" || (rate != 24000 && rate != 16000)) {
                    error("invalid_value", "audio format: audio/pcm at 24000 Hz (or 16000) is supported", "session.audio.input.format", client_event);
                    return false;
                }
                s.rate = rate;
            }
        }
        if (input && input->is_object()) {
            const char * transcription_key = beta ? "input_audio_transcription" : "transcription";
            if (input->contains(transcription_key) && (*input)[transcription_key].is_object()) {
                const json & t = (*input)[transcription_key];
                if (t.contains("language") && !t["language"].is_null()) {
                    const std::string lang = t["language"].is_string() ? t["language"].get<std::string>() : "";
                    bool known = st_.info.n_languages == 0 && lang == "en";
                    for (int i = 0; i < st_.info.n_languages; ++i) {
                        known = known || lang == st_.info.languages[i];
                    }
                    if (!known) {
                        error("invalid_value", "language '" + lang + "' is not one the model transcribes", "session.audio.input.transcription.language", client_event);
                        return false;
                    }
                    s.language = lang;
                }
                if (t.contains("prompt") && !t["prompt"].is_null()) {
                    if (!t["prompt"].is_string()) {
                        error("invalid_value", "prompt must be a string", "session.audio.input.transcription.prompt", client_event);
                        return false;
                    }
                    s.prompt = t["prompt"].get<std::string>();
                }
            }
            if (input->contains("turn_detection")) {
                const json & td = (*input)["turn_detection"];
                const std::string kind = td.is_object() ? td.value("type", "server_vad") : "";
                const bool semantic_ok = native() && st_.info.end_of_turn_token >= 0;
                if (td.is_null()) {
                    s.server_vad = s.semantic_vad = false;
                } else if (kind == "semantic_vad" && semantic_ok) {
                    s.server_vad   = false;
                    s.semantic_vad = true;
                } else if (kind == "semantic_vad") {
                    error("invalid_value", "turn_detection: semantic_vad needs a model that says where an utterance ends "
                          "(an end-of-utterance streaming model); this one takes server_vad or null",
                          "session.audio.input.turn_detection", client_event);
                    return false;
                } else if (kind != "server_vad") {
                    error("invalid_value", std::string("turn_detection: server_vad") + (semantic_ok ? ", semantic_vad" : "") +
                          " or null is supported", "session.audio.input.turn_detection", client_event);
                    return false;
                } else {
                    s.server_vad   = true;
                    s.semantic_vad = false;
                    if (td.contains("threshold") && td["threshold"].is_number()) {
                        s.threshold = td["threshold"].get<float>();
                    }
                    if (td.contains("prefix_padding_ms") && td["prefix_padding_ms"].is_number_integer()) {
                        s.prefix_padding_ms = td["prefix_padding_ms"].get<int>();
                    }
                    if (td.contains("silence_duration_ms") && td["silence_duration_ms"].is_number_integer()) {
                        s.silence_duration_ms = td["silence_duration_ms"].get<int>();
                    }
                }
            }
        }
        std::string why;
        if (!restart(s, &why)) {
            error("invalid_value", why, "session", client_event);
            return false;
        }
        return true;
    }

    void on_message(const std::string & message) {
        const json e = json::parse(message, nullptr, false);
        if (e.is_discarded() || !e.is_object()) {
            error("invalid_json", "the event is not a JSON object", nullptr, "");
            return;
        }
        const std::string client_event = e.contains("event_id") && e["event_id"].is_string() ? e["event_id"].get<std::string>() : "";
        const std::string type = e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
        if (type == "session.update" || type == "transcription_session.update") {
            const bool beta = type != "session.update";
            if (apply(e.contains("session") ? e["session"] : json::object(), beta, client_event)) {
                json s = session_json();
                send({{"type", beta ? "transcription_session.updated" : "session.updated"}, {"session", s}});
            }
        } else if (type == "input_audio_buffer.append") {
            std::string bytes;
            if (!e.contains("audio") || !e["audio"].is_string() || !base64_decode(e["audio"].get<std::string>(), &bytes)) {
                error("invalid_base64", "audio must be base64-encoded PCM16", "audio", client_event);
                return;
            }
            if (bytes.size() % 2 != 0) {
                error("invalid_value", "audio must be whole 16-bit little-endian samples (an even number of bytes)", "audio", client_event);
                return;
            }
            std::vector<float> pcm(bytes.size() / 2);
            for (size_t i = 0; i < pcm.size(); ++i) {
                const auto lo = uint8_t(bytes[2 * i]), hi = uint8_t(bytes[2 * i + 1]);
                pcm[i] = float(int16_t(uint16_t(lo | (hi << 8)))) / 32768.0f;
            }
            if (transcribe_stream_push(stream_, pcm.data(), pcm.size()) != TRANSCRIBE_OK) {
                error("invalid_value", transcribe_last_error(), "audio", client_event);
                return;
            }
            pushed_samples_ += int64_t(pcm.size());
            pushed_ms_ = pushed_samples_ * 1000 / settings_.rate;
            request_decode();
        } else if (type == "input_audio_buffer.commit") {
            if (transcribe_stream_commit(stream_) != TRANSCRIBE_OK) {
                error("input_audio_buffer_commit_empty", std::string("cannot commit: ") + transcribe_last_error(), nullptr, client_event);
                return;
            }
            request_decode();
        } else if (type == "input_audio_buffer.clear") {
            transcribe_stream_clear(stream_);
            send({{"type", "input_audio_buffer.cleared"}});
        } else if (type.empty()) {
            error("missing_type", "the event has no type", "type", client_event);
        } else {
            error("unknown_event", "unsupported event type '" + type +
                                       "' (session.update, transcription_session.update, input_audio_buffer.append, "
                                       ".commit, .clear)",
                  "type", client_event);
        }
    }

    // The decoder thread is told when the stream has work (it checks again before taking a session).
    void request_decode() {
        if (transcribe_stream_decode_due(stream_)) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                wanted_ = true;
            }
            cv_.notify_all();
        }
    }

    // What STREAM has due, on a session of the pool's: a failure's message, or "" (BUSY: no session for a
    // turn). Ended turns wait for a place; a partial transcript only takes one that nobody waits for, so
    // under load the sessions' turns come first and partials thin out.
    std::string decode(transcribe_stream * stream, const RunRequest & request, bool * busy) {
        *busy = false;
        if (!transcribe_stream_decode_due(stream)) {
            return "";
        }
        if (native()) { // the connection's own session: no place to wait for
            if (transcribe_stream_decode(stream, nullptr, nullptr, nullptr) != TRANSCRIBE_OK && !stopping_) {
                return std::string("transcription failed: ") + transcribe_last_error();
            }
            return "";
        }
        const bool turns = transcribe_stream_turns_waiting(stream) > 0;
        SessionPool::Lease lease = turns ? st_.pool->acquire() : st_.pool->try_acquire();
        if (!lease) {
            *busy = turns;
            return "";
        }
        transcribe_run_params rp = run_params(st_, request);
        rp.aligner = nullptr; // a realtime transcript carries no word times
        const transcribe_status s = lease.decode(stream, rp, [this] { return stopping_.load(); });
        if (s != TRANSCRIBE_OK && s != TRANSCRIBE_ERR_OUTPUT_TRUNCATED && !stopping_) {
            return std::string(transcribe_status_string(s)) + ": " + transcribe_last_error();
        }
        return "";
    }

    void decode_loop() {
        std::unique_lock<std::mutex> lock(mutex_);
        bool busy_told = false;
        for (;;) {
            cv_.wait(lock, [&] { return stopping_ || (wanted_ && !swapping_); });
            if (stopping_) {
                return;
            }
            wanted_  = false;
            decoding_ = true; // the stream stays while this holds (restart() waits)
            transcribe_stream * stream = stream_;
            RunRequest request;
            request.language = settings_.language;
            request.prompt   = settings_.prompt;
            lock.unlock();
            bool              busy    = false;
            const std::string failure = decode(stream, request, &busy);
            lock.lock();
            decoding_ = false;
            if (!failure.empty()) {
                failures_.push_back({"transcription_failed", failure});
            }
            if (busy && !busy_told) {
                failures_.push_back({"server_busy", "server busy: transcription postponed"});
            }
            busy_told = busy;
            cv_.notify_all();
            channel_.wake();
            if (busy) { // try again shortly
                cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_.load(); });
                wanted_ = true;
            }
        }
    }

    // Sends the stream's events (and the decoder's errors) that are waiting.
    void flush() {
        std::vector<std::pair<const char *, std::string>> failures;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            failures.swap(failures_);
        }
        for (const auto & [code, message] : failures) {
            error(code, message, nullptr, "");
        }
        if (!stream_) {
            return;
        }
        transcribe_stream_event ev;
        while (transcribe_stream_next_event(stream_, &ev)) {
            const std::string item = item_id(ev.item);
            switch (ev.type) {
            case TRANSCRIBE_STREAM_SPEECH_STARTED:
                send({{"type", "input_audio_buffer.speech_started"}, {"audio_start_ms", offset_ms_ + ev.audio_start_ms}, {"item_id", item}});
                break;
            case TRANSCRIBE_STREAM_SPEECH_STOPPED:
                send({{"type", "input_audio_buffer.speech_stopped"}, {"audio_end_ms", offset_ms_ + ev.audio_end_ms}, {"item_id", item}});
                break;
            case TRANSCRIBE_STREAM_COMMITTED:
                send({{"type", "input_audio_buffer.committed"},
                      {"previous_item_id", last_item_.empty() ? json(nullptr) : json(last_item_)}, {"item_id", item}});
                last_item_ = item;
                break;
            case TRANSCRIBE_STREAM_DELTA:
                send({{"type", "conversation.item.input_audio_transcription.delta"}, {"item_id", item}, {"content_index", 0},
                      {"delta", ev.text}});
                break;
            case TRANSCRIBE_STREAM_COMPLETED:
                ++st_.served;
                send({{"type", "conversation.item.input_audio_transcription.completed"}, {"item_id", item},
                      {"content_index", 0}, {"transcript", trimmed(ev.text)},
                      {"usage", {{"type", "duration"}, {"seconds", double(ev.audio_end_ms - ev.audio_start_ms) / 1000.0}}}});
                break;
            }
        }
    }

    ServerState &       st_;
    WebSocketChannel &  channel_;
    std::string         id_;
    Settings            settings_;
    transcribe_stream * stream_ = nullptr;
    transcribe_session * own_session_ = nullptr; // a natively streaming model's, the connection's alone
    int64_t             offset_ms_ = 0, pushed_ms_ = 0, pushed_samples_ = 0, item_base_ = 0, next_item_ = 0;
    long                events_ = 0;
    std::string         last_item_;

    // Shared with the decoder thread.
    std::thread                                       decoder_;
    std::mutex                                        mutex_;
    std::condition_variable                           cv_;
    std::atomic<bool>                                 stopping_ {false};
    bool                                              wanted_ = false, decoding_ = false, swapping_ = false;
    std::vector<std::pair<const char *, std::string>> failures_;
};

} // namespace

void handle_realtime(ServerState & st, const HttpRequest & req, WebSocketChannel & channel) {
    static std::atomic<long> serial {0};
    const long n = ++serial;
    auto refuse = [&](const char * code, const std::string & message) {
        json e = {{"type", "error"}, {"event_id", "event_0"},
                  {"error", {{"type", "invalid_request_error"}, {"code", code}, {"message", message}, {"param", nullptr}, {"event_id", nullptr}}}};
        channel.write(e.dump());
    };
    if (req.target.find("intent=transcription") == std::string::npos) {
        refuse("unsupported_session", "only transcription sessions are served: connect to /v1/realtime?intent=transcription");
        return;
    }
    if (++st.realtime > st.max_realtime) {
        --st.realtime;
        refuse("server_busy", "too many realtime sessions at once, retry later");
        return;
    }
    note_audio_seconds(-1);
    try {
        RealtimeSession(st, channel, n).run();
    } catch (const std::exception & e) {
        refuse("server_error", std::string("internal error: ") + e.what());
    }
    --st.realtime;
}

} // namespace transcribe_server
