// Whisper's decoding rules by hand, each branch of the reference code on a small made-up vocabulary:
// SuppressBlank, SuppressTokens, every branch of ApplyTimestampRules (whisper/decoding.py), and the cuts
// and seeks of transcribe()'s loop (whisper/transcribe.py) on scripted window decodes.
#include "decoding/whisper_decoding.h"
#include "decoding/whisper_long_form.h"

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
    const WhisperLongFormResult r = whisper_long_form(3020, v, tok, options(), [&](int seek, int size, const std::vector<int32_t> & prompt) {
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
    const WhisperLongFormResult r = whisper_long_form(4000, v, tok, options(), [&](int seek, int, const std::vector<int32_t> &) {
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
    const WhisperLongFormResult r = whisper_long_form(9000, v, tok, options(), [&](int seek, int, const std::vector<int32_t> &) {
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
    const WhisperLongFormResult r = whisper_long_form(6000, v, tok, o, [&](int, int, const std::vector<int32_t> & prompt) {
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
