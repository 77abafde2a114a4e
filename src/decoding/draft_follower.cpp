#include "draft_follower.h"

#include <algorithm>
#include <cstdlib>

namespace transcribe {

namespace {
// The agreement estimate counts hits among the recent decoded tokens, each older token weighing this
// much less than the next: about the last few dozen tokens count, so a draft good in one stretch and
// poor in another is trusted by stretch, while one wrong word among right ones changes it little.
constexpr float kMemory = 31.0f / 32.0f;
// Lost (two misses in a row), the follower looks for the last few decoded tokens in the draft: the
// longest of up to this many found wins.
constexpr int kContext = 3;
// A single decoded token resyncs the draft only this close to where it was expected (one token is
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
    const int k = std::min(limit, proposals_worth_checking(agreement(), column_cost_, kMaxProposals));
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
        hits_ = hits_ * kMemory + (hit ? 1.0f : 0.0f);
        seen_ = seen_ * kMemory + 1.0f;
        if (hit) {
            ++cursor_;
            missed_ = false;
            return;
        }
    }
    cursor_ = realign(decoded);
    missed_ = true;
}

// Where the draft goes on after DECODED, whose last token T it did not expect at the cursor C: the
// fewest edits that explain T. The draft had one token too many: T is the one after C (unless the
// token after that is T again, when a wrong token at C explains it as well and keeps the draft's
// tokens where the decoder's are, as a draft of one repeated word needs). The last miss
// was a token the draft lacks (taken then for a wrong token, C moved on): T is the one before C, and C
// stays. Two misses in a row: the follower is lost, and resyncs on the last few decoded tokens where
// they are in the draft. Otherwise the draft had a wrong token where T is: C + 1.
size_t DraftFollower::realign(const std::vector<int32_t> & decoded) const {
    const int32_t t = decoded.back();
    const size_t  c = cursor_, n_draft = draft_.size();
    if (c + 1 < n_draft && draft_[c + 1] == t && (c + 2 >= n_draft || draft_[c + 2] != t)) {
        return c + 2;
    }
    if (missed_ && c >= 1 && c - 1 < n_draft && draft_[c - 1] == t) {
        return c;
    }
    const long expected = long(std::min(c + 1, n_draft));
    if (missed_) {
        const int longest = int(std::min<size_t>(kContext, decoded.size()));
        for (int n = longest; n >= 1; --n) {
            long best = -1;
            for (long end = n; end <= long(n_draft); ++end) {
                if (n == 1 && std::labs(end - expected) > kSingleTokenReach) {
                    continue;
                }
                if (!std::equal(decoded.end() - n, decoded.end(), draft_.begin() + (end - n))) {
                    continue;
                }
                // The nearest to the expected place; of two as near, the later (drafts run forward).
                if (best < 0 || std::labs(end - expected) <= std::labs(best - expected)) {
                    best = end;
                }
            }
            if (best >= 0) {
                return size_t(best);
            }
        }
    }
    return size_t(expected);
}

} // namespace transcribe
