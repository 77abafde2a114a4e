// OpenAI Whisper's transcribe() seek loop (whisper/transcribe.py) over a recording's log-mel: 30-second
// windows from `seek`, each decoded with the previous segments' tokens as its prompt
// (condition_on_previous_text), the no-speech skip, the cut of a window's tokens into segments at
// consecutive timestamp tokens, and the next seek from where the last complete segment ended. The window
// decode itself is the caller's (a family runs its encoder and decoder), at each temperature of the
// fallback (decode_with_fallback) until one is neither too repetitive nor too unlikely.
#pragma once

#include "core/tokenizer.h"
#include "decoding/whisper_decoding.h"
#include "decoding/whisper_timing.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace transcribe {

// One window's decode (decode()'s DecodingResult).
struct WhisperWindowResult {
    std::vector<int32_t> tokens;
    double avg_logprob = 0.0;
    float  no_speech_prob = 0.0f;
    float  temperature = 0.0f;
    double compression_ratio = 0.0;
};

struct WhisperSegment {
    int                  id = 0;
    int                  seek = 0; // the window's first mel frame
    double               start = 0.0, end = 0.0; // seconds
    std::string          text;
    std::vector<int32_t> tokens;
    float                temperature = 0.0f;
    double               avg_logprob = 0.0, compression_ratio = 0.0;
    float                no_speech_prob = 0.0f;
    std::vector<WhisperWordTiming> words; // with word timestamps (times in the recording)
};

struct WhisperLongFormOptions {
    bool  condition_on_previous_text = true;
    float no_speech_threshold = 0.6f;   // NaN: no skip
    float logprob_threshold   = -1.0f;  // NaN: none
    float compression_ratio_threshold = 2.4f; // NaN: none
    std::vector<float> temperatures {0.0f};   // tried in turn while the decode needs a fallback
    std::vector<int32_t> initial_prompt_tokens; // encode(" " + initial_prompt.strip())
    int   n_text_ctx = 448;
    int   window_frames = 3000; // N_FRAMES
    int   input_stride  = 2;    // mel frames per encoder frame (N_FRAMES / n_audio_ctx)
    int   hop_length    = 160;  // HOP_LENGTH: times are whisper's float64 expressions of these
    int   sample_rate   = 16000;
};

struct WhisperLongFormResult {
    std::vector<WhisperSegment> segments;
    std::vector<int32_t>        all_tokens; // the initial prompt's, then every kept segment's
    std::string                 text;       // decode(all_tokens past the initial prompt)
};

// Decodes the window of SEGMENT_SIZE mel frames from SEEK (zero-padded to a full window by the callee)
// after PROMPT (the previous text tokens; empty: none) at TEMPERATURE.
using WhisperWindowDecoder =
    std::function<WhisperWindowResult(int seek, int segment_size, const std::vector<int32_t> & prompt, float temperature)>;
// Word timestamps: find_alignment of TEXT_TOKENS over the window just decoded (NUM_FRAMES of its frames
// are audio).
using WhisperWindowAligner =
    std::function<std::vector<WhisperWordTiming>(const std::vector<int32_t> & text_tokens, int num_frames)>;

// ALIGN given: word_timestamps=True (words on every segment, segment times moved to them, and a window
// that ends mid-segment followed from its last word's end).
WhisperLongFormResult whisper_long_form(int content_frames, const WhisperVocab & vocab, const Tokenizer & tokenizer,
                                        const WhisperLongFormOptions & options, const WhisperWindowDecoder & decode,
                                        const WhisperWindowAligner & align = {});

// len(text bytes) / len(zlib.compress(text bytes)): whisper's compression_ratio (0 for empty text).
double whisper_compression_ratio(const std::string & text);

} // namespace transcribe
