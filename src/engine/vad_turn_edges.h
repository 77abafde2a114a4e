// Turn edges of a live stream from a voice-activity detector: the stream's samples (at its own rate)
// resampled to what the detector hears, its probabilities taken a chunk at a time through a
// TurnDetector, the edges given back in the stream's samples. Shared by the live streams that re-decode
// an offline model's turns (live_stream.h) and those through a model that transcribes as it hears
// (native_live_stream.h).
#pragma once

#include "engine/turn_detector.h"
#include "model/speech_detector.h"

#include <memory>
#include <vector>

namespace transcribe {

class StreamResampler;

class VadTurnEdges {
public:
    VadTurnEdges(std::unique_ptr<SpeechDetector> vad, const TurnDetectionParams & params, int sample_rate);
    ~VadTurnEdges();
    VadTurnEdges(const VadTurnEdges &) = delete;
    VadTurnEdges & operator=(const VadTurnEdges &) = delete;

    // The next samples; the edges they complete are appended to OUT (samples counted from the stream's
    // first at its rate).
    void push(const float * pcm, size_t n, std::vector<TurnEdge> & out);
    // The stream was committed or cleared here: an open turn is dropped without an edge.
    void restart() { turns_->restart(); }

private:
    static constexpr int kVadRate = 16000;

    std::unique_ptr<SpeechDetector>  vad_;
    int                              rate_;
    std::unique_ptr<TurnDetector>    turns_;
    std::vector<float>               pending_; // at the detector's rate, less than a chunk waiting
    std::unique_ptr<StreamResampler> to_vad_rate_;
    std::vector<TurnEdge>            edges_;
};

} // namespace transcribe
