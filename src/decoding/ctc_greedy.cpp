#include "ctc_greedy.h"

#include <algorithm>

namespace transcribe {

void CtcGreedy::feed(const float * logits, int T, std::vector<TimedToken> & out) {
    if (previous_ < 0) {
        previous_ = blank_;
    }
    for (int i = 0; i < T; ++i, ++t_) {
        const float * row = logits + size_t(i) * size_t(n_classes_);
        int id = int(std::max_element(row, row + n_classes_) - row);
        if (boost_ && id != blank_ && id != previous_) {
            id = boost_->pick(row, previous_ == blank_ ? -1 : previous_);
            boost_->emit(id);
        }
        if (id != blank_ && (id != previous_ || previous_ == blank_)) {
            // The first token is also the first non-blank frame.
            const int64_t start = emitted_ ? end_ : std::max<int64_t>(0, t_ - 1);
            end_     = t_;
            emitted_ = true;
            out.push_back({id, start, end_});
        }
        previous_ = id;
    }
}

std::vector<TimedToken> ctc_greedy(const float * logits, int T, int n_classes, int blank, PhraseBoost * boost) {
    std::vector<TimedToken> tokens;
    CtcGreedy(n_classes, blank, boost).feed(logits, T, tokens);
    return tokens;
}

} // namespace transcribe
