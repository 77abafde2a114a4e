#include "engine/turn_detector.h"

#include "core/error.h"

#include <algorithm>

namespace transcribe {

TurnDetector::TurnDetector(const TurnDetectionParams & params, int sample_rate, size_t chunk)
    : threshold_(params.threshold),
      neg_threshold_(std::max(params.threshold - 0.15f, 0.01f)),
      prefix_(int64_t(params.prefix_padding_ms) * sample_rate / 1000),
      silence_(int64_t(params.silence_duration_ms) * sample_rate / 1000),
      chunk_(int64_t(chunk)) {
    if (!(params.threshold >= 0.0f && params.threshold <= 1.0f) || params.prefix_padding_ms < 0 ||
        params.silence_duration_ms < 0 || sample_rate <= 0 || chunk == 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG,
             "turn detection: threshold must lie within 0..1 and the durations be >= 0 (got %g, %d ms, %d ms)",
             double(params.threshold), params.prefix_padding_ms, params.silence_duration_ms);
    }
}

void TurnDetector::push(float probability, std::vector<TurnEdge> & out) {
    const int64_t begin = position_, end = position_ + chunk_;
    position_ = end;
    if (!in_turn_) {
        if (probability >= threshold_) {
            in_turn_       = true;
            turn_start_    = std::max(floor_, begin - prefix_);
            silence_start_ = -1;
            out.push_back({true, turn_start_});
        }
        return;
    }
    if (probability >= threshold_) {
        silence_start_ = -1;
    } else if (probability < neg_threshold_ && silence_start_ < 0) {
        silence_start_ = begin;
    }
    if (silence_start_ >= 0 && end - silence_start_ >= silence_) {
        in_turn_ = false;
        floor_   = end;
        out.push_back({false, end});
    }
}

void TurnDetector::restart() {
    in_turn_       = false;
    silence_start_ = -1;
    floor_         = position_;
}

} // namespace transcribe
