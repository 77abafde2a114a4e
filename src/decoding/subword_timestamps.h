// Word and segment times from timed subword tokens, by NeMo's rules for BPE transducer models
// (timestamp_utils.get_words_offsets / get_segment_offsets, _refine_timestamps_tdt, and the
// transcript's strip of a space before punctuation). Times stay in encoder frames here; the family
// converts them.
#pragma once

#include "core/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace transcribe {

struct TimedToken {
    int32_t id    = 0;
    int64_t start = 0; // frames
    int64_t end   = 0;
};

struct TimedText {
    std::string text;
    int64_t     start = 0;
    int64_t     end   = 0;
    size_t      first = 0, count = 0; // what it is made of: tokens for a word, words for a segment
};

struct SubwordRules {
    std::vector<std::string> punctuation;        // single characters (NeMo's supported_punctuation)
    std::vector<std::string> segment_separators; // a word ending in one ends a segment
    int64_t segment_gap_frames = 0;              // > 0: a gap of this many frames ends a segment instead
    bool is_punctuation(const std::string & s) const;
};

// A token whose whole text is a punctuation mark (not the first token) starts and ends where the
// previous token ends; one that merely starts with one keeps its times.
void refine_punctuation_times(std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules);

// CTC's rule (NeMo's ctc_decoding._refine_timestamps): a token (not the first) whose text STARTS with a
// punctuation mark ends where it starts (its text is one string there, so offset['char'][0] is its first
// character, where the transducers' list holds the whole text).
void refine_ctc_punctuation_times(std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules);

// Words: a token whose piece differs from its text (a word-initial piece) starts a word; punctuation
// joins the word before it.
std::vector<TimedText> word_offsets(const std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules);

// Segments: words joined by spaces up to a word whose last character is a separator (or that is one);
// with segment_gap_frames, up to a gap that long between words (a separator then ends a segment only
// as its first word, as NeMo's get_segment_offsets does).
std::vector<TimedText> segment_offsets(const std::vector<TimedText> & words, const SubwordRules & rules);

// Python's str.strip(): Unicode whitespace (str.isspace()) off both ends.
std::string python_strip(const std::string & text);

// One whitespace character (Unicode, as Python's \s) before each punctuation mark removed.
std::string strip_space_before_punctuation(const std::string & text, const SubwordRules & rules);

} // namespace transcribe
