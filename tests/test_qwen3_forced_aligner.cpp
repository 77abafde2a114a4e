// Qwen3-ForcedAligner against the goldens of qwen3-aligner-tiny (QwenLM/Qwen3-ASR's own
// Qwen3ForcedAligner.align on seeded weights in the released layout): the input ids encode_timestamp and
// the processor make, the classification logits of every <timestamp> slot, and the words with their
// repaired times. Then the text rules by hand, branch by branch, where the fixture's runs do not reach:
// split_units (tokenize_space_lang + split_segment_with_chinese) and fix_timestamps (fix_timestamp).
#include "engine/transcript_alignment.h"
#include "families/qwen3_aligner_text.h"
#include "core/error.h"
#include "core/npy.h"
#include "support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace transcribe;
using qwen3_aligner::fix_timestamps;
using qwen3_aligner::split_units;

namespace {

const test::Fixture & fx() { return test::qwen3_aligner_fixture(); }

class Qwen3AlignerGolden : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = test::load("qwen3-aligner-tiny-f32.gguf").release(); }
    static void TearDownTestSuite() {
        delete model_;
        model_ = nullptr;
    }
    static std::unique_ptr<Session> session() {
        SessionOptions so;
        so.n_threads = 2;
        so.kv_type   = GGML_TYPE_F32;
        return model_->new_session(so);
    }
    static std::vector<float> audio(const std::string & clip) { return test::qwen3_asr_fixture().wav_16k(clip); }
    static Model * model_;
};
Model * Qwen3AlignerGolden::model_ = nullptr;

} // namespace

TEST_F(Qwen3AlignerGolden, Model_info_says_it_aligns_and_transcribes_nothing) {
    const ModelInfo & i = model_->info();
    EXPECT_EQ(i.architecture, "qwen3_forced_aligner");
    EXPECT_TRUE(i.forced_aligner);
    EXPECT_FALSE(i.ctc_head);
    EXPECT_EQ(i.max_audio_ms, 180000); // MAX_FORCE_ALIGN_INPUT_SECONDS
    auto s = session();
    const std::vector<float> pcm = audio("jfk_0p7s");
    try {
        s->run(pcm.data(), pcm.size(), RunOptions {});
        FAIL() << "the aligner transcribed";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("--align-with"), std::string::npos) << e.what();
    }
}

// Every run from the clip's audio: the ids, each slot's logits (within the MANIFEST's tolerance, 10x the
// reference's own float32-to-float64 distance, though fed our own mel; inside the smallest margin), the
// words and their times exactly.
TEST_F(Qwen3AlignerGolden, Alignments_match_the_reference) {
    auto s = session();
    const std::string dir = ::testing::TempDir() + "qwen3_aligner_dump";
    for (const auto & [run, entry] : fx().manifest()["runs"].items()) {
        const nlohmann::json g = fx().golden_json(run, "align.json");
        const std::vector<float> pcm = audio(g["clip"].get<std::string>());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
        const std::vector<Word> words =
            s->align_text(pcm.data(), pcm.size(), g["text"].get<std::string>(), g["language"].get<std::string>(), RunOptions {});
        unsetenv("TRANSCRIBE_DUMP_DIR");
        std::ifstream idf(dir + "/input_ids.json");
        EXPECT_EQ(nlohmann::json::parse(idf).get<std::vector<int32_t>>(), g["input_ids"].get<std::vector<int32_t>>()) << run;

        const NpyArray ours = npy_read(dir + "/timestamp_logits.npy");
        const NpyArray ref  = fx().golden(run, "timestamp_logits.npy");
        ASSERT_EQ(ours.shape, ref.shape) << run;
        const double tol = entry["suggested_atol_logits"].get<double>();
        ASSERT_LT(tol, entry["smallest_margin"].get<double>() / 2) << run;
        EXPECT_LE(test::max_abs_diff(ours.f32, ref.f32), tol) << run;

        const nlohmann::json & items = g["items"];
        ASSERT_EQ(words.size(), items.size()) << run;
        for (size_t i = 0; i < words.size(); ++i) {
            EXPECT_EQ(words[i].text, items[i]["text"].get<std::string>()) << run << " " << i;
            EXPECT_EQ(words[i].t0_ms, std::llround(1000 * items[i]["start_time"].get<double>())) << run << " " << i;
            EXPECT_EQ(words[i].t1_ms, std::llround(1000 * items[i]["end_time"].get<double>())) << run << " " << i;
        }
    }
}

