#include "native.h"

#include "../common/tool_errors.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <unistd.h>

namespace transcribe_tools {

namespace {

int die(const std::string & message) { return tool_error("transcribe-stream", message); }
int die(transcribe_status st) { return tool_error("transcribe-stream", st); }

void print_json(const nlohmann::json & j) {
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
}

// Turns as the steps' tokens make them: a delta line a step; a completed line a turn.
class Turns {
public:
    Turns(transcribe_model * model, bool json) : model_(model), json_(json), terminal_(!json && isatty(STDOUT_FILENO)) {
        transcribe_model_info info {};
        transcribe_model_get_info(model, &info);
        end_of_turn_ = info.end_of_turn_token;
    }

    void step(const transcribe_stream_step & s) {
        if (json_) {
            print_json({{"type", "delta"}, {"item", item_}, {"step", s.index}, {"audio_end_ms", s.audio_end_ms},
                        {"text", s.text}, {"tokens", std::vector<int32_t>(s.tokens, s.tokens + s.n_tokens)}});
        } else {
            partial_ += s.text;
            if (terminal_) {
                std::printf("\r\033[K%s", partial_.c_str());
                std::fflush(stdout);
            }
        }
        for (int i = 0; i < s.n_tokens; ++i) {
            tokens_.push_back(s.tokens[i]);
            if (s.tokens[i] == end_of_turn_) {
                complete(s.audio_end_ms);
            }
        }
        heard_ms_ = s.audio_end_ms;
    }

    // The audio ended: what follows the last turn's end is a turn if it has tokens (or is the only one).
    void end() {
        if (!tokens_.empty() || item_ == 0) {
            complete(heard_ms_);
        }
    }

private:
    void complete(int64_t end_ms) {
        std::string text(64, '\0');
        size_t n = 0;
        if (transcribe_detokenize(model_, tokens_.data(), int(tokens_.size()), text.data(), text.size(), &n) ==
            TRANSCRIBE_ERR_INVALID_ARG) {
            text.resize(n + 1);
            transcribe_detokenize(model_, tokens_.data(), int(tokens_.size()), text.data(), text.size(), &n);
        }
        text.resize(n);
        if (json_) {
            print_json({{"type", "completed"}, {"item", item_}, {"audio_start_ms", start_ms_}, {"audio_end_ms", end_ms},
                        {"text", text}, {"tokens", tokens_}});
        } else {
            std::printf("%s%s\n", terminal_ ? "\r\033[K" : "", text.c_str());
            std::fflush(stdout);
        }
        tokens_.clear();
        partial_.clear();
        start_ms_ = end_ms;
        ++item_;
    }

    transcribe_model *   model_;
    bool                 json_, terminal_;
    int32_t              end_of_turn_ = -1;
    int64_t              item_ = 0, start_ms_ = 0, heard_ms_ = 0;
    std::vector<int32_t> tokens_;
    std::string          partial_;
};

} // namespace

int stream_natively(transcribe_model * model, transcribe_session * session, const transcribe_run_params & rp,
                    PacketSource & packets, bool json) {
    transcribe_model_info info {};
    transcribe_model_get_info(model, &info);
    if (packets.rate() != info.sample_rate) {
        return die("a model streamed natively takes audio at its own rate (" + std::to_string(info.sample_rate) +
                   " Hz): give --rate " + std::to_string(info.sample_rate));
    }
    transcribe_native_stream * stream = nullptr;
    transcribe_status st = transcribe_native_stream_open(session, &rp, &stream);
    if (st != TRANSCRIBE_OK) {
        return die(st);
    }
    std::unique_ptr<transcribe_native_stream, decltype(&transcribe_native_stream_free)> owner(stream,
                                                                                             transcribe_native_stream_free);
    Turns turns(model, json);
    auto print_steps = [&] {
        transcribe_stream_step s;
        while (transcribe_native_stream_next_step(stream, &s)) {
            turns.step(s);
        }
    };
    std::vector<float> pcm;
    while (packets.next(pcm)) {
        if ((st = transcribe_native_stream_push(stream, pcm.data(), pcm.size())) != TRANSCRIBE_OK) {
            return die(st);
        }
        print_steps();
    }
    if ((st = transcribe_native_stream_finish(stream)) != TRANSCRIBE_OK) {
        return die(st);
    }
    print_steps();
    turns.end();
    return 0;
}

} // namespace transcribe_tools
