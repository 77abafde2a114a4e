// Parakeet-CTC end to end against the NeMo goldens of parakeet-ctc-tiny (its encoder is
// parakeet-tdt-tiny's, whose stages test_parakeet_tdt.cpp checks): the head's log-probabilities, every
// frame's decision, NeMo's text, word and segment times; greedy CTC's folding and offsets and CTC's
// punctuation rule by hand.
#include "core/error.h"
#include "model/family.h"
#include "decoding/subword_timestamps.h"
#include "decoding/ctc_greedy.h"
#include "support.h"

#include <gtest/gtest.h>

using namespace transcribe;

namespace {

const test::Fixture & fx() { return test::parakeet_ctc_fixture(); }

const char * kCtcClips[] = {"jfk", "jfk_div8", "tone_noise_3s"};
constexpr int64_t kFrameMs = 80;

// The run's step logits are every frame's log-probabilities.
test::ClipRun decode(Model & model, const std::string & clip) { return test::run_clip(model, fx(), clip); }

void expect_nemo_text_and_times(const Transcript & t, const std::string & clip) {
    const nlohmann::json hyp = fx().golden_json(clip, "hypothesis.json");
    EXPECT_EQ(t.text, hyp["text"].get<std::string>()) << clip;
    EXPECT_EQ(test::word_spans(t), test::nemo_offset_spans(hyp["timestamp"]["word"], "word", kFrameMs)) << clip;
    EXPECT_EQ(test::segment_spans(t), test::nemo_offset_spans(hyp["timestamp"]["segment"], "segment", kFrameMs)) << clip;
    EXPECT_EQ(t.tokens.size(), hyp["timestamp"]["char"].size()) << clip;
}

} // namespace

// The encoder's output is within parakeet-tdt-tiny's enc_out tolerance of NeMo's (at most 3.25e-4); the
// head's rows sum to at most 29.54 in absolute value (the fixture's checkpoint), so a logit moves by at
// most 29.54 x 3.25e-4 = 0.0096 and a log-probability by twice that: bound 0.02. Every frame's best class
// leads by at least 0.11 (MANIFEST), so every decision is NeMo's.
TEST(ParakeetCtcGolden, Log_probs_decisions_text_and_times_are_nemos) {
    auto model = test::load("parakeet-ctc-tiny-f32.gguf");
    EXPECT_EQ(model->info().architecture, "parakeet_ctc");
    EXPECT_TRUE(model->info().word_timestamps);
    for (const char * clip : kCtcClips) {
        const test::ClipRun d = decode(*model, clip);
        const NpyArray want = fx().golden(clip, "log_probs.npy");
        ASSERT_EQ(d.step_logits.size(), size_t(want.shape[0])) << clip;
        const size_t V1 = size_t(want.shape[1]);
        const std::vector<int> frame_ids = fx().golden_json(clip, "frame_ids.json").get<std::vector<int>>();
        float worst = 0;
        for (size_t t = 0; t < d.step_logits.size(); ++t) {
            ASSERT_EQ(d.step_logits[t].size(), V1);
            const std::vector<float> row(want.f32.begin() + long(t * V1), want.f32.begin() + long((t + 1) * V1));
            worst = std::max(worst, test::max_abs_diff(d.step_logits[t], row));
            EXPECT_EQ(int(std::max_element(d.step_logits[t].begin(), d.step_logits[t].end()) - d.step_logits[t].begin()),
                      frame_ids[t]) << clip << " frame " << t;
        }
        std::printf("%s: log-probabilities within %.3g of NeMo's\n", clip, worst);
        EXPECT_LE(worst, 0.02f) << clip;
        expect_nemo_text_and_times(d.transcript, clip);
    }
}

// The BF16 file: the encoder's and head's weights rounded; the decisions (every frame's lead >= 0.11)
// and so the text and times stay NeMo's.
// A hybrid's CTC head (parakeet-tdt-ctc-tiny: parakeet-tdt-tiny with this fixture's head as its aux_ctc
// and this fixture's decoding section): this fixture's goldens, by the bound above; a model without the
// head asked for is a clear error.
TEST(ParakeetCtcGolden, A_hybrids_ctc_head_gives_nemos_log_probs_text_and_times) {
    auto hybrid = test::load("parakeet-tdt-ctc-tiny-f32.gguf");
    EXPECT_EQ(hybrid->info().architecture, "parakeet_tdt");
    for (const char * clip : kCtcClips) {
        const test::ClipRun d = test::run_clip(*hybrid, fx(), clip, "", DecoderType::Ctc);
        const NpyArray want = fx().golden(clip, "log_probs.npy");
        ASSERT_EQ(d.step_logits.size(), size_t(want.shape[0])) << clip;
        const size_t V1 = size_t(want.shape[1]);
        float worst = 0;
        for (size_t t = 0; t < d.step_logits.size(); ++t) {
            const std::vector<float> row(want.f32.begin() + long(t * V1), want.f32.begin() + long((t + 1) * V1));
            worst = std::max(worst, test::max_abs_diff(d.step_logits[t], row));
        }
        EXPECT_LE(worst, 0.02f) << clip;
        expect_nemo_text_and_times(d.transcript, clip);
    }
    auto ctc_only = test::load("parakeet-ctc-tiny-f32.gguf");
    EXPECT_FALSE(ctc_only->info().transducer_head);
    EXPECT_TRUE(ctc_only->info().ctc_head);
    try {
        test::run_clip(*ctc_only, fx(), "jfk", "", DecoderType::Transducer);
        ADD_FAILURE() << "a CTC model ran a transducer";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("no transducer head"), std::string::npos) << e.what();
    }
}

