// Turns of speech in a live stream from per-chunk speech probabilities, as OpenAI's `server_vad` turn
// detection describes them: a turn starts at the first chunk at or over THRESHOLD, reaching back
// PREFIX_PADDING_MS (never before the previous turn's end); it stops once the speech has been quiet for
// SILENCE_DURATION_MS, and its audio ends there, the silence included. "Quiet" has Silero's hysteresis
// (get_speech_timestamps' neg_threshold): a chunk under max(THRESHOLD - 0.15, 0.01) starts the silence,
// one at or over THRESHOLD ends it, one in between leaves it as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace transcribe {

struct TurnDetectionParams {
    float threshold           = 0.5f;
    int   prefix_padding_ms   = 300;
    int   silence_duration_ms = 500;
};

struct TurnEdge {
    bool    started = false; // true: a turn began at SAMPLE; false: the open turn ended at SAMPLE
    int64_t sample  = 0;
};

class TurnDetector {
public:
    // Probabilities come one per CHUNK samples at SAMPLE_RATE, the first for samples [0, CHUNK).
    TurnDetector(const TurnDetectionParams & params, int sample_rate, size_t chunk);

    // The next chunk's probability; the edges it causes (at most one) are appended to OUT.
    void push(float probability, std::vector<TurnEdge> & out);

    bool    in_turn() const { return in_turn_; }
    int64_t turn_start() const { return turn_start_; }
    int64_t position() const { return position_; } // samples seen so far

    // The buffer was committed or cleared at the current position: an open turn is dropped (no edge)
    // and the next one starts no earlier than here.
    void restart();

private:
    float   threshold_, neg_threshold_;
    int64_t prefix_, silence_, chunk_;
    int64_t position_      = 0;
    int64_t floor_         = 0;  // a turn's start reaches back no further
    bool    in_turn_       = false;
    int64_t turn_start_    = 0;
    int64_t silence_start_ = -1; // where the current silence in a turn began; -1: none
};

} // namespace transcribe
