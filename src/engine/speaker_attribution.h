// Speaker-attributed transcripts from a word-timed transcript and a diarizer's speaker segments: each
// word takes the speaker active over most of it (the largest overlap with that speaker's segments; a
// word no speaker is active over takes the previous word's speaker, leading ones the first attributed
// word's), and each segment is cut where the speaker changes (its tokens stay with its first part).
#pragma once

#include "model/family.h"
#include "engine/speaker_segments.h"

#include <vector>

namespace transcribe {

void attribute_speakers(Transcript & t, const std::vector<SpeakerSegment> & turns);

} // namespace transcribe
