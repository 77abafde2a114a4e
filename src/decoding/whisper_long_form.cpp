#include "whisper_long_form.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>

namespace transcribe {

double whisper_compression_ratio(const std::string & text) {
    if (text.empty()) {
        return 0.0;
    }
    uLongf size = compressBound(uLong(text.size()));
    std::vector<Bytef> out(size);
    if (compress2(out.data(), &size, reinterpret_cast<const Bytef *>(text.data()), uLong(text.size()), Z_DEFAULT_COMPRESSION) !=
        Z_OK) {
        return 0.0;
    }
    return double(text.size()) / double(size);
}

namespace {

bool is_blank(const std::string & s) {
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
}

} // namespace

WhisperLongFormResult whisper_long_form(int content_frames, const WhisperVocab & v, const Tokenizer & tokenizer,
                                        const WhisperLongFormOptions & o, const WhisperWindowDecoder & decode,
                                        const WhisperWindowAligner & align) {
    WhisperLongFormResult r;
    double last_speech_timestamp = 0.0;
    r.all_tokens = o.initial_prompt_tokens;
    const double time_precision = double(o.input_stride * o.hop_length) / double(o.sample_rate);
    size_t prompt_reset_since = 0;
    int seek = 0;
    while (seek < content_frames) {
        const double time_offset  = double(int64_t(seek) * o.hop_length) / double(o.sample_rate);
        const int    segment_size = std::min(o.window_frames, content_frames - seek);
        const std::vector<int32_t> prompt(r.all_tokens.begin() + long(prompt_reset_since), r.all_tokens.end());
        // decode_with_fallback: the next temperature while the text is too repetitive or too unlikely
        // (unless it is likely silence).
        WhisperWindowResult w;
        for (float t : o.temperatures) {
            w = decode(seek, segment_size, prompt, t);
            bool fallback = (!std::isnan(o.compression_ratio_threshold) && w.compression_ratio > o.compression_ratio_threshold) ||
                            (!std::isnan(o.logprob_threshold) && w.avg_logprob < o.logprob_threshold);
            if (!std::isnan(o.no_speech_threshold) && w.no_speech_prob > o.no_speech_threshold &&
                !std::isnan(o.logprob_threshold) && w.avg_logprob < o.logprob_threshold) {
                fallback = false;
            }
            if (!fallback) {
                break;
            }
        }
        const std::vector<int32_t> & tokens = w.tokens;
        if (!std::isnan(o.no_speech_threshold)) {
            bool skip = w.no_speech_prob > o.no_speech_threshold;
            if (!std::isnan(o.logprob_threshold) && w.avg_logprob > o.logprob_threshold) {
                skip = false; // confident enough despite the no-speech probability
            }
            if (skip) {
                seek += segment_size;
                continue;
            }
        }
        std::vector<WhisperSegment> current;
        auto add = [&](double start, double end, std::vector<int32_t> toks) {
            WhisperSegment s;
            s.seek  = seek;
            s.start = start;
            s.end   = end;
            std::vector<int32_t> text_tokens;
            for (int32_t t : toks) {
                if (t < v.eot) {
                    text_tokens.push_back(t);
                }
            }
            s.text              = tokenizer.decode(text_tokens);
            s.tokens            = std::move(toks);
            s.temperature       = w.temperature;
            s.avg_logprob       = w.avg_logprob;
            s.compression_ratio = w.compression_ratio;
            s.no_speech_prob    = w.no_speech_prob;
            current.push_back(std::move(s));
        };
        auto is_ts = [&](size_t i) { return tokens[i] >= v.timestamp_begin; };
        const size_t n = tokens.size();
        const bool single_timestamp_ending = n >= 2 && !is_ts(n - 2) && is_ts(n - 1);
        std::vector<size_t> slices; // after each pair of consecutive timestamps
        for (size_t i = 0; i + 1 < n; ++i) {
            if (is_ts(i) && is_ts(i + 1)) {
                slices.push_back(i + 1);
            }
        }
        if (!slices.empty()) {
            if (single_timestamp_ending) {
                slices.push_back(n);
            }
            size_t last = 0;
            for (size_t cut : slices) {
                std::vector<int32_t> sliced(tokens.begin() + long(last), tokens.begin() + long(cut));
                const double start = time_offset + (sliced.front() - v.timestamp_begin) * time_precision;
                const double end   = time_offset + (sliced.back() - v.timestamp_begin) * time_precision;
                add(start, end, std::move(sliced));
                last = cut;
            }
            if (single_timestamp_ending) {
                seek += segment_size;
            } else { // the unfinished segment is dropped: the next window starts at its timestamp
                seek += (tokens[last - 1] - v.timestamp_begin) * o.input_stride;
            }
        } else {
            double duration = double(int64_t(segment_size) * o.hop_length) / double(o.sample_rate);
            int32_t last_ts = -1;
            for (int32_t t : tokens) {
                if (t >= v.timestamp_begin) {
                    last_ts = t;
                }
            }
            if (last_ts >= 0 && last_ts != v.timestamp_begin) {
                duration = (last_ts - v.timestamp_begin) * time_precision;
            }
            add(time_offset, time_offset + duration, tokens);
            seek += segment_size;
        }
        if (align && !current.empty()) {
            std::vector<WhisperTimedSegment> timed(current.size());
            std::vector<int32_t> text_tokens;
            for (size_t i = 0; i < current.size(); ++i) {
                timed[i].start  = current[i].start;
                timed[i].end    = current[i].end;
                timed[i].tokens = current[i].tokens;
                for (int32_t t : current[i].tokens) {
                    if (t < v.eot) {
                        text_tokens.push_back(t);
                    }
                }
            }
            whisper_add_word_timestamps(timed, text_tokens.empty() ? std::vector<WhisperWordTiming> {} : align(text_tokens, segment_size),
                                        time_offset, v, last_speech_timestamp);
            for (size_t i = 0; i < current.size(); ++i) {
                current[i].start = timed[i].start;
                current[i].end   = timed[i].end;
                current[i].words = std::move(timed[i].words);
            }
            // get_end: the last word's end, else the last segment's.
            double last_end = current.back().end;
            for (auto s = current.rbegin(); s != current.rend(); ++s) {
                if (!s->words.empty()) {
                    last_end = s->words.back().end;
                    break;
                }
            }
            if (!single_timestamp_ending && last_end > time_offset) {
                seek = int(std::nearbyint(last_end * 100.0)); // FRAMES_PER_SECOND; Python's round: half to even
            }
            last_speech_timestamp = last_end;
        }
        // An instantaneous or textless segment is kept, emptied.
        for (WhisperSegment & s : current) {
            if (s.start == s.end || is_blank(s.text)) {
                s.text.clear();
                s.tokens.clear();
                s.words.clear();
            }
        }
        for (WhisperSegment & s : current) {
            s.id = int(r.segments.size());
            r.all_tokens.insert(r.all_tokens.end(), s.tokens.begin(), s.tokens.end());
            r.segments.push_back(std::move(s));
        }
        if (!o.condition_on_previous_text || w.temperature > 0.5f) {
            prompt_reset_since = r.all_tokens.size();
        }
    }
    r.text = tokenizer.decode(std::vector<int32_t>(r.all_tokens.begin() + long(o.initial_prompt_tokens.size()), r.all_tokens.end()));
    return r;
}

} // namespace transcribe
