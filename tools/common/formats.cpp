#include "formats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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


std::vector<OutputWord> words_of(const transcribe_result * r, int segment) {
    std::vector<OutputWord> out;
    for (int k = 0; k < transcribe_result_n_words(r, segment); ++k) {
        transcribe_word w;
        if (transcribe_get_word(r, segment, k, &w) == TRANSCRIBE_OK) {
            out.push_back({w.text, w.t0_ms, w.t1_ms, w.speaker});
        }
    }
    return out;
}

size_t code_points(const std::string & s) {
    size_t n = 0;
    for (unsigned char c : s) {
        n += (c & 0xC0) != 0x80;
    }
    return n;
}

// "[Speaker k+1] " (SRT, txt); "" without a speaker.
std::string speaker_tag(int speaker) { return speaker < 0 ? "" : "[Speaker " + std::to_string(speaker + 1) + "] "; }

nlohmann::ordered_json words_json(const std::vector<OutputWord> & words) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const OutputWord & w : words) {
        nlohmann::ordered_json jw = {{"word", w.text}, {"t0_ms", w.t0_ms}, {"t1_ms", w.t1_ms}};
        if (w.speaker >= 0) {
            jw["speaker"] = "speaker_" + std::to_string(w.speaker);
        }
        a.push_back(jw);
    }
    return a;
}

} // namespace

std::vector<OutputSegment> word_cues(const Output & o) {
    std::vector<OutputSegment> cues;
    for (const OutputSegment & seg : o.segments) {
        OutputSegment cue;
        cue.speaker = seg.speaker;
        size_t chars = 0;
        for (const OutputWord & w : seg.words) {
            const size_t next = chars + (chars ? 1 : 0) + code_points(w.text);
            if (!cue.words.empty() && (next > size_t(kCueChars) || w.t1_ms - cue.t0_ms > kCueMs)) {
                cues.push_back(std::move(cue));
                cue         = OutputSegment {};
                cue.speaker = seg.speaker;
                chars       = 0;
            }
            if (cue.words.empty()) {
                cue.t0_ms = w.t0_ms;
            }
            cue.text += (cue.words.empty() ? "" : " ") + w.text;
            cue.t1_ms = std::max(w.t1_ms, cue.t0_ms);
            cue.words.push_back(w);
            chars = code_points(cue.text);
        }
        if (!cue.words.empty()) {
            cues.push_back(std::move(cue));
        }
    }
    return cues;
}

double shortest_decimal(float f) {
    char buf[32];
    for (int digits = 1; digits <= 9; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, double(f));
        if (std::strtof(buf, nullptr) == f) {
            break;
        }
    }
    return std::strtod(buf, nullptr);
}

Output output_from_result(const transcribe_result * r) {
    Output o;
    o.text = transcribe_result_text(r);
    for (int i = 0; i < transcribe_result_n_segments(r); ++i) {
        const int32_t * seg_ids = transcribe_result_segment_tokens(r, i);
        o.segments.push_back({transcribe_result_segment_t0_ms(r, i), transcribe_result_segment_t1_ms(r, i),
                              transcribe_result_segment_text(r, i),
                              std::vector<int32_t>(seg_ids, seg_ids + transcribe_result_segment_n_tokens(r, i)),
                              transcribe_result_segment_truncated(r, i), words_of(r, i),
                              transcribe_result_segment_speaker(r, i)});
        o.segments.back().has_decode = transcribe_result_segment_decode(r, i, &o.segments.back().decode) == TRANSCRIBE_OK;
    }
    o.language = transcribe_result_language(r);
    o.words = words_of(r, -1);
    const int32_t * ids = transcribe_result_tokens(r);
    o.tokens.assign(ids, ids + transcribe_result_n_tokens(r));
    o.truncated = transcribe_result_truncated(r);
    return o;
}

