// Long recordings: cut at the quietest points near the window limit, transcribe piece by piece with
// one session, and join the pieces into timed segments of the original audio.
#pragma once

#include "family.h"

#include <cstddef>
#include <vector>

namespace transcribe {

struct AudioSpan {
    size_t begin = 0; // samples
    size_t end   = 0;
};

// Pieces of at most max_len samples covering [0, n). Each cut lies in the last quarter of its window,
// in the middle of the quietest 200 ms there (short-time energy), so a pause, when there is one, is
// where the cut goes.
std::vector<AudioSpan> split_at_pauses(const float * x, size_t n, int sample_rate, size_t max_len);

// The span of `piece` without leading and trailing silence (frames 35 dB below the piece's loudest).
AudioSpan trim_silence(const float * x, AudioSpan piece, int sample_rate);

// Runs `session` on each piece of at most window_samples and joins the results: one segment per
// piece, times in the original audio, truncation reported per segment and overall.
Transcript transcribe_pieces(Session & session, const float * x, size_t n, int sample_rate, size_t window_samples,
                             const RunOptions & options);

} // namespace transcribe
