// Whisper's decoding rules by hand, each branch of the reference code on a small made-up vocabulary:
// SuppressBlank, SuppressTokens, every branch of ApplyTimestampRules (whisper/decoding.py), and the cuts
// and seeks of transcribe()'s loop (whisper/transcribe.py) on scripted window decodes.
#include "decoding/whisper_decoding.h"
#include "decoding/whisper_long_form.h"
#include "decoding/whisper_timing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace transcribe;

namespace {

// ids: 0..9 text (0 = ' '), 10 eot, 11 sot, 12 sot_prev, 13 sot_lm, 14 no_speech, 15 no_timestamps,
// 16 translate, 17 transcribe, 18 <|en|>, 19.. timestamps (19 = 0.00 s, 20 = 0.02 s, ...), 30 of them.
WhisperVocab vocab() {
    WhisperVocab v;
    v.eot = 10, v.sot = 11, v.sot_prev = 12, v.sot_lm = 13, v.no_speech = 14, v.no_timestamps = 15, v.translate = 16,
    v.transcribe = 17, v.timestamp_begin = 19, v.n_vocab = 49;
    v.language_tokens   = {18};
    v.blank_tokens      = {0};
    v.non_speech_tokens = {9};
    return v;
}
const std::vector<int32_t> kPrompt = {11, 18, 17}; // sot, en, transcribe: sample_begin 3
constexpr float kInf = INFINITY;

bool masked(const std::vector<float> & l, int id) { return std::isinf(l[size_t(id)]) && l[size_t(id)] < 0; }

// Flat logits with the given ids raised.
std::vector<float> logits(const std::map<int, float> & raised = {}) {
    std::vector<float> l(49, 0.0f);
    for (auto [id, x] : raised) {
        l[size_t(id)] = x;
    }
    return l;
}

std::vector<int32_t> with(std::vector<int32_t> sampled) {
    std::vector<int32_t> t = kPrompt;
    t.insert(t.end(), sampled.begin(), sampled.end());
    return t;
}

} // namespace

TEST(WhisperRules, First_step_suppresses_blank_and_eot_and_allows_only_early_timestamps) {
    const WhisperVocab v = vocab();
    WhisperDecodeOptions o;
    o.max_initial_timestamp_index = 2; // up to 0.04 s
    const WhisperLogitFilters f(v, o, 3);
    std::vector<float> l = logits({{1, 5.0f}});
    f.apply(l, kPrompt);
    for (int id = 0; id < 19; ++id) {
        EXPECT_TRUE(masked(l, id)) << id; // text, blank, eot, specials: all before timestamp_begin
    }
    for (int id = 19; id <= 21; ++id) {
        EXPECT_FALSE(masked(l, id)) << id;
    }
    for (int id = 22; id < 49; ++id) {
        EXPECT_TRUE(masked(l, id)) << id;
    }
}

TEST(WhisperRules, Without_timestamps_only_blank_and_the_suppress_list_are_masked) {
    const WhisperVocab v = vocab();
    WhisperDecodeOptions o;
    o.timestamps = false;
    const WhisperLogitFilters f(v, o, 3);
    std::vector<float> l = logits();
    f.apply(l, kPrompt);
    for (int id : {0, 9, 10, 11, 12, 13, 14, 16, 17}) {
        EXPECT_TRUE(masked(l, id)) << id;
    }
    for (int id : {1, 8, 15, 18, 19, 48}) { // <|notimestamps|> and timestamps stay (whisper does not mask them)
        EXPECT_FALSE(masked(l, id)) << id;
    }
    // After the first step neither blank nor EOT is suppressed.
    l = logits();
    f.apply(l, with({1}));
    EXPECT_FALSE(masked(l, 0));
    EXPECT_FALSE(masked(l, 10));
    EXPECT_TRUE(masked(l, 9));
}

