// Greedy CTC decoding as NeMo's greedy_batch decoder and CTCDecoding do it: every frame's argmax, folded
// (a frame emits its id when that is not the blank and differs from the previous frame's, or the previous
// frame's was the blank: "a a _ a" gives two a's), each token with NeMo's CTC offsets
// (ctc_decoding._compute_offsets): it ends at its own first frame and starts where the previous token
// ended; the first starts one frame before the first non-blank frame (at least at 0).
#pragma once

#include "decoding/subword_timestamps.h"
#include "decoding/phrase_boosting.h"

#include <vector>

namespace transcribe {

// LOGITS: T frames of N_CLASSES scores (the log-probabilities, or the logits they are a softmax of),
// blank = BLANK. BOOST (hotwords): as NeMo's greedy_batch with a boosting tree: a frame whose argmax is
// neither the blank nor the previous frame's id takes the best token by logit + weight x boost (never the
// previous frame's id), and the tree follows it.
std::vector<TimedToken> ctc_greedy(const float * logits, int T, int n_classes, int blank, PhraseBoost * boost = nullptr);

} // namespace transcribe
