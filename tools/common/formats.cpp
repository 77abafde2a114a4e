#include "formats.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace transcribe_tools {

bool parse_format(const std::string & name, Format * out) {
    if (name == "txt") { *out = Format::Txt; return true; }
    if (name == "json") { *out = Format::Json; return true; }
    if (name == "srt") { *out = Format::Srt; return true; }
    if (name == "vtt") { *out = Format::Vtt; return true; }
    return false;
}

std::string format_timestamp(int64_t ms, char separator) {
    if (ms < 0) {
        ms = 0;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", (long long) (ms / 3600000), (long long) (ms / 60000 % 60),
                  (long long) (ms / 1000 % 60), separator, (long long) (ms % 1000));
    return buf;
}

namespace {

// Subtitle cue text: trimmed, and never a blank line (which would end the cue early).
std::string cue_text(std::string s, bool vtt) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    const size_t e = s.find_last_not_of(" \t\r\n");
    s = b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '\r') {
            continue;
        }
        if (c == '\n' && (out.empty() || out.back() == '\n')) {
            continue;
        }
        if (vtt && c == '&') { out += "&amp;"; continue; }
        if (vtt && c == '<') { out += "&lt;"; continue; }
        if (vtt && c == '>') { out += "&gt;"; continue; }
        out += c;
    }
    while (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return out;
}

} // namespace

std::string render(const transcribe_result * r, Format format, const transcribe_timings * timings,
                   const std::string & model_name) {
    const int n_seg = transcribe_result_n_segments(r);
    switch (format) {
        case Format::Txt: {
            std::string text = transcribe_result_text(r);
            const size_t b = text.find_first_not_of(' ');
            return (b == std::string::npos ? std::string() : text.substr(b)) + "\n";
        }
        case Format::Srt:
        case Format::Vtt: {
            const bool vtt = format == Format::Vtt;
            std::string out = vtt ? "WEBVTT\n\n" : "";
            int cue = 0;
            for (int i = 0; i < n_seg; ++i) {
                const std::string text = cue_text(transcribe_result_segment_text(r, i), vtt);
                if (text.empty()) {
                    continue;
                }
                if (!vtt) {
                    out += std::to_string(++cue) + "\n";
                }
                out += format_timestamp(transcribe_result_segment_t0_ms(r, i), vtt ? '.' : ',') + " --> " +
                       format_timestamp(transcribe_result_segment_t1_ms(r, i), vtt ? '.' : ',') + "\n" + text + "\n\n";
            }
            return out;
        }
        case Format::Json: {
            nlohmann::ordered_json j;
            j["text"] = transcribe_result_text(r);
            j["segments"] = nlohmann::json::array();
            for (int i = 0; i < n_seg; ++i) {
                j["segments"].push_back({{"t0_ms", transcribe_result_segment_t0_ms(r, i)},
                                         {"t1_ms", transcribe_result_segment_t1_ms(r, i)},
                                         {"text", transcribe_result_segment_text(r, i)}});
            }
            const int32_t * ids = transcribe_result_tokens(r);
            j["tokens"] = std::vector<int32_t>(ids, ids + transcribe_result_n_tokens(r));
            j["truncated"] = transcribe_result_truncated(r);
            if (timings) {
                j["timings"] = {{"load_ms", timings->load_ms},       {"mel_ms", timings->mel_ms},
                                {"encode_ms", timings->encode_ms},   {"prefill_ms", timings->prefill_ms},
                                {"decode_ms", timings->decode_ms},   {"n_prefill_tokens", timings->n_prefill_tokens},
                                {"n_decode_tokens", timings->n_decode_tokens}};
            }
            j["model"]   = model_name;
            j["version"] = transcribe_version();
            return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        }
    }
    return "";
}

} // namespace transcribe_tools
