// transcribe-stream: live transcription of a recording played at real-time pace, or of raw s16le audio
// on stdin (a microphone: arecord -f S16_LE -r 16000 -c 1 -t raw | transcribe-stream -m M --vad V -).
// Each turn is printed once it is over; on a terminal the turn being spoken is shown as it forms, on a
// line rewritten in place. A model that transcribes as it hears (NeMo's cache-aware streaming models)
// without --vad streams the whole input through the model (native.h); with it, each turn the VAD finds.
#include "transcribe.h"

#include "../common/model_options.h"
#include "../common/task_options.h"
#include "../common/tool_errors.h"
#include "native.h"
#include "packets.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace transcribe_tools;

namespace {

int die(const std::string & message) { return tool_error("transcribe-stream", message); }
int die(transcribe_status st) { return tool_error("transcribe-stream", st); }

std::string clock_time(int64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld.%02lld", (long long) (ms / 60000), (long long) (ms / 1000 % 60),
                  (long long) (ms % 1000 / 10));
    return buf;
}

const char * event_name(transcribe_stream_event_type t) {
    switch (t) {
    case TRANSCRIBE_STREAM_SPEECH_STARTED: return "speech_started";
    case TRANSCRIBE_STREAM_SPEECH_STOPPED: return "speech_stopped";
    case TRANSCRIBE_STREAM_COMMITTED: return "committed";
    case TRANSCRIBE_STREAM_DELTA: return "delta";
    case TRANSCRIBE_STREAM_COMPLETED: return "completed";
    }
    return "?";
}

// Prints events: one JSON object a line, or the transcript (the open turn's partial line on a terminal).
class Printer {
public:
    Printer(bool json, bool terminal) : json_(json), terminal_(terminal) {}

    bool turn_open() const { return open_; }

    void print(const transcribe_stream_event & e) {
        if (e.type == TRANSCRIBE_STREAM_SPEECH_STARTED || e.type == TRANSCRIBE_STREAM_COMMITTED) {
            open_ = e.type == TRANSCRIBE_STREAM_SPEECH_STARTED;
        }
        if (json_) {
            nlohmann::json j {{"type", event_name(e.type)}, {"item", e.item}, {"audio_start_ms", e.audio_start_ms}};
            if (e.type != TRANSCRIBE_STREAM_SPEECH_STARTED) {
                j["audio_end_ms"] = e.audio_end_ms;
            }
            if (e.type == TRANSCRIBE_STREAM_DELTA || e.type == TRANSCRIBE_STREAM_COMPLETED) {
                j["text"] = e.text;
            }
            std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        } else if (e.type == TRANSCRIBE_STREAM_SPEECH_STARTED) {
            partial_.clear();
            partial_item_  = e.item;
            partial_start_ = e.audio_start_ms;
            show_partial();
        } else if (e.type == TRANSCRIBE_STREAM_DELTA) {
            partial_ += e.text;
            show_partial();
        } else if (e.type == TRANSCRIBE_STREAM_COMPLETED) {
            std::printf("%s[%s --> %s] %s\n", terminal_ ? "\r\033[K" : "", clock_time(e.audio_start_ms).c_str(),
                        clock_time(e.audio_end_ms).c_str(), e.text);
            if (e.item == partial_item_) {
                partial_.clear();
            } else if (open_) { // the next turn began while this one was transcribed
                show_partial();
            }
        }
        std::fflush(stdout);
    }

private:
    void show_partial() {
        if (terminal_) {
            std::printf("\r\033[K[%s --> ...] %s", clock_time(partial_start_).c_str(), partial_.c_str());
        }
    }

    bool        json_, terminal_, open_ = false;
    std::string partial_;
    int64_t     partial_item_ = -1, partial_start_ = 0;
};

// Transcribes what the stream has due on a thread of its own, so the audio keeps flowing into the
// stream (and turn edges keep being found) while a turn is transcribed.
class BackgroundDecoder {
public:
    BackgroundDecoder(transcribe_stream * stream, transcribe_session * session, const transcribe_run_params & rp)
        : stream_(stream), session_(session), rp_(rp), thread_([this] { loop(); }) {}
    ~BackgroundDecoder() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

