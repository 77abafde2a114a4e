// Speaker-attributed transcripts for models without word times (Canary-Qwen, Canary AED without its
// timestamp prompt): the recording is cut into speaker turns, each transcribed on its own, so every
// piece of text has one speaker. Turns tile the recording from its first sample to its last (audio
// no speaker is active over goes to the turn before it, leading audio to the first turn), so nothing is
// left untranscribed.
#pragma once

#include "model/family.h"
#include "engine/speaker_segments.h"
#include "engine/speech_segments.h"

#include <vector>

namespace transcribe {

struct SpeakerTurn {
    AudioSpan span;
    int       speaker = -1;
};

// Turns from a diarizer's segments (any order, overlapping across speakers) over N samples: in start
// order, a segment of another speaker that starts inside the current turn and ends after it takes over
// from its start; one that ends inside it (a backchannel) is absorbed; consecutive turns of one speaker
// merge. No segments: one turn of speaker -1.
std::vector<SpeakerTurn> speaker_turns(const std::vector<SpeakerSegment> & segments, size_t n, int sample_rate);

// REGIONS (in order) clipped to SPAN.
std::vector<AudioSpan> clip_to(const std::vector<AudioSpan> & regions, AudioSpan span);

// Each segment takes the speaker of the turn its midpoint falls in.
void label_speakers(Transcript & t, const std::vector<SpeakerTurn> & turns, int sample_rate);

} // namespace transcribe