TEST(ParakeetCtcGolden, Bf16_keeps_nemos_text_and_times) {
    auto model = test::load("parakeet-ctc-tiny-bf16.gguf");
    for (const char * clip : kCtcClips) {
        expect_nemo_text_and_times(decode(*model, clip).transcript, clip);
    }
}

// ---- By hand: the branches of NeMo's folding and offsets ----

namespace {
// Frames given as their argmax ids: a one-hot row each (3 classes, blank = 2).
std::vector<TimedToken> fold(const std::vector<int> & ids) {
    std::vector<float> logits;
    for (int id : ids) {
        for (int c = 0; c < 3; ++c) {
            logits.push_back(c == id ? 1.0f : 0.0f);
        }
    }
    return ctc_greedy(logits.data(), int(ids.size()), 3, 2);
}
std::vector<std::tuple<int32_t, int64_t, int64_t>> spans(const std::vector<TimedToken> & t) {
    std::vector<std::tuple<int32_t, int64_t, int64_t>> out;
    for (const TimedToken & x : t) {
        out.emplace_back(x.id, x.start, x.end);
    }
    return out;
}
using Spans = std::vector<std::tuple<int32_t, int64_t, int64_t>>;
} // namespace

TEST(CtcGreedy, Folds_repeats_not_across_a_blank_and_times_as_nemo) {
    // frames: _ _ a a _ a b b _  (a = 0, b = 1, _ = 2)
    // emitted: a (frame 2), a (5: a blank came between), b (6). NeMo's offsets: ends at the first frames
    // 2, 5, 6; the first starts at 2 - 1 = 1, the others where the previous ended.
    EXPECT_EQ(spans(fold({2, 2, 0, 0, 2, 0, 1, 1, 2})), (Spans {{0, 1, 2}, {0, 2, 5}, {1, 5, 6}}));
    // The first token on frame 0 starts at 0 (max(0, 0 - 1)).
    EXPECT_EQ(spans(fold({1, 1, 0})), (Spans {{1, 0, 0}, {0, 0, 2}}));
    // Only blanks: nothing.
    EXPECT_TRUE(fold({2, 2, 2}).empty());
    // a b a: three tokens, no blank needed between different ids.
    EXPECT_EQ(spans(fold({0, 1, 0})), (Spans {{0, 0, 0}, {1, 0, 1}, {0, 1, 2}}));
}

// CTC's punctuation rule tests the FIRST CHARACTER of a token's text (offset['char'] is a string there):
// "'s" ends where it starts under CTC (and keeps its times under the transducers' rule).
TEST(CtcGreedy, A_token_starting_with_a_mark_ends_where_it_starts) {
    class Vocab final : public Tokenizer {
    public:
        std::vector<int32_t> encode(const std::string &) const override { return {}; }
        std::string decode_bytes(const std::vector<int32_t> & ids) const override {
            static const char * text[] = {" he", "'s", " x", "\xC2\xBF" "y"}; // ¿y: a two-byte mark first
            std::string s;
            for (int32_t i : ids) {
                s += text[i];
            }
            return s;
        }
        std::string decode(const std::vector<int32_t> & ids) const override {
            const std::string s = decode_bytes(ids);
            return s[0] == ' ' ? s.substr(1) : s;
        }
        std::string piece(int32_t id) const override {
            static const char * p[] = {"\xE2\x96\x81he", "'s", "\xE2\x96\x81x", "\xC2\xBF" "y"};
            return p[id];
        }
        int  n_vocab() const override { return 4; }
        bool is_control(int32_t) const override { return false; }
    } vocab;
    const SubwordRules rules = {{"'", "\xC2\xBF"}, {"."}};
    std::vector<TimedToken> ctc = {{0, 0, 3}, {1, 3, 6}, {2, 6, 8}, {3, 8, 11}};
    std::vector<TimedToken> tdt = ctc;
    refine_ctc_punctuation_times(ctc, vocab, rules);
    EXPECT_EQ(spans(ctc), (Spans {{0, 0, 3}, {1, 3, 3}, {2, 6, 8}, {3, 8, 8}}));
    refine_punctuation_times(tdt, vocab, rules);
    EXPECT_EQ(spans(tdt), (Spans {{0, 0, 3}, {1, 3, 6}, {2, 6, 8}, {3, 8, 11}}));
}
