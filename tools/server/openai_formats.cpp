#include "openai_formats.h"

#include <map>

using namespace transcribe_tools;

namespace transcribe_server {

std::string sse_event(const json & data) {
    return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string trimmed(const std::string & s) {
    const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

json words_json(const std::vector<OutputWord> & words) {
    json a = json::array();
    for (const OutputWord & w : words) {
        a.push_back({{"word", w.text}, {"start", w.t0_ms / 1000.0}, {"end", w.t1_ms / 1000.0}});
    }
    return a;
}

json verbose_json(const Output & out, const std::string & task, const std::string & language, double duration,
                  bool with_segments, bool with_words) {
    json j = {{"task", task}, {"language", language}, {"duration", duration}, {"text", trimmed(out.text)}};
    if (with_segments) {
        json segs = json::array();
        for (size_t i = 0; i < out.segments.size(); ++i) {
            const OutputSegment & s = out.segments[i];
            json seg = {{"id", i}, {"start", s.t0_ms / 1000.0}, {"end", s.t1_ms / 1000.0}, {"text", trimmed(s.text)},
                        {"tokens", s.tokens}, {"truncated", s.truncated}};
            if (s.has_decode) { // Whisper: its window's decode, as OpenAI's segments carry it
                seg["seek"]              = s.decode.seek;
                seg["temperature"]       = shortest_decimal(s.decode.temperature);
                seg["avg_logprob"]       = s.decode.avg_logprob;
                seg["compression_ratio"] = s.decode.compression_ratio;
                seg["no_speech_prob"]    = s.decode.no_speech_prob;
            }
            segs.push_back(std::move(seg));
        }
        j["segments"] = segs;
    }
    if (with_words) {
        j["words"] = words_json(out.words);
    }
    return j;
}

json diarized_segments(const Output & out) {
    std::map<int, std::string> labels;
    size_t named = 0;
    json segs = json::array();
    for (size_t i = 0; i < out.segments.size(); ++i) {
        const OutputSegment & s = out.segments[i];
        const std::string text = trimmed(s.text);
        if (text.empty()) {
            continue;
        }
        auto label = labels.find(s.speaker);
        if (label == labels.end()) {
            // Past Z: AA, AB, ... (a diarizer gives a handful of speakers; the labels stay unique anyway).
            std::string name = "unknown"; // text no speaker was active over
            if (s.speaker >= 0) {
                const size_t k = named++;
                name = k < 26 ? std::string(1, char('A' + k)) : std::string(1, char('A' + k / 26 - 1)) + char('A' + k % 26);
            }
            label = labels.emplace(s.speaker, name).first;
        }
        segs.push_back({{"type", "transcript.text.segment"}, {"id", "seg_" + std::to_string(segs.size())},
                        {"start", s.t0_ms / 1000.0}, {"end", s.t1_ms / 1000.0}, {"text", text}, {"speaker", label->second}});
    }
    return segs;
}

json diarized_json(const Output & out, double duration) {
    return {{"task", "transcribe"},
            {"duration", duration},
            {"text", trimmed(out.text)},
            {"segments", diarized_segments(out)},
            {"usage", {{"type", "duration"}, {"seconds", duration}}}};
}

} // namespace transcribe_server
