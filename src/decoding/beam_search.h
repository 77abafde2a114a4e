// Beam search as NeMo's BeamSearchSequenceGenerator runs it, over any StepDecoder: the prompt's
// log-probabilities give the first beam_size tokens, then every step extends each beam by its
// beam_size best tokens and keeps the beam_size best of the beam_size^2 candidates (scores summed
// log-probabilities, compared after dividing by the length penalty ((5 + len) / 6)^alpha). A beam that
// ended (its last token end-of-text or pad) goes on with pad at no cost; its other candidates get
// 10001 x their log-probability (NeMo's pad_mask * NEG_INF with NEG_INF = -10000: a penalty, not a
// ban). A first token end-of-text does not end a beam yet (NeMo starts its pad profile at zero).
#pragma once

#include "blocks/step_decoder.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace transcribe {

struct BeamSearchConfig {
    int     beam_size      = 4;
    int     max_steps      = 0;    // steps after the prompt's (NeMo: max_sequence_length - prompt length)
    float   length_penalty = 0.0f; // alpha
    int32_t eos = 0, pad = 0;
    int     prompt_length = 0;     // counted in the penalty's length, as NeMo counts the whole prefix
};

struct BeamHypothesis {
    std::vector<int32_t> tokens; // generated, trailing end-of-text / pad included
    float                score = 0.0f; // summed log-probabilities (before the length penalty)
};

struct BeamSearchResult {
    std::vector<BeamHypothesis> hypotheses; // the final beams, in beam order
    size_t best     = 0;                    // the highest score over length penalty (the first of equals)
    int    n_steps  = 0;                    // decoder passes after the prompt's
    bool   finished = false;                // every beam ended before the steps ran out
};

// Beams live in decoder sequences SEQS (SEQS[0] holds the prompt; the others are overwritten);
// FIRST_LOGITS are the prompt's last-position logits. BETWEEN_STEPS runs before each step (abort checks).
BeamSearchResult beam_search(StepDecoder & decoder, const std::vector<int> & seqs, const std::vector<float> & first_logits,
                             const BeamSearchConfig & config, const std::function<void()> & between_steps);

// log_softmax of LOGITS in float, as torch computes it (max subtracted, the sum's log).
std::vector<float> log_softmax(const std::vector<float> & logits);
// log_softmax(LOGITS)[ID], the same bits, without the vector.
float log_softmax_at(const std::vector<float> & logits, int32_t id);
// softmax(ROW[0, N))[ID] in float, as torch's softmax computes it.
float softmax_at(const float * row, int n, int32_t id);

} // namespace transcribe
