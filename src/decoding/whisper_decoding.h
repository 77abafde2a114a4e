// OpenAI Whisper's decoding of one 30-second window (whisper/decoding.py DecodingTask) over any
// StepDecoder: the logit filters in their order (SuppressBlank, SuppressTokens, ApplyTimestampRules),
// then GreedyDecoder or BeamSearchDecoder (whisper's own beam search, not NeMo's) and the
// MaximumLikelihoodRanker; the language detection that decode() runs when no language is given.
#pragma once

#include "blocks/step_decoder.h"

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace transcribe {

// The special tokens and lists the rules read (whisper's Tokenizer).
struct WhisperVocab {
    int32_t eot = 0, sot = 0, sot_prev = 0, sot_lm = 0, no_speech = 0, no_timestamps = 0, timestamp_begin = 0,
            translate = 0, transcribe = 0;
    int32_t n_vocab = 0;
    std::vector<int32_t> language_tokens;
    std::vector<int32_t> blank_tokens;      // encode(" "): SuppressBlank's ids, EOT added to them
    std::vector<int32_t> non_speech_tokens; // Tokenizer.non_speech_tokens (suppress_tokens "-1")
};

struct WhisperDecodeOptions {
    bool  timestamps    = true;  // !without_timestamps: ApplyTimestampRules
    int   sample_len    = 224;   // n_text_ctx // 2
    int   n_ctx         = 448;   // n_text_ctx: decoding stops once the sequence is longer
    int   max_initial_timestamp_index = 50; // round(max_initial_timestamp / 0.02); < 0: none
    bool  suppress_blank = true;
    bool  suppress_non_speech = true; // suppress_tokens "-1" (else: only the special tokens decode() always adds)
    int   beam_size     = 0;     // 0: greedy (or sampling)
    float temperature   = 0.0f;  // > 0: tokens drawn from softmax(logits / temperature) (beam_size ignored)
    int   best_of       = 0;     // temperature > 0: this many samples, the most likely kept
    std::mt19937_64 * rng = nullptr; // the draws' generator (temperature > 0)
    float patience      = 1.0f;
    float length_penalty = -1.0f; // < 0: None (rank by sum / length)
};

// The filters of one decode: SAMPLE_BEGIN is the number of initial tokens (the prompt, the sot sequence).
class WhisperLogitFilters {
public:
    WhisperLogitFilters(const WhisperVocab & vocab, const WhisperDecodeOptions & options, int sample_begin);
    // LOGITS [n_vocab] of the position after TOKENS (initial tokens included), filtered in place.
    void apply(std::vector<float> & logits, const std::vector<int32_t> & tokens) const;
    // SuppressTokens' ids: decode()'s _get_suppress_tokens, sorted.
    const std::vector<int32_t> & suppress_tokens() const { return suppress_; }

private:
    const WhisperVocab &         v_;
    WhisperDecodeOptions         o_;
    int                          sample_begin_;
    std::vector<int32_t>         suppress_;
};

struct WhisperDecodeResult {
    std::vector<int32_t> tokens;      // sampled, up to (not including) the first EOT
    float                sum_logprob = 0.0f;
    double               avg_logprob = 0.0; // sum_logprob / (len(tokens) + 1)
    int                  n_steps = 0;       // decoder passes after the prompt's
    std::vector<std::vector<int32_t>> candidates; // beam search: every finished sequence (EOT excluded)
    std::vector<float>                candidate_sums;
};

// Decodes after a prompt of INITIAL tokens already fed to sequence SEQS[0] of DECODER, whose last
// position's raw logits are FIRST_LOGITS. Greedy uses SEQS[0] alone; beam search options.beam_size of
// them. BETWEEN_STEPS runs before each decoder pass (abort checks); ON_TOKEN gets each greedy token;
// RAW_STEP_LOGITS (greedy) each step's logits before the filters.
WhisperDecodeResult whisper_decode(StepDecoder & decoder, const std::vector<int> & seqs, std::vector<float> first_logits,
                                   const std::vector<int32_t> & initial, const WhisperVocab & vocab,
                                   const WhisperDecodeOptions & options, const std::function<void()> & between_steps,
                                   const std::function<void(int32_t)> & on_token = {},
                                   std::vector<std::vector<float>> * raw_step_logits = nullptr);

// detect_language on the logits of the sot position: every non-language logit masked, the argmax token
// and the softmax probability of each language token (in VOCAB.language_tokens order).
int32_t whisper_detect_language(const std::vector<float> & sot_logits, const WhisperVocab & vocab,
                                std::vector<float> * probs = nullptr);

} // namespace transcribe
