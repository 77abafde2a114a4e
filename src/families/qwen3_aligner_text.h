// What Qwen3-ForcedAligner reads and what its timestamps become (qwen_asr/inference/qwen3_forced_aligner.py,
// Qwen3ForceAlignProcessor): the units a transcript is aligned in, and fix_timestamp's repair of slots
// that run backwards. Strings are UTF-8, handled by code point as Python's str is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace transcribe::qwen3_aligner {

// tokenize_space_lang: TEXT split at whitespace, each part reduced to its letters, digits and apostrophes
// (is_kept_char: Unicode categories L* and N*, and "'"), then cut around CJK ideographs, each one a unit
// of its own. The reference takes Japanese and Korean through word segmenters (nagisa, soynlp) instead;
// for them this is the same split, which keeps words written with spaces whole.
std::vector<std::string> split_units(const std::string & text);

// fix_timestamp over the slots' times (ms): the longest non-decreasing subsequence is kept (the first
// of equal length, each element's earliest predecessor); a run of at most 2 others takes its nearer
// kept neighbour's time (the left one on a tie), a longer run is spread evenly between its neighbours
// (or copies the only one it has); each result truncated to an integer as Python's int() does.
std::vector<int64_t> fix_timestamps(const std::vector<double> & ms);

} // namespace transcribe::qwen3_aligner
