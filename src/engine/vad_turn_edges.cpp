#include "engine/vad_turn_edges.h"

#include "core/audio.h"

namespace transcribe {

VadTurnEdges::VadTurnEdges(std::unique_ptr<SpeechDetector> vad, const TurnDetectionParams & params, int sample_rate)
    : vad_(std::move(vad)), rate_(sample_rate),
      turns_(std::make_unique<TurnDetector>(params, kVadRate, vad_->chunk_samples(kVadRate))),
      to_vad_rate_(std::make_unique<StreamResampler>(sample_rate, kVadRate, pending_)) {}

VadTurnEdges::~VadTurnEdges() = default;

void VadTurnEdges::push(const float * pcm, size_t n, std::vector<TurnEdge> & out) {
    to_vad_rate_->push(pcm, n);
    const size_t chunk = vad_->chunk_samples(kVadRate), whole = pending_.size() / chunk * chunk;
    if (whole == 0) {
        return;
    }
    const std::vector<float> probs = vad_->next_probabilities(pending_.data(), whole, kVadRate);
    pending_.erase(pending_.begin(), pending_.begin() + long(whole));
    for (float p : probs) {
        edges_.clear();
        turns_->push(p, edges_);
        for (TurnEdge e : edges_) {
            e.sample = e.sample * rate_ / kVadRate;
            out.push_back(e);
        }
    }
}

} // namespace transcribe
