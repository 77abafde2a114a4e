// Greedy CTC decoding as NeMo's greedy_batch decoder and CTCDecoding do it: every frame's argmax, folded
// (a frame emits its id when that is not the blank and differs from the previous frame's, or the previous
// frame's was the blank: "a a _ a" gives two a's), each token with NeMo's CTC offsets
// (ctc_decoding._compute_offsets): it ends at its own first frame and starts where the previous token
// ended; the first starts one frame before the first non-blank frame (at least at 0).
#pragma once

#include "engine/subword_timestamps.h"

#include <vector>

namespace transcribe {

// LOGITS: T frames of N_CLASSES scores (any monotone transform of the log-probabilities), blank = BLANK.
std::vector<TimedToken> ctc_greedy(const float * logits, int T, int n_classes, int blank);

} // namespace transcribe