TEST(WhisperRules, Timestamps_come_in_pairs_and_never_go_back) {
    const WhisperVocab v = vocab();
    const WhisperLogitFilters f(v, WhisperDecodeOptions {}, 3);
    // An opening timestamp (ts then ts-or-start before it): the next is text; the timestamps stay masked.
    std::vector<float> l = logits({{1, 3.0f}});
    f.apply(l, with({20}));
    EXPECT_FALSE(masked(l, 1));
    for (int id = 19; id < 49; ++id) {
        EXPECT_TRUE(masked(l, id)) << id;
    }
    // A closing timestamp (text before it): no text; EOT and timestamps from the last one on stay.
    l = logits({{30, 3.0f}, {10, 5.0f}}); // EOT above the timestamps' total: no timestamp forced
    f.apply(l, with({20, 1, 25}));
    for (int id = 0; id < 10; ++id) {
        EXPECT_TRUE(masked(l, id)) << id;
    }
    EXPECT_FALSE(masked(l, 10));
    for (int id = 19; id < 25; ++id) {
        EXPECT_TRUE(masked(l, id)) << id;
    }
    EXPECT_FALSE(masked(l, 25)); // the closing timestamp may open the next segment
    // Text last: timestamps up to the last one + 1 are masked (a segment has a nonzero length).
    l = logits({{1, 4.0f}});
    f.apply(l, with({20, 1}));
    EXPECT_TRUE(masked(l, 20));
    EXPECT_FALSE(masked(l, 21));
    EXPECT_FALSE(masked(l, 1));
    // Two timestamps in a row: the next is text (or EOT).
    l = logits({{1, 3.0f}});
    f.apply(l, with({20, 1, 25, 25}));
    for (int id = 19; id < 49; ++id) {
        EXPECT_TRUE(masked(l, id)) << id;
    }
}

TEST(WhisperRules, Timestamps_win_when_their_total_probability_beats_every_text_token) {
    const WhisperVocab v = vocab();
    const WhisperLogitFilters f(v, WhisperDecodeOptions {}, 3);
    // 30 timestamps at logit 0 hold log(30) ~ 3.4 against one text token at 3.0: text is masked.
    std::vector<float> l = logits({{1, 3.0f}});
    f.apply(l, with({1}));
    EXPECT_TRUE(masked(l, 1));
    // At 4.0 the text token wins: nothing more is masked.
    l = logits({{1, 4.0f}});
    f.apply(l, with({1}));
    EXPECT_FALSE(masked(l, 1));
    EXPECT_FALSE(masked(l, 30));
}

