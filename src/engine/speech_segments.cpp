#include "engine/speech_segments.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace transcribe {

transcribe_vad_params default_speech_params() {
    transcribe_vad_params p;
    p.threshold      = 0.5f;  // a chunk at or above starts / continues speech
    p.neg_threshold  = -1.0f; // speech ends below it; < 0: max(threshold - 0.15, 0.01)
    p.min_speech_ms  = 250;   // shorter regions are dropped
    p.min_silence_ms = 100;   // shorter silences do not end a region
    p.speech_pad_ms  = 30;    // regions widened by this, halving gaps narrower than twice it
    p.max_speech_s   = 0.0f;  // longer regions are cut (at a silence of > 98 ms if any); <= 0: no limit
    return p;
}

// Upstream compares float32 probabilities as doubles and sizes in (fractional) samples; so does this.
std::vector<AudioSpan> speech_regions(const std::vector<float> & probs, size_t chunk, size_t n_samples,
                                         int sample_rate, const transcribe_vad_params & p) {
    if (!(p.threshold > 0.0f && p.threshold < 1.0f) || p.neg_threshold >= 1.0f || p.min_speech_ms < 0 ||
        p.min_silence_ms < 0 || p.speech_pad_ms < 0 || !std::isfinite(p.max_speech_s)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "VAD parameters out of range (threshold %g, neg_threshold %g, min_speech_ms %d, "
             "min_silence_ms %d, speech_pad_ms %d, max_speech_s %g)", double(p.threshold), double(p.neg_threshold),
             p.min_speech_ms, p.min_silence_ms, p.speech_pad_ms, double(p.max_speech_s));
    }
    const double sr = sample_rate, win = double(chunk);
    const double threshold = p.threshold;
    const double neg = p.neg_threshold < 0.0f ? std::max(threshold - 0.15, 0.01) : double(p.neg_threshold);
    const double min_speech = sr * p.min_speech_ms / 1000.0;
    const double pad = sr * p.speech_pad_ms / 1000.0;
    const double min_silence = sr * p.min_silence_ms / 1000.0;
    const double min_silence_at_max = sr * 98.0 / 1000.0;
    const double max_speech = p.max_speech_s > 0.0f ? sr * p.max_speech_s - win - 2.0 * pad
                                                    : std::numeric_limits<double>::infinity();

    struct Open { double start = 0, end = 0; bool has_start = false; };
    std::vector<Open> speeches;
    Open cur;
    bool triggered = false;
    double temp_end = 0, prev_end = 0, next_start = 0;
    auto reset_current = [&] { cur = Open {}; };
    for (size_t i = 0; i < probs.size(); ++i) {
        const double prob = probs[i], sample = win * double(i);
        if (prob >= threshold && temp_end != 0) {
            temp_end = 0;
            if (next_start < prev_end) {
                next_start = sample;
            }
        }
        if (prob >= threshold && !triggered) {
            triggered = true;
            cur.start = sample;
            cur.has_start = true;
            continue;
        }
        if (triggered && sample - cur.start > max_speech) {
            if (prev_end != 0) {
                cur.end = prev_end;
                speeches.push_back(cur);
                reset_current();
                if (next_start < prev_end) { // silence since, and no speech yet
                    triggered = false;
                } else {
                    cur.start = next_start;
                    cur.has_start = true;
                }
                prev_end = next_start = temp_end = 0;
            } else {
                cur.end = sample;
                speeches.push_back(cur);
                reset_current();
                prev_end = next_start = temp_end = 0;
                triggered = false;
                continue;
            }
        }
        if (prob < neg && triggered) {
            if (temp_end == 0) {
                temp_end = sample;
            }
            if (sample - temp_end > min_silence_at_max) {
                prev_end = temp_end;
            }
            if (sample - temp_end < min_silence) {
                continue;
            }
            cur.end = temp_end;
            if (cur.end - cur.start > min_speech) {
                speeches.push_back(cur);
            }
            reset_current();
            prev_end = next_start = temp_end = 0;
            triggered = false;
        }
    }
    const double n = double(n_samples);
    if (cur.has_start && n - cur.start > min_speech) {
        cur.end = n;
        speeches.push_back(cur);
    }
    // Padding, as upstream: int() truncations of the fractional sample counts included.
    for (size_t i = 0; i < speeches.size(); ++i) {
        Open & s = speeches[i];
        if (i == 0) {
            s.start = std::trunc(std::max(0.0, s.start - pad));
        }
        if (i + 1 < speeches.size()) {
            Open & next = speeches[i + 1];
            const double silence = next.start - s.end;
            if (silence < 2 * pad) {
                s.end += std::trunc(std::floor(silence / 2));
                next.start = std::trunc(std::max(0.0, next.start - std::floor(silence / 2)));
            } else {
                s.end = std::trunc(std::min(n, s.end + pad));
                next.start = std::trunc(std::max(0.0, next.start - pad));
            }
        } else {
            s.end = std::trunc(std::min(n, s.end + pad));
        }
    }
    std::vector<AudioSpan> out;
    out.reserve(speeches.size());
    for (const Open & s : speeches) {
        out.push_back({size_t(s.start), size_t(s.end)});
    }
    return out;
}

} // namespace transcribe
