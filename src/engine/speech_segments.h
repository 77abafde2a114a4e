// Speech regions from per-chunk speech probabilities: the post-processing loop of Silero's
// get_speech_timestamps (snakers4/silero-vad v5.1.2, utils_vad.py), sample for sample.
#pragma once

#include "transcribe.h"

#include <cstddef>
#include <vector>

namespace transcribe {

// The parameters are the C API's transcribe_vad_params (one struct, one set of defaults).
transcribe_vad_params default_speech_params();

// A stretch of a recording in samples, end exclusive.
struct AudioSpan {
    size_t begin = 0;
    size_t end   = 0;
};

// probs[k] covers samples [k * chunk, (k + 1) * chunk) of n_samples at sample_rate.
std::vector<AudioSpan> speech_regions(const std::vector<float> & probs, size_t chunk, size_t n_samples,
                                         int sample_rate, const transcribe_vad_params & params);

} // namespace transcribe