std::string render(const Output & o, Format format, const transcribe_timings * timings, const std::string & model_name,
                   Timestamps timestamps) {
    const bool words = timestamps == Timestamps::Word;
    switch (format) {
        case Format::Txt: {
            if (std::any_of(o.segments.begin(), o.segments.end(), [](const OutputSegment & s) { return s.speaker >= 0; })) {
                std::string out; // a line per speaker turn
                for (const OutputSegment & seg : o.segments) {
                    const size_t b = seg.text.find_first_not_of(' ');
                    out += speaker_tag(seg.speaker) + (b == std::string::npos ? "" : seg.text.substr(b)) + "\n";
                }
                return out;
            }
            const std::string & text = o.text;
            const size_t b = text.find_first_not_of(' ');
            return (b == std::string::npos ? std::string() : text.substr(b)) + "\n";
        }
        case Format::Srt:
        case Format::Vtt: {
            const bool vtt = format == Format::Vtt;
            std::string out = vtt ? "WEBVTT\n\n" : "";
            int cue = 0;
            const std::vector<OutputSegment> cues = words ? word_cues(o) : o.segments;
            for (const OutputSegment & seg : cues) {
                const std::string text = cue_text(seg.text, vtt);
                if (text.empty()) {
                    continue;
                }
                if (!vtt) {
                    out += std::to_string(++cue) + "\n";
                }
                const std::string who = seg.speaker < 0 ? ""
                                        : vtt           ? "<v Speaker " + std::to_string(seg.speaker + 1) + ">"
                                                        : speaker_tag(seg.speaker);
                out += format_timestamp(seg.t0_ms, vtt ? '.' : ',') + " --> " + format_timestamp(seg.t1_ms, vtt ? '.' : ',') +
                       "\n" + who + text + "\n\n";
            }
            return out;
        }
        case Format::Json: {
            nlohmann::ordered_json j;
            j["text"] = o.text;
            if (!o.language.empty()) {
                j["language"] = o.language;
            }
            j["segments"] = nlohmann::json::array();
            for (const OutputSegment & seg : o.segments) {
                nlohmann::ordered_json js = {{"t0_ms", seg.t0_ms}, {"t1_ms", seg.t1_ms}, {"text", seg.text},
                                             {"tokens", seg.tokens}, {"truncated", seg.truncated}};
                if (seg.speaker >= 0) {
                    js["speaker"] = "speaker_" + std::to_string(seg.speaker);
                }
                if (seg.has_decode) {
                    js["seek"]              = seg.decode.seek;
                    js["temperature"]       = shortest_decimal(seg.decode.temperature);
                    js["avg_logprob"]       = seg.decode.avg_logprob;
                    js["compression_ratio"] = seg.decode.compression_ratio;
                    js["no_speech_prob"]    = seg.decode.no_speech_prob;
                }
                if (words) {
                    js["words"] = words_json(seg.words);
                }
                j["segments"].push_back(js);
            }
            if (words) {
                j["words"] = words_json(o.words);
            }
            j["tokens"]    = o.tokens;
            j["truncated"] = o.truncated;
            if (timings) {
                j["timings"] = {{"load_ms", timings->load_ms},       {"mel_ms", timings->mel_ms},
                                {"encode_ms", timings->encode_ms},   {"prefill_ms", timings->prefill_ms},
                                {"decode_ms", timings->decode_ms},   {"n_prefill_tokens", timings->n_prefill_tokens},
                                {"n_decode_tokens", timings->n_decode_tokens}, {"vad_ms", timings->vad_ms}};
                if (timings->draft_ms > 0 || timings->n_drafted_tokens > 0) {
                    j["timings"]["draft_ms"]          = timings->draft_ms;
                    j["timings"]["n_decode_steps"]    = timings->n_decode_steps;
                    j["timings"]["n_drafted_tokens"]  = timings->n_drafted_tokens;
                    j["timings"]["n_accepted_tokens"] = timings->n_accepted_tokens;
                }
            }
            j["model"]   = model_name;
            j["version"] = transcribe_version();
            return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        }
    }
    return "";
}

} // namespace transcribe_tools