// The BF16 file (its products round activations to bfloat16): every slot's logits within a stated drift
// of the golden's, and the same class wherever the golden's margin is wider than twice that drift. The
// drift is wide here (up to 0.60 on jfk_en, where the F32 file stays within the golden tolerance): the
// fixture's sharpened decoder attention (its README) magnifies every rounding, and its margins are narrow.
TEST(Qwen3AlignerBf16, Drifts_within_its_bound_and_keeps_the_clear_decisions) {
    constexpr double kDrift = 0.75;
    auto model = test::load("qwen3-aligner-tiny-bf16.gguf");
    SessionOptions so;
    so.n_threads = 2;
    auto s = model->new_session(so);
    const std::string dir = ::testing::TempDir() + "qwen3_aligner_bf16_dump";
    int kept = 0;
    for (const auto & [run, entry] : fx().manifest()["runs"].items()) {
        const nlohmann::json g = fx().golden_json(run, "align.json");
        const std::vector<float> pcm = test::qwen3_asr_fixture().wav_16k(g["clip"].get<std::string>());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
        s->align_text(pcm.data(), pcm.size(), g["text"].get<std::string>(), g["language"].get<std::string>(), RunOptions {});
        unsetenv("TRANSCRIBE_DUMP_DIR");
        const NpyArray ours = npy_read(dir + "/timestamp_logits.npy");
        const NpyArray ref  = fx().golden(run, "timestamp_logits.npy");
        ASSERT_EQ(ours.shape, ref.shape) << run;
        EXPECT_LE(test::max_abs_diff(ours.f32, ref.f32), kDrift) << run;
        const auto classes = g["timestamp_classes"].get<std::vector<int>>();
        const auto margins = g["top1_minus_top2"].get<std::vector<double>>();
        const size_t n = size_t(ref.shape[1]);
        for (size_t k = 0; k < classes.size(); ++k) {
            if (margins[k] > 2 * kDrift) {
                const float * row = ours.f32.data() + k * n;
                EXPECT_EQ(int(std::max_element(row, row + n) - row), classes[k]) << run << " slot " << k;
                ++kept;
            }
        }
    }
    EXPECT_GE(kept, 8) << "clear decisions checked";
}

// A transcript's segments, each aligned over its own audio with its offset, as transcribe() aligns chunks:
// the words of a segment cut from the clip at 1 s are the golden's shifted by 1 s.
TEST_F(Qwen3AlignerGolden, Transcript_segments_are_aligned_each_in_its_own_audio) {
    auto s = session();
    const nlohmann::json g = fx().golden_json("jfk_0p7s_en", "align.json");
    const std::vector<float> clip = audio("jfk_0p7s");
    std::vector<float> pcm(16000, 0.0f);
    pcm.insert(pcm.end(), clip.begin(), clip.end());
    Transcript t;
    t.text = "Ask not.";
    t.segments.push_back(Segment {0, 1000, "  ", {}, {}, false}); // blank: nothing to align
    t.segments.push_back(Segment {1000, int64_t(1000 + clip.size() / 16), "Ask not.", {}, {}, false});
    align_transcript(t, pcm.data(), pcm.size(), *model_, *s, nullptr);
    ASSERT_EQ(t.words.size(), 2u);
    EXPECT_TRUE(t.segments[0].words.empty());
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(t.words[i].text, g["items"][i]["text"].get<std::string>());
        EXPECT_EQ(t.words[i].t0_ms, 1000 + std::llround(1000 * g["items"][i]["start_time"].get<double>()));
        EXPECT_EQ(t.words[i].t1_ms, 1000 + std::llround(1000 * g["items"][i]["end_time"].get<double>()));
    }
    EXPECT_EQ(t.segments[1].t0_ms, t.words.front().t0_ms);
    EXPECT_EQ(t.segments[1].t1_ms, t.words.back().t1_ms);
    EXPECT_TRUE(t.timed);
}

TEST_F(Qwen3AlignerGolden, Audio_past_its_window_is_refused) {
    auto s = session();
    const std::vector<float> pcm(size_t(181) * 16000, 0.0f);
    try {
        s->align_text(pcm.data(), pcm.size(), "a", "English", RunOptions {});
        FAIL() << "181 s were aligned";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INPUT_TOO_LONG);
    }
}

