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

Output output_from_result(const transcribe_result * r) {
    Output o;
    o.text = transcribe_result_text(r);
    for (int i = 0; i < transcribe_result_n_segments(r); ++i) {
        const int32_t * seg_ids = transcribe_result_segment_tokens(r, i);
        o.segments.push_back({transcribe_result_segment_t0_ms(r, i), transcribe_result_segment_t1_ms(r, i),
                              transcribe_result_segment_text(r, i),
                              std::vector<int32_t>(seg_ids, seg_ids + transcribe_result_segment_n_tokens(r, i)),
                              transcribe_result_segment_truncated(r, i)});
    }
    const int32_t * ids = transcribe_result_tokens(r);
    o.tokens.assign(ids, ids + transcribe_result_n_tokens(r));
    o.truncated = transcribe_result_truncated(r);
    return o;
}

std::string render(const Output & o, Format format, const transcribe_timings * timings, const std::string & model_name) {
    switch (format) {
        case Format::Txt: {
            const std::string & text = o.text;
            const size_t b = text.find_first_not_of(' ');
            return (b == std::string::npos ? std::string() : text.substr(b)) + "\n";
        }
        case Format::Srt:
        case Format::Vtt: {
            const bool vtt = format == Format::Vtt;
            std::string out = vtt ? "WEBVTT\n\n" : "";
            int cue = 0;
            for (const OutputSegment & seg : o.segments) {
                const std::string text = cue_text(seg.text, vtt);
                if (text.empty()) {
                    continue;
                }
                if (!vtt) {
                    out += std::to_string(++cue) + "\n";
                }
                out += format_timestamp(seg.t0_ms, vtt ? '.' : ',') + " --> " + format_timestamp(seg.t1_ms, vtt ? '.' : ',') +
                       "\n" + text + "\n\n";
            }
            return out;
        }
        case Format::Json: {
            nlohmann::ordered_json j;
            j["text"] = o.text;
            j["segments"] = nlohmann::json::array();
            for (const OutputSegment & seg : o.segments) {
                j["segments"].push_back({{"t0_ms", seg.t0_ms}, {"t1_ms", seg.t1_ms}, {"text", seg.text},
                                         {"tokens", seg.tokens}, {"truncated", seg.truncated}});
            }
            j["tokens"]    = o.tokens;
            j["truncated"] = o.truncated;
            if (timings) {
                j["timings"] = {{"load_ms", timings->load_ms},       {"mel_ms", timings->mel_ms},
                                {"encode_ms", timings->encode_ms},   {"prefill_ms", timings->prefill_ms},
                                {"decode_ms", timings->decode_ms},   {"n_prefill_tokens", timings->n_prefill_tokens},
                                {"n_decode_tokens", timings->n_decode_tokens}, {"vad_ms", timings->vad_ms}};
            }
            j["model"]   = model_name;
            j["version"] = transcribe_version();
            return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        }
    }
    return "";
}

} // namespace transcribe_tools