    void request() {
        if (transcribe_stream_decode_due(stream_)) {
            std::lock_guard<std::mutex> lock(mutex_);
            wanted_ = true;
            cv_.notify_all();
        }
    }

    // Waits for the work asked for; the first failure (OK if none), its message in ERROR.
    transcribe_status finish(std::string * error) {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !wanted_ && !busy_; });
        *error = error_;
        return failed_;
    }

    transcribe_status failed(std::string * error) {
        std::lock_guard<std::mutex> lock(mutex_);
        *error = error_;
        return failed_;
    }

private:
    void loop() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            cv_.wait(lock, [&] { return stop_ || wanted_; });
            if (stop_) {
                return;
            }
            wanted_ = false, busy_ = true;
            lock.unlock();
            const transcribe_status s = transcribe_stream_decode(stream_, session_, nullptr, &rp_);
            const std::string message = s == TRANSCRIBE_OK ? "" : transcribe_last_error();
            lock.lock();
            busy_ = false;
            // A truncated turn's text is out (the warning logged): only a failure stops the stream.
            if (s != TRANSCRIBE_OK && s != TRANSCRIBE_ERR_OUTPUT_TRUNCATED && failed_ == TRANSCRIBE_OK) {
                failed_ = s, error_ = message;
            }
            cv_.notify_all();
        }
    }

    transcribe_stream *     stream_;
    transcribe_session *    session_;
    transcribe_run_params   rp_;
    std::mutex              mutex_;
    std::condition_variable cv_;
    bool                    wanted_ = false, busy_ = false, stop_ = false;
    transcribe_status       failed_ = TRANSCRIBE_OK;
    std::string             error_;
    std::thread             thread_; // last: it starts once the rest is set up
};

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-stream: live transcription, turn by turn, of a recording played at real-time pace or "
                  "of raw 16-bit audio on stdin"};
    ModelOptions model_options;
    model_options.add_to(app);
    TaskOptions task;
    task.add_to(app);
    std::string audio_path, vad_path;
    transcribe_stream_params sp = transcribe_stream_params_init();
    int  packet_ms = 20, raw_rate = 16000;
    bool no_pace = false, json = false;
    app.add_option("audio", audio_path, "audio file (wav, flac, ogg, mp3, ...), or - for raw s16le mono on stdin")
        ->required();
    app.add_option("--vad", vad_path,
                   "Silero VAD model (GGUF) that finds the turns (required but for a model that transcribes as it hears: "
                   "without it, that one streams the whole input, a delta a step, turns ended by its <EOU>)");
    app.add_option("--rate", raw_rate, "stdin: the raw audio's sample rate (default 16000)")->check(CLI::Range(1000, 768000));
    app.add_option("--threshold", sp.threshold, "speech at or over this probability starts a turn (default 0.5)")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--prefix-padding-ms", sp.prefix_padding_ms, "audio before the speech a turn keeps (default 300)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--silence-duration-ms", sp.silence_duration_ms, "quiet that ends a turn (default 500)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--partial-interval-ms", sp.partial_interval_ms,
                   "re-transcribe the turn being spoken at most once per this much audio (default 500; 0: never)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--packet-ms", packet_ms, "audio handed over at a time (default 20)")->check(CLI::Range(1, 10000));
    app.add_flag("--no-pace", no_pace, "a file: as fast as it decodes, not at real-time pace");
    app.add_flag("--json", json, "one JSON event a line (speech_started, speech_stopped, committed, delta, completed; "
                                 "natively: delta, completed, with the tokens)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError & e) {
        return app.exit(e);
    }
    transcribe_log_set(quiet_log, nullptr);
    if (model_options.path.empty()) {
        return die("no model given (-m MODEL.gguf)");
    }

    transcribe_model * model = nullptr;
    transcribe_status  st    = model_options.load(&model);
    if (st != TRANSCRIBE_OK) {
        return die(st);
    }
    std::unique_ptr<transcribe_model, decltype(&transcribe_model_free)> model_owner(model, transcribe_model_free);
    transcribe_model_info info {};
    transcribe_model_get_info(model, &info);
    const bool natively = vad_path.empty();
    if (natively && !info.native_streaming) {
        return die("no --vad given, and this model does not transcribe as it hears (only cache-aware streaming models "
                   "do): give a VAD model that finds the turns");
    }
    transcribe_vad_model * vad = nullptr;
    if (!natively && (st = transcribe_vad_model_load(vad_path.c_str(), &vad)) != TRANSCRIBE_OK) {
        return die(std::string("VAD model: ") + transcribe_status_string(st) + ": " + transcribe_last_error());
    }
    std::unique_ptr<transcribe_vad_model, decltype(&transcribe_vad_model_free)> vad_owner(vad, transcribe_vad_model_free);
    transcribe_session_params session_params = model_options.session_params();
    session_params.n_batch = 1;
    transcribe_session * session = nullptr;
    if ((st = transcribe_session_create(model, &session_params, &session)) != TRANSCRIBE_OK) {
        return die(st);
    }
    std::unique_ptr<transcribe_session, decltype(&transcribe_session_free)> session_owner(session, transcribe_session_free);
    transcribe_run_params rp = transcribe_run_params_init();
    task.apply(rp);

    const bool from_stdin = audio_path == "-";
    transcribe_audio audio {nullptr, 0, 0};
    if (!from_stdin) {
        if ((st = transcribe_audio_load(audio_path.c_str(), 16000, &audio)) != TRANSCRIBE_OK) {
            return die(st);
        }
    }
    std::unique_ptr<transcribe_audio, decltype(&transcribe_audio_free)> audio_owner(&audio, transcribe_audio_free);
    sp.sample_rate = from_stdin ? raw_rate : 16000;
    PacketSource packets(from_stdin ? nullptr : &audio, sp.sample_rate, packet_ms, !from_stdin && !no_pace);
    if (natively) {
        return stream_natively(model, session, rp, packets, json);
    }
    transcribe_stream * stream = nullptr;
    // A model that transcribes as it hears streams each turn the VAD finds (a delta a step).
    st = info.native_streaming ? transcribe_stream_create_native(session, vad, &sp, &rp, &stream)
                               : transcribe_stream_create(vad, &sp, &stream);
    if (st != TRANSCRIBE_OK) {
        return die(st);
    }
    std::unique_ptr<transcribe_stream, decltype(&transcribe_stream_free)> stream_owner(stream, transcribe_stream_free);

    Printer printer(json, !json && isatty(STDOUT_FILENO));
    // Live audio is transcribed beside the pushing; a file as fast as it decodes, in step with it.
    std::unique_ptr<BackgroundDecoder> background;
    if (from_stdin || !no_pace) {
        background = std::make_unique<BackgroundDecoder>(stream, session, rp);
    }
    std::string failure;
    auto print_events = [&] {
        transcribe_stream_event e;
        while (transcribe_stream_next_event(stream, &e)) {
            printer.print(e);
        }
    };
    // Decodes what is due (or has it decoded), prints what is ready; WAIT: until the decoding is done.
    auto drain = [&](bool wait) -> transcribe_status {
        transcribe_status s = TRANSCRIBE_OK;
        if (background) {
            background->request();
            s = wait ? background->finish(&failure) : background->failed(&failure);
        } else if (transcribe_stream_decode_due(stream)) {
            s = transcribe_stream_decode(stream, session, nullptr, &rp);
            failure = s == TRANSCRIBE_OK ? "" : transcribe_last_error();
        }
        print_events();
        return s == TRANSCRIBE_ERR_OUTPUT_TRUNCATED ? TRANSCRIBE_OK : s; // the turn's text is out; the warning logged
    };
    auto fail = [&](transcribe_status s) {
        return die(std::string(transcribe_status_string(s)) + ": " + failure);
    };

    std::vector<float> pcm;
    while (packets.next(pcm)) {
        if ((st = transcribe_stream_push(stream, pcm.data(), pcm.size())) != TRANSCRIBE_OK) {
            return die(st);
        }
        if ((st = drain(false)) != TRANSCRIBE_OK) {
            return fail(st);
        }
    }
    if ((st = drain(true)) != TRANSCRIBE_OK) {
        return fail(st);
    }
    // The end of the audio ends a turn still being spoken (one under 100 ms is let go).
    if (printer.turn_open() && transcribe_stream_commit(stream) == TRANSCRIBE_OK && (st = drain(true)) != TRANSCRIBE_OK) {
        return fail(st);
    }
    return 0;
}
