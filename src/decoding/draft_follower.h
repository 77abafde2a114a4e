// Speculative decoding's bookkeeping for one sequence, shared by every decoder that checks drafts: a
// draft transcript (ids in the decoder's own vocabulary, from a faster model or given outright) kept
// aligned with what the decoder has produced, how often it has agreed, and how many of its tokens a
// step should check.
//
// The decoder checks the proposals in one pass and keeps the longest prefix equal to its own greedy
// choices, so the draft decides only how fast the ids come, never which ids they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace transcribe {

class DraftFollower {
public:
    // COLUMN_COST: what one more token in a decode step costs, as a share of a one-token step (the
    // weights are read once a step; each column adds its own arithmetic and attention).
    explicit DraftFollower(std::vector<int32_t> draft, float column_cost = kDefaultColumnCost);

    // The draft tokens to check after what has been decoded, at most LIMIT: as many as the agreement
    // seen so far makes worth a step's extra columns (none while the draft is rarely right).
    std::vector<int32_t> propose(int limit) const;
    // The decoder produced DECODED.back() after the rest of DECODED: the cursor follows it (or finds its
    // place again in the draft) and the agreement estimate learns whether the draft had it right.
    void observe(const std::vector<int32_t> & decoded);

    // The share of recent decoded tokens the draft had right, from an even prior (one hit, one miss).
    float agreement() const { return (hits_ + 1.0f) / (seen_ + 2.0f); }
    size_t cursor() const { return cursor_; }

    static constexpr float kDefaultColumnCost = 0.12f;
    static constexpr int   kMaxProposals      = 16;

private:
    size_t realign(const std::vector<int32_t> & decoded) const;

    std::vector<int32_t> draft_;
    float                column_cost_;
    size_t               cursor_    = 0;    // the draft token expected next
    float                hits_ = 0.0f, seen_ = 0.0f; // recent tokens the draft had right, and had at all
    bool                 missed_    = false; // the last decoded token was not the draft's
};

// How many of a draft's tokens to check in a step when each is right with probability P and one more
// column costs COLUMN_COST of a step: the k <= MAX that yields the most tokens per unit of step time,
// (1 + P + ... + P^k) / (1 + COLUMN_COST k); 0 where no k beats a plain step.
int proposals_worth_checking(float p, float column_cost, int max);

} // namespace transcribe
