// OpenAI Whisper's word timestamps (whisper/timing.py): the cross-attention of the alignment heads over
// one pass of [sot sequence, <|notimestamps|>, text, <|endoftext|>], softmax over the window's frames,
// standardised over the tokens, a median filter of width 7, the heads' mean, DTW, the token jumps as
// times; words from the tokenizer's split, their probabilities, the median/max duration rules, the
// punctuation merged into neighbours, and the segments' starts and ends moved to their words.
#pragma once

#include "core/tokenizer.h"
#include "decoding/whisper_decoding.h"

#include <cstdint>
#include <string>
#include <vector>

namespace transcribe {

struct WhisperWordTiming {
    std::string          word;
    std::vector<int32_t> tokens;
    double               start = 0.0, end = 0.0; // seconds in the window
    double               probability = 0.0;
};

// timing.dtw: the path (text indices, time indices) of least cost through X [N][M] (row-major).
void whisper_dtw(const std::vector<double> & x, int n, int m, std::vector<int> & text_indices, std::vector<int> & time_indices);

// split_to_word_tokens: words (their decoded text) and their tokens; LANGUAGE picks the unicode split for
// languages written without spaces.
void whisper_split_words(const Tokenizer & tokenizer, const WhisperVocab & vocab, const std::vector<int32_t> & tokens,
                         const std::string & language, std::vector<std::string> & words,
                         std::vector<std::vector<int32_t>> & word_tokens);

// The pass find_alignment reads: for each alignment head, its pre-softmax cross-attention scores
// [T][n_frames] (already scaled: (q / d^0.25) . (k / d^0.25)); the logits [T][n_vocab].
struct WhisperAlignmentInput {
    std::vector<std::vector<float>> head_scores;
    int                             n_frames = 0; // columns of each head_scores row
    std::vector<float>              logits;
    int                             n_vocab = 0;
};

// find_alignment: TEXT_TOKENS' words and times in a window of NUM_FRAMES mel frames; SOT_LENGTH is the
// sot sequence's (the pass's tokens are it, <|notimestamps|>, the text, <|endoftext|>).
std::vector<WhisperWordTiming> whisper_find_alignment(const WhisperAlignmentInput & in, const std::vector<int32_t> & text_tokens,
                                                      int sot_length, int num_frames, const Tokenizer & tokenizer,
                                                      const WhisperVocab & vocab, const std::string & language);

// A segment as add_word_timestamps reads and adjusts it.
struct WhisperTimedSegment {
    double                         start = 0.0, end = 0.0;
    std::vector<int32_t>           tokens;
    std::vector<WhisperWordTiming> words; // set here (times in the recording, rounded to 0.01 s)
};

// add_word_timestamps over the window's segments (ALIGNMENT of their text tokens), from TIME_OFFSET
// (the window's start, seconds), after speech that ended at LAST_SPEECH_TIMESTAMP.
void whisper_add_word_timestamps(std::vector<WhisperTimedSegment> & segments, std::vector<WhisperWordTiming> alignment,
                                 double time_offset, const WhisperVocab & vocab, double last_speech_timestamp);

// Python's round(x, 2) (the exact binary value rounded half to even).
double round_to_hundredths(double x);

} // namespace transcribe
