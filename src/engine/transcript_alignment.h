// Word times for any transcript (--align-with): a CTC model's log-probabilities of the audio and NeMo
// Forced Aligner's Viterbi (decoding/ctc_forced_alignment) place the transcript's text, giving its words
// and its segments (cut at '.', '?', '!' as NFA cuts them) the CTC model's frame times.
#pragma once

#include "model/family.h"

#include <cstddef>
#include <functional>

namespace transcribe {

// MODEL must have a CTC head (checked by check_aligner). A recording within ALIGNER's window is aligned
// whole (NFA's own case); a longer one segment by segment, each over its own stretch of audio. The
// transcript's words and segments are replaced (its text and tokens stay); a text the audio cannot hold
// (more tokens than frames: NFA leaves it unaligned) keeps no words.
void align_transcript(Transcript & t, const float * pcm, size_t n, Model & aligner, Session & session,
                      const std::function<bool()> & cancelled);

// INVALID_ARG unless ALIGNER can align MODEL's transcripts (a CTC head, the same sample rate).
void check_aligner(const Model & model, const Model & aligner);

} // namespace transcribe
