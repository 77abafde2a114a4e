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

// The same over frames that come a few at a time (a stream's steps): each feed() folds its frames after
// the frames before them, as one ctc_greedy over all of them would (a repeat across feeds folds too).
class CtcGreedy {
public:
    CtcGreedy(int n_classes, int blank, PhraseBoost * boost = nullptr) : n_classes_(n_classes), blank_(blank), boost_(boost) {}
    // T more frames; appends the tokens they emit to OUT (times in frames of the whole sequence).
    void feed(const float * logits, int T, std::vector<TimedToken> & out);

private:
    int           n_classes_, blank_;
    PhraseBoost * boost_;
    int           previous_ = -1; // the previous frame's id (-1: none yet, as a blank)
    int64_t       t_ = 0, end_ = 0;
    bool          emitted_ = false;
};

} // namespace transcribe
