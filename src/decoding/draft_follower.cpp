#include "draft_follower.h"

#include <algorithm>
#include <cstdlib>

namespace transcribe {

namespace {
// How fast the agreement estimate follows: a few tokens turn it, so a draft that goes wrong for a
// word costs a step or two, and one that comes back is trusted again as quickly.
constexpr float kLearn = 0.25f;
// Realigning on the last few decoded tokens: the longest of up to this many found in the draft wins.
constexpr int kContext = 3;
// A single decoded token realigns the draft only this close to where it was expected (one token is
// too common a match to trust farther away); longer matches may be anywhere.
constexpr long kSingleTokenReach = 4;
} // namespace

int proposals_worth_checking(float p, float column_cost, int max) {
    p = std::clamp(p, 0.0f, 1.0f);
    int    best      = 0;
    double best_rate = 1.0; // a plain step: one token for one step
    double expected  = 1.0, power = 1.0;
    for (int k = 1; k <= max; ++k) {
        power *= p;
        expected += power;
        const double rate = expected / (1.0 + double(column_cost) * k);
        if (rate > best_rate * 1.0001) {
            best      = k;
            best_rate = rate;
        }
    }
    return best;
}

DraftFollower::DraftFollower(std::vector<int32_t> draft, float column_cost)
    : draft_(std::move(draft)), column_cost_(column_cost) {}

std::vector<int32_t> DraftFollower::propose(int limit) const {
    const int k = std::min(limit, proposals_worth_checking(agreement_, column_cost_, kMaxProposals));
    if (k <= 0 || cursor_ >= draft_.size()) {
        return {};
    }
    const size_t n = std::min(size_t(k), draft_.size() - cursor_);
    return std::vector<int32_t>(draft_.begin() + std::ptrdiff_t(cursor_), draft_.begin() + std::ptrdiff_t(cursor_ + n));
}

void DraftFollower::observe(const std::vector<int32_t> & decoded) {
    if (decoded.empty()) {
        return;
    }
    if (cursor_ < draft_.size()) {
        const bool hit = draft_[cursor_] == decoded.back();
        agreement_ += kLearn * ((hit ? 1.0f : 0.0f) - agreement_);
        if (hit) {
            ++cursor_;
            return;
        }
    }
    cursor_ = realign(decoded);
}

// Where the draft goes on after DECODED, whose last token it did not expect: just past the longest run
// of DECODED's last tokens found in it (the nearest such place to the expected one), else one past the
// expected token, as if the draft had a wrong word where the decoder has its own.
size_t DraftFollower::realign(const std::vector<int32_t> & decoded) const {
    const long expected = long(std::min(cursor_ + 1, draft_.size()));
    const int  longest  = int(std::min<size_t>(kContext, decoded.size()));
    for (int n = longest; n >= 1; --n) {
        long best = -1;
        for (long end = n; end <= long(draft_.size()); ++end) {
            if (n == 1 && std::labs(end - expected) > kSingleTokenReach) {
                continue;
            }
            if (!std::equal(decoded.end() - n, decoded.end(), draft_.begin() + (end - n))) {
                continue;
            }
            if (best < 0 || std::labs(end - expected) < std::labs(best - expected)) {
                best = end;
            }
        }
        if (best >= 0) {
            return size_t(best);
        }
    }
    return size_t(expected);
}

} // namespace transcribe
