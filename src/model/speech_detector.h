// A voice-activity detector as a recording's pipeline uses one (families/silero_vad: SileroVadSession).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace transcribe {

class SpeechDetector {
public:
    virtual ~SpeechDetector() = default;
    // One speech probability per chunk of PCM (chunk_samples each), ABORT polled between blocks.
    virtual std::vector<float> probabilities(const float * pcm, size_t n, int sample_rate,
                                             const std::function<bool()> & abort) = 0;
    virtual size_t chunk_samples(int sample_rate) const = 0;
    // Live audio: one probability per chunk of the next N samples (whole chunks) of one stream, going on
    // from the chunks given before.
    virtual std::vector<float> next_probabilities(const float * pcm, size_t n, int sample_rate) = 0;
};

} // namespace transcribe
