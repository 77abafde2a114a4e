// Word times for any transcript (--align-with): a CTC model's log-probabilities of the audio and NeMo
// Forced Aligner's Viterbi (decoding/ctc_forced_alignment) place the transcript's text, giving its words
// and its segments (cut at '.', '?', '!' as NFA cuts them) the CTC model's frame times; or a forced
// aligner (Qwen3-ForcedAligner) times each segment's words in that segment's audio, as Qwen3-ASR's
// transcribe() aligns each chunk it decoded.
#pragma once

#include "model/family.h"

#include <cstddef>
#include <functional>

namespace transcribe {

// ALIGNER must have a CTC head or be a forced aligner (checked by check_aligner). A recording within ALIGNER's window is aligned
// whole (NFA's own case); a longer one segment by segment, each over its own stretch of audio. The
// transcript's words and segments are replaced (its text and tokens stay); a text the audio cannot hold
// (more tokens than frames: NFA leaves it unaligned) keeps no words.
void align_transcript(Transcript & t, const float * pcm, size_t n, Model & aligner, Session & session,
                      const std::function<bool()> & cancelled);

// INVALID_ARG unless ALIGNER can align MODEL's transcripts (a CTC head or a forced aligner, the same sample
// rate).
void check_aligner(const Model & model, const Model & aligner);

} // namespace transcribe