TEST(WhisperRules, Language_detection_takes_the_best_language_token) {
    WhisperVocab v = vocab();
    v.language_tokens = {18, 8};
    std::vector<float> probs;
    EXPECT_EQ(whisper_detect_language(logits({{1, 9.0f}, {8, 2.0f}, {18, 1.0f}}), v, &probs), 8);
    ASSERT_EQ(probs.size(), 2u);
    EXPECT_NEAR(probs[0], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
    EXPECT_NEAR(probs[1], std::exp(1.0) / (1.0 + std::exp(1.0)), 1e-6);
}

namespace {

// A tokenizer for transcribe()'s loop: text id i is the letter 'a' + i (0 is ' ').
class LetterTokenizer final : public Tokenizer {
public:
    std::vector<int32_t> encode(const std::string &) const override { return {}; }
    std::string decode_bytes(const std::vector<int32_t> & ids) const override {
        std::string s;
        for (int32_t id : ids) {
            if (id < 10) { // specials and timestamps are not text here
                s += id == 0 ? ' ' : char('a' + id);
            }
        }
        return s;
    }
    std::string piece(int32_t) const override { return ""; }
    int  n_vocab() const override { return 49; }
    bool is_control(int32_t) const override { return false; }
};

WhisperLongFormOptions options() {
    WhisperLongFormOptions o;
    o.window_frames = 3000; // time per timestamp: 2 x 160 / 16000 = 0.02 s
    return o;
}

} // namespace

TEST(WhisperLongForm, Segments_are_cut_at_timestamp_pairs_and_the_next_window_starts_after_the_last_complete_one) {
    const WhisperVocab v = vocab();
    const LetterTokenizer tok;
    std::vector<std::pair<int, std::vector<int32_t>>> calls;
    // Window 1 (seek 0): [0.00 b 0.10][0.10 c 0.20] then an unfinished "d": the next seek is 0.20 s = 20
    // frames. Window 2 (seek 20): "0.00 e 0.04", no pair: one segment to its last timestamp, seek += 3000.
    const WhisperLongFormResult r = whisper_long_form(3020, v, tok, options(), [&](int seek, int size, const std::vector<int32_t> & prompt, float) {
        calls.emplace_back(seek, prompt);
        WhisperWindowResult w;
        w.avg_logprob = -0.5;
        if (seek == 0) {
            EXPECT_EQ(size, 3000);
            w.tokens = {19, 1, 24, 24, 2, 29, 29, 3};
        } else {
            EXPECT_EQ(seek, 20);
            EXPECT_EQ(size, 3000);
            w.tokens = {19, 4, 21};
        }
        return w;
    });
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_TRUE(calls[0].second.empty());
    EXPECT_EQ(calls[1].second, (std::vector<int32_t> {19, 1, 24, 24, 2, 29})); // the kept segments' tokens
    ASSERT_EQ(r.segments.size(), 3u);
    EXPECT_DOUBLE_EQ(r.segments[0].start, 0.0);
    EXPECT_DOUBLE_EQ(r.segments[0].end, 5 * 0.02);
    EXPECT_DOUBLE_EQ(r.segments[1].start, 5 * 0.02);
    EXPECT_DOUBLE_EQ(r.segments[1].end, 10 * 0.02);
    EXPECT_EQ(r.segments[2].seek, 20);
    EXPECT_DOUBLE_EQ(r.segments[2].start, 20 * 160 / 16000.0);
    EXPECT_DOUBLE_EQ(r.segments[2].end, 20 * 160 / 16000.0 + 2 * 0.02);
    EXPECT_EQ(r.segments[1].text, "c");
    EXPECT_EQ(r.text, "bce");
}

TEST(WhisperLongForm, A_window_without_timestamp_pairs_is_one_segment_to_its_last_timestamp_or_its_end) {
    const WhisperVocab v = vocab();
    const LetterTokenizer tok;
    int n = 0;
    const WhisperLongFormResult r = whisper_long_form(4000, v, tok, options(), [&](int seek, int, const std::vector<int32_t> &, float) {
        WhisperWindowResult w;
        w.tokens = seek == 0 ? std::vector<int32_t> {19, 1, 2, 27} : std::vector<int32_t> {1, 2};
        ++n;
        return w;
    });
    EXPECT_EQ(n, 2);
    ASSERT_EQ(r.segments.size(), 2u);
    EXPECT_DOUBLE_EQ(r.segments[0].end, 8 * 0.02);           // its last timestamp
    EXPECT_DOUBLE_EQ(r.segments[1].start, 30.0);
    EXPECT_DOUBLE_EQ(r.segments[1].end, 30.0 + 1000 * 0.01); // no timestamp: the window's 1000 frames
}

TEST(WhisperLongForm, Silence_is_skipped_unless_the_decode_is_confident_and_empty_segments_are_kept_empty) {
    const WhisperVocab v = vocab();
    const LetterTokenizer tok;
    const WhisperLongFormResult r = whisper_long_form(9000, v, tok, options(), [&](int seek, int, const std::vector<int32_t> &, float) {
        WhisperWindowResult w;
        w.no_speech_prob = 0.9f;
        w.avg_logprob    = seek == 0 ? -2.0 : -0.5; // the first is skipped, the second is confident enough
        w.tokens         = seek == 3000 ? std::vector<int32_t> {19, 1, 22} : std::vector<int32_t> {20, 0, 20};
        return w;
    });
    ASSERT_EQ(r.segments.size(), 2u);
    EXPECT_EQ(r.segments[0].seek, 3000);
    EXPECT_EQ(r.segments[0].text, "b");
    EXPECT_EQ(r.segments[1].seek, 6000); // "0.02 ' ' 0.02": blank text: kept, emptied
    EXPECT_TRUE(r.segments[1].text.empty());
    EXPECT_TRUE(r.segments[1].tokens.empty());
}

TEST(WhisperLongForm, Without_conditioning_each_window_has_no_prompt) {
    const WhisperVocab v = vocab();
    const LetterTokenizer tok;
    WhisperLongFormOptions o = options();
    o.condition_on_previous_text = false;
    o.initial_prompt_tokens      = {5, 6};
    std::vector<std::vector<int32_t>> prompts;
    const WhisperLongFormResult r = whisper_long_form(6000, v, tok, o, [&](int, int, const std::vector<int32_t> & prompt, float) {
        prompts.push_back(prompt);
        WhisperWindowResult w;
        w.tokens = {19, 1, 21};
        return w;
    });
    ASSERT_EQ(prompts.size(), 2u);
    EXPECT_EQ(prompts[0], (std::vector<int32_t> {5, 6})); // the initial prompt, then nothing
    EXPECT_TRUE(prompts[1].empty());
    EXPECT_EQ(r.text, "bb");
}

TEST(WhisperLongForm, A_window_falls_back_to_higher_temperatures_until_it_is_likely_enough) {
    const WhisperVocab v = vocab();
    const LetterTokenizer tok;
    WhisperLongFormOptions o = options();
    o.temperatures = {0.0f, 0.4f, 0.8f};
    std::vector<std::pair<int, float>> tried;
    // Window 1: too repetitive at 0 (ratio 3 > 2.4), too unlikely at 0.4 (-2 < -1), fine at 0.8. Its
    // temperature is above 0.5: window 2 gets no prompt. Window 2: unlikely but probably silence
    // (no-speech 0.9 > 0.6): no fallback, and skipped as silence.
    const WhisperLongFormResult r = whisper_long_form(6000, v, tok, o, [&](int seek, int, const std::vector<int32_t> & prompt, float t) {
        tried.emplace_back(seek, t);
        WhisperWindowResult w;
        w.temperature = t;
        w.tokens      = {19, 1, 21};
        if (seek == 0) {
            w.compression_ratio = t == 0.0f ? 3.0 : 1.0;
            w.avg_logprob       = t == 0.4f ? -2.0 : -0.5;
        } else {
            EXPECT_TRUE(prompt.empty());
            w.avg_logprob    = -2.0;
            w.no_speech_prob = 0.9f;
        }
        return w;
    });
    EXPECT_EQ(tried, (std::vector<std::pair<int, float>> {{0, 0.0f}, {0, 0.4f}, {0, 0.8f}, {3000, 0.0f}}));
    ASSERT_EQ(r.segments.size(), 1u);
    EXPECT_FLOAT_EQ(r.segments[0].temperature, 0.8f);
}

// ---- word timestamps (whisper/timing.py) by hand

TEST(WhisperTiming, Dtw_takes_the_cheapest_path_and_goes_left_on_ties) {
    std::vector<int> text, time;
    // cost [[0, 1, 1], [1, 0, 1]]: diagonal to (1, 1), then left to (1, 2).
    whisper_dtw({0, 1, 1, 1, 0, 1}, 2, 3, text, time);
    EXPECT_EQ(text, (std::vector<int> {0, 1, 1}));
    EXPECT_EQ(time, (std::vector<int> {0, 1, 2}));
    // All equal: at (2, 2) no predecessor is strictly cheapest, so the path comes from the left, then up.
    whisper_dtw({0, 0, 0, 0}, 2, 2, text, time);
    EXPECT_EQ(text, (std::vector<int> {0, 1, 1}));
    EXPECT_EQ(time, (std::vector<int> {0, 0, 1}));
}

namespace {

// Tokens as fixed byte strings (ids past the map decode as nothing); 10 is <|endoftext|>.
class PieceTokenizer final : public Tokenizer {
public:
    explicit PieceTokenizer(std::map<int32_t, std::string> pieces) : pieces_(std::move(pieces)) {}
    std::vector<int32_t> encode(const std::string &) const override { return {}; }
    std::string decode_bytes(const std::vector<int32_t> & ids) const override {
        std::string s;
        for (int32_t id : ids) {
            auto it = pieces_.find(id);
            s += it == pieces_.end() ? "" : it->second;
        }
        return s;
    }
    std::string piece(int32_t) const override { return ""; }
    int  n_vocab() const override { return 49; }
    bool is_control(int32_t) const override { return false; }

private:
    std::map<int32_t, std::string> pieces_;
};

} // namespace

TEST(WhisperTiming, Words_split_at_spaces_and_punctuation_and_join_the_bytes_of_a_character) {
    const WhisperVocab v = vocab();
    // 1 " he", 2 "llo", 3 ",", 4 " w", 5 "\xE4\xBD" and 6 "\xA0" (the two halves of U+4F60), 10 <|endoftext|>.
    const PieceTokenizer tok({{1, " he"}, {2, "llo"}, {3, ","}, {4, " w"}, {5, "\xE4\xBD"}, {6, "\xA0"}, {10, "<|endoftext|>"}});
    std::vector<std::string> words;
    std::vector<std::vector<int32_t>> tokens;
    whisper_split_words(tok, v, {1, 2, 3, 4, 5, 6, 10}, "en", words, tokens);
    EXPECT_EQ(words, (std::vector<std::string> {" hello", ",", " w\xE4\xBD\xA0", "<|endoftext|>"}));
    EXPECT_EQ(tokens, (std::vector<std::vector<int32_t>> {{1, 2}, {3}, {4, 5, 6}, {10}}));
    // Chinese (no spaces): every complete character, or byte run that decodes, is a word.
    whisper_split_words(tok, v, {1, 2, 5, 6, 10}, "zh", words, tokens);
    EXPECT_EQ(words, (std::vector<std::string> {" he", "llo", "\xE4\xBD\xA0", "<|endoftext|>"}));
    EXPECT_EQ(tokens, (std::vector<std::vector<int32_t>> {{1}, {2}, {5, 6}, {10}}));
}

namespace {

WhisperWordTiming word(const char * w, std::vector<int32_t> tokens, double start, double end) {
    WhisperWordTiming t;
    t.word   = w;
    t.tokens = std::move(tokens);
    t.start  = start;
    t.end    = end;
    return t;
}

} // namespace

TEST(WhisperTiming, Punctuation_joins_its_neighbours_and_a_long_sentence_end_is_cut) {
    const WhisperVocab v = vocab();
    // Durations 0.4, 0, 0.1, 0.4, 1.6: the median of the nonzero ones 0.4, max_duration 0.8, so "." (a
    // sentence end) is cut to 0.8 s. ' "' (a space, then a prepended mark) joins the word after it, "," and
    // "." join the word before them; each merged word keeps the times of the word it joined.
    std::vector<WhisperTimedSegment> segs(1);
    segs[0].start  = 10.0;
    segs[0].end    = 12.0;
    segs[0].tokens = {1, 2, 3, 4, 5};
    whisper_add_word_timestamps(segs,
                                {word(" Hello", {1}, 0.0, 0.4), word(",", {2}, 0.4, 0.4), word(" \"", {3}, 0.4, 0.5),
                                 word("world", {4}, 0.5, 0.9), word(".", {5}, 0.9, 2.5)},
                                10.0, v, 9.9);
    ASSERT_EQ(segs[0].words.size(), 2u);
    EXPECT_EQ(segs[0].words[0].word, " Hello,");
    EXPECT_EQ(segs[0].words[0].tokens, (std::vector<int32_t> {1, 2}));
    EXPECT_EQ(segs[0].words[1].word, " \"world.");
    EXPECT_EQ(segs[0].words[1].tokens, (std::vector<int32_t> {3, 4, 5}));
    EXPECT_DOUBLE_EQ(segs[0].words[0].start, 10.0);
    EXPECT_DOUBLE_EQ(segs[0].words[1].start, 10.5);
    EXPECT_DOUBLE_EQ(segs[0].words[1].end, 10.9);
    EXPECT_DOUBLE_EQ(segs[0].start, 10.0); // the segment follows its words
    EXPECT_DOUBLE_EQ(segs[0].end, 10.9);
}

TEST(WhisperTiming, A_first_word_long_after_the_last_speech_is_shortened) {
    const WhisperVocab v = vocab();
    // Median duration 0.2, max 0.4; " a" ends 37 s after the last speech (> 4 x 0.2) and lasts 2 s (> 0.4):
    // it starts max_duration before its end, and the segment with it.
    std::vector<WhisperTimedSegment> segs(1);
    segs[0].start  = 35.0;
    segs[0].end    = 37.4;
    segs[0].tokens = {1, 2, 3};
    whisper_add_word_timestamps(segs, {word(" a", {1}, 5.0, 7.0), word(" b", {2}, 7.0, 7.2), word(" c", {3}, 7.2, 7.4)}, 30.0,
                                v, 0.0);
    ASSERT_EQ(segs[0].words.size(), 3u);
    EXPECT_DOUBLE_EQ(segs[0].words[0].start, 36.6);
    EXPECT_DOUBLE_EQ(segs[0].words[0].end, 37.0);
    EXPECT_DOUBLE_EQ(segs[0].start, 36.6);
    EXPECT_DOUBLE_EQ(segs[0].end, 37.4);
}

TEST(WhisperTiming, Words_far_outside_their_segment_are_pulled_in) {
    const WhisperVocab v = vocab();
    // Median 0.7 (capped), the segment 40.0-42.0: the first word starts more than 0.5 s before the segment
    // (38.0): it starts at min(its end - 0.7, 40.0); the last ends more than 0.5 s after it (43.0): it ends
    // at max(its start + 0.7, 42.0); the segment keeps its times.
    std::vector<WhisperTimedSegment> segs(1);
    segs[0].start  = 40.0;
    segs[0].end    = 42.0;
    segs[0].tokens = {1, 2};
    whisper_add_word_timestamps(segs, {word(" x", {1}, 8.0, 11.0), word(" y", {2}, 11.0, 13.0)}, 30.0, v, 40.0);
    ASSERT_EQ(segs[0].words.size(), 2u);
    EXPECT_DOUBLE_EQ(segs[0].words[0].start, 40.0);
    EXPECT_DOUBLE_EQ(segs[0].words[0].end, 41.0);
    EXPECT_DOUBLE_EQ(segs[0].words[1].start, 41.0);
    EXPECT_DOUBLE_EQ(segs[0].words[1].end, 42.0);
    EXPECT_DOUBLE_EQ(segs[0].start, 40.0);
    EXPECT_DOUBLE_EQ(segs[0].end, 42.0);
}

TEST(WhisperTiming, Times_round_to_hundredths_as_python_does) {
    EXPECT_DOUBLE_EQ(round_to_hundredths(12.799999999999999), 12.8);
    EXPECT_DOUBLE_EQ(round_to_hundredths(0.125), 0.12); // exactly representable: ties to even
    EXPECT_DOUBLE_EQ(round_to_hundredths(0.135), 0.14); // 0.135 is stored above the tie
    EXPECT_DOUBLE_EQ(round_to_hundredths(32.480000000000004), 32.48);
}
