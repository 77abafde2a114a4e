// Speech regions from per-chunk speech probabilities: the post-processing loop of Silero's
// get_speech_timestamps (snakers4/silero-vad v5.1.2, utils_vad.py), sample for sample.
#pragma once

#include <cstddef>
#include <vector>

namespace transcribe {

struct SpeechParams {
    float threshold      = 0.5f;  // a chunk at or above starts / continues speech
    float neg_threshold  = -1.0f; // speech ends below it; < 0: max(threshold - 0.15, 0.01)
    int   min_speech_ms  = 250;   // shorter regions are dropped
    int   min_silence_ms = 100;   // shorter silences do not end a region
    int   speech_pad_ms  = 30;    // regions widened by this, halving gaps narrower than twice it
    float max_speech_s   = 0.0f;  // longer regions are cut (at a silence of > 98 ms if any); <= 0: no limit
};

// A stretch of a recording in samples, end exclusive.
struct AudioSpan {
    size_t begin = 0;
    size_t end   = 0;
};

// probs[k] covers samples [k * chunk, (k + 1) * chunk) of n_samples at sample_rate.
std::vector<AudioSpan> speech_regions(const std::vector<float> & probs, size_t chunk, size_t n_samples,
                                         int sample_rate, const SpeechParams & params);

} // namespace transcribe
