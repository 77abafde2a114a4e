#include "ctc_greedy.h"

#include <algorithm>

namespace transcribe {

std::vector<TimedToken> ctc_greedy(const float * logits, int T, int n_classes, int blank, PhraseBoost * boost) {
    std::vector<TimedToken> tokens;
    int     previous = blank;
    int64_t end      = 0;
    for (int t = 0; t < T; ++t) {
        const float * row = logits + size_t(t) * size_t(n_classes);
        int id = int(std::max_element(row, row + n_classes) - row);
        if (boost && id != blank && id != previous) {
            id = boost->pick(row, previous == blank ? -1 : previous);
            boost->emit(id);
        }
        if (id != blank && (id != previous || previous == blank)) {
            // The first token is also the first non-blank frame.
            const int64_t start = tokens.empty() ? std::max(0, t - 1) : end;
            end = t;
            tokens.push_back({id, start, end});
        }
        previous = id;
    }
    return tokens;
}

} // namespace transcribe
