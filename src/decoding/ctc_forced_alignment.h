// Forced alignment of a given text to a CTC model's log-probabilities, as NeMo Forced Aligner does it
// (parts/utils/aligner_utils.py): the text cut into segments at a '.', '?' or '!' followed by a space and
// into words at spaces, each word tokenized on its own with a blank between every two tokens and at both
// ends; Viterbi over that chain (a state may repeat, step to the next, or skip a blank between two
// different tokens); each segment, word and token spans from the first frame its first state holds to
// the last frame its last state holds.
#pragma once

#include "core/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace transcribe {

struct AlignedSpan {
    std::string text;
    int64_t     first_frame = -1; // -1: the text could not be aligned
    int64_t     end_frame   = -1; // one past its last frame
};

struct AlignedSegment {
    AlignedSpan              span;
    std::vector<AlignedSpan> words;
};

// NeMo's chain for TEXT: the token ids with blanks ([blank, t1, blank, t2, ..., blank]) and where each
// segment and word begins and ends in it. Empty when the whole text has more tokens than FRAMES (NeMo
// leaves such an utterance unaligned) or no tokens at all.
struct AlignmentChain {
    std::vector<int32_t> states;
    struct Span {
        std::string text;
        int         s_start = 0, s_end = 0;
    };
    struct Segment {
        Span              span;
        std::vector<Span> words;
    };
    std::vector<Segment> segments;
};
AlignmentChain alignment_chain(const std::string & text, const Tokenizer & tokenizer, int32_t blank, int frames);

// NeMo's viterbi_decoding for one utterance: the chain state of every frame. LOG_PROBS: FRAMES rows of
// N_CLASSES (float32 sums, ties to the earlier candidate as torch.max does).
std::vector<int> ctc_viterbi(const float * log_probs, int frames, int n_classes, const std::vector<int32_t> & states);

// The whole of it: TEXT's segments and words with their frames (none when the text cannot be aligned).
std::vector<AlignedSegment> ctc_forced_alignment(const float * log_probs, int frames, int n_classes, const std::string & text,
                                                 const Tokenizer & tokenizer, int32_t blank);

} // namespace transcribe