// tokenize_space_lang by hand: str.split() on any Unicode space, is_kept_char (letters, digits, "'"),
// and each CJK ideograph its own unit (the other scripts' runs kept whole between them).
TEST(Qwen3AlignerText, Units_are_split_as_the_reference_splits_them) {
    EXPECT_EQ(split_units("Hello, world! It's 2024."), (std::vector<std::string> {"Hello", "world", "It's", "2024"}));
    EXPECT_EQ(split_units("  \t\n"), std::vector<std::string> {});
    EXPECT_EQ(split_units("\u2014 ... !"), std::vector<std::string> {});              // nothing kept
    EXPECT_EQ(split_units("a\u3000b\u00a0c"), (std::vector<std::string> {"a", "b", "c"})); // ideographic, no-break spaces
    EXPECT_EQ(split_units("x-y_z"), (std::vector<std::string> {"xyz"}));                 // Pd, Pc dropped
    EXPECT_EQ(split_units("caf\u00e9 na\u00efve"), (std::vector<std::string> {"caf\u00e9", "na\u00efve"}));
    EXPECT_EQ(split_units("\u00bd\u2163"), (std::vector<std::string> {"\u00bd\u2163"})); // No, Nl kept
    EXPECT_EQ(split_units("ab\u4f60\u597dcd\u3002ef"),                                     // 你好 ... 。(Po) dropped
              (std::vector<std::string> {"ab", "\u4f60", "\u597d", "cdef"}));
    EXPECT_EQ(split_units("\u3053\u3093\u306b\u3061\u306f"), (std::vector<std::string> {"\u3053\u3093\u306b\u3061\u306f"})); // kana: not CJK
    EXPECT_EQ(split_units("\U00020000x\uf900"), (std::vector<std::string> {"\U00020000", "x", "\uf900"})); // ext. B, compat.
}

// fix_timestamp by hand, one case per branch.
TEST(Qwen3AlignerText, Timestamps_are_repaired_as_fix_timestamp_repairs_them) {
    // Non-decreasing: kept as is (truncated to integers).
    EXPECT_EQ(fix_timestamps({0, 80, 80, 160.9}), (std::vector<int64_t> {0, 80, 80, 160}));
    EXPECT_EQ(fix_timestamps({}), std::vector<int64_t> {});
    // One slot out of order between kept ones: the nearer neighbour, the left on a tie (k - (i-1) <= j - k).
    EXPECT_EQ(fix_timestamps({100, 50, 200, 300}), (std::vector<int64_t> {100, 100, 200, 300}));
    // Two: the first takes the left, the second the right.
    EXPECT_EQ(fix_timestamps({100, 900, 950, 200, 300, 400}), (std::vector<int64_t> {100, 100, 200, 200, 300, 400}));
    // A short run at the start (no left): the right neighbour; at the end (no right): the left one.
    EXPECT_EQ(fix_timestamps({500, 100, 200, 300}), (std::vector<int64_t> {100, 100, 200, 300}));
    EXPECT_EQ(fix_timestamps({100, 200, 300, 50}), (std::vector<int64_t> {100, 200, 300, 300}));
    // Three or more between two kept: spread evenly, step (right - left) / (count + 1), truncated.
    EXPECT_EQ(fix_timestamps({0, 900, 800, 700, 100, 200}), (std::vector<int64_t> {0, 25, 50, 75, 100, 200}));
    EXPECT_EQ(fix_timestamps({0, 50, 40, 30, 20, 10, 100}), (std::vector<int64_t> {0, 50, 60, 70, 80, 90, 100}));
    EXPECT_EQ(fix_timestamps({0, 9, 8, 7, 6, 10}), (std::vector<int64_t> {0, 9, 9, 9, 9, 10})); // 9.25, 9.5, 9.75
    // Two between 9 and 10 (the subsequence 0, 9, 10 keeps the earliest 9): left, then right.
    EXPECT_EQ(fix_timestamps({0, 9, 8, 7, 10}), (std::vector<int64_t> {0, 9, 9, 10, 10}));
    // ... with only a right neighbour, or only a left one: copied.
    EXPECT_EQ(fix_timestamps({900, 800, 700, 100, 200, 300, 400}), (std::vector<int64_t> {100, 100, 100, 100, 200, 300, 400}));
    EXPECT_EQ(fix_timestamps({100, 200, 300, 400, 90, 80, 70}), (std::vector<int64_t> {100, 200, 300, 400, 400, 400, 400}));
    // Of equal-length subsequences the one ending first is kept, each element's earliest predecessor:
    // [10, 5, 20, 15]: dp = 1 1 2 2, the first maximum is index 2 (10 -> 20), so 5 and 15 are repaired.
    EXPECT_EQ(fix_timestamps({10, 5, 20, 15}), (std::vector<int64_t> {10, 10, 20, 20}));
}
