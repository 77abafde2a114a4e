// Parakeet-TDT end to end against the NeMo goldens of parakeet-tdt-tiny: every stage (via
// TRANSCRIBE_DUMP_DIR), every joint evaluation of the greedy TDT decode, the ids / frames / durations,
// and NeMo's text, word and segment times.
#include "model/family.h"
#include "core/npy.h"
#include "support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

using namespace transcribe;

namespace {

const test::Fixture & fx() { return test::parakeet_fixture(); }

// Every joint evaluation's logits are the run's step logits.
test::ClipRun decode(Model & model, const std::string & clip, const std::string & dump_dir = "") {
    return test::run_clip(model, fx(), clip, dump_dir);
}

class ParakeetGolden : public ::testing::TestWithParam<const char *> {
protected:
    static void SetUpTestSuite() { f32_ = test::load("parakeet-tdt-tiny-f32.gguf").release(); }
    static void TearDownTestSuite() {
        delete f32_;
        f32_ = nullptr;
    }
    static Model * f32_;
};
Model * ParakeetGolden::f32_ = nullptr;

constexpr int64_t kFrameMs = 80; // 10 ms hop x 8

} // namespace

TEST_P(ParakeetGolden, Every_stage_matches_within_manifest_tolerance) {
    const std::string clip = GetParam();
    const std::string dir  = ::testing::TempDir() + "parakeet_dump_" + clip;
    std::filesystem::create_directories(dir);
    decode(*f32_, clip, dir);
    for (const char * name : {"mel", "pre_encode", "enc_layer_0", "enc_layer_last", "enc_out", "joint_enc_proj",
                              "pred_out_sos", "pred_state_sos_h", "pred_state_sos_c", "joint_pred_proj_sos",
                              "joint_logits_t0"}) {
        const std::string file = std::string(name) + ".npy";
        const NpyArray got = npy_read(dir + "/" + file), want = fx().golden(clip, file);
        EXPECT_EQ(got.shape, want.shape) << clip << " " << name;
        EXPECT_LE(test::max_abs_diff(got.f32, want.f32), fx().atol(clip, file)) << clip << " " << name;
    }
}

TEST_P(ParakeetGolden, Every_joint_evaluation_matches_the_reference_trace) {
    const std::string clip = GetParam();
    const test::ClipRun d = decode(*f32_, clip);
    const NpyArray trace = fx().golden(clip, "joint_trace_logits.npy");
    const size_t n_out = size_t(trace.shape[1]);
    ASSERT_EQ(d.step_logits.size(), size_t(trace.shape[0])) << clip;
    const double atol = fx().atol(clip, "joint_trace_logits.npy");
    for (size_t e = 0; e < d.step_logits.size(); ++e) {
        ASSERT_EQ(d.step_logits[e].size(), n_out);
        const std::vector<float> want(trace.f32.begin() + long(e * n_out), trace.f32.begin() + long((e + 1) * n_out));
        EXPECT_LE(test::max_abs_diff(d.step_logits[e], want), atol) << clip << " evaluation " << e;
    }
}

namespace {
void expect_nemos_ids_text_and_times(const Transcript & t, const std::string & clip) {
    const nlohmann::json tokens = fx().golden_json(clip, "tokens.json");
    EXPECT_EQ(t.tokens, tokens["ids"].get<std::vector<int32_t>>()) << clip;
    EXPECT_EQ(t.token_frames, tokens["frames"].get<std::vector<int32_t>>()) << clip;
    EXPECT_EQ(t.token_durations, tokens["durations"].get<std::vector<int32_t>>()) << clip;

    const nlohmann::json hyp = fx().golden_json(clip, "hypothesis.json");
    EXPECT_EQ(t.text, hyp["text"].get<std::string>()) << clip;
    const nlohmann::json & words = hyp["timestamp"]["word"];
    ASSERT_EQ(t.words.size(), words.size()) << clip;
    for (size_t i = 0; i < words.size(); ++i) {
        EXPECT_EQ(t.words[i].text, words[i]["word"].get<std::string>()) << clip << " word " << i;
        EXPECT_EQ(t.words[i].t0_ms, words[i]["start_offset"].get<int64_t>() * kFrameMs) << clip << " word " << i;
        EXPECT_EQ(t.words[i].t1_ms, words[i]["end_offset"].get<int64_t>() * kFrameMs) << clip << " word " << i;
    }
    const nlohmann::json & segments = hyp["timestamp"]["segment"];
    ASSERT_EQ(t.segments.size(), segments.size()) << clip;
    size_t n_words = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
        EXPECT_EQ(t.segments[i].text, segments[i]["segment"].get<std::string>()) << clip;
        EXPECT_EQ(t.segments[i].t0_ms, segments[i]["start_offset"].get<int64_t>() * kFrameMs) << clip;
        EXPECT_EQ(t.segments[i].t1_ms, segments[i]["end_offset"].get<int64_t>() * kFrameMs) << clip;
        n_words += t.segments[i].words.size();
    }
    EXPECT_EQ(n_words, t.words.size()) << clip;
}
} // namespace

TEST_P(ParakeetGolden, Ids_frames_durations_text_and_times_are_nemos) {
    const std::string clip = GetParam();
    expect_nemos_ids_text_and_times(decode(*f32_, clip).transcript, clip);
}

// A hybrid (parakeet-tdt-ctc-tiny: this fixture's model with parakeet-ctc-tiny's head as its aux_ctc)
// decodes with its transducer unless asked, as NeMo's hybrid does: this fixture's goldens, asked or not.
// (Its CTC head: test_parakeet_ctc.cpp.)
TEST_P(ParakeetGolden, A_hybrids_transducer_gives_nemos_ids_text_and_times) {
    const std::string clip = GetParam();
    auto hybrid = test::load("parakeet-tdt-ctc-tiny-f32.gguf");
    EXPECT_TRUE(hybrid->info().transducer_head);
    EXPECT_TRUE(hybrid->info().ctc_head);
    for (const DecoderType asked : {DecoderType::Default, DecoderType::Transducer}) {
        expect_nemos_ids_text_and_times(test::run_clip(*hybrid, fx(), clip, "", asked).transcript, clip);
    }
}

INSTANTIATE_TEST_SUITE_P(Clips, ParakeetGolden, ::testing::Values("jfk", "jfk_div8", "tone_noise_3s"));

// Lower-precision files: the encoder output (max |ref| about 3.5 to 3.8 here) drifts by at most the
// stated bound (BF16 weights: 0.05; Q8_0 weights and activations: 0.2) and the greedy decisions do not change.
TEST(ParakeetDrift, Bf16_and_q8_0_keep_the_greedy_ids_with_bounded_encoder_drift) {
    for (const auto & [name, bound] : {std::pair<const char *, float> {"parakeet-tdt-tiny-bf16.gguf", 0.05f},
                                       std::pair<const char *, float> {"parakeet-tdt-tiny-Q8_0.gguf", 0.2f}}) {
        auto model = test::load(name);
        for (const char * clip : {"jfk", "jfk_div8", "tone_noise_3s"}) {
            const std::string dir = ::testing::TempDir() + "parakeet_drift_" + clip;
            std::filesystem::create_directories(dir);
            const Transcript t = decode(*model, clip, dir).transcript;
            const NpyArray enc = npy_read(dir + "/enc_out.npy"), want = fx().golden(clip, "enc_out.npy");
            const float drift = test::max_abs_diff(enc.f32, want.f32);
            std::printf("%s %s: enc_out max |diff| %.4g (max |ref| %.3g)\n", name, clip, drift, test::max_abs(want.f32));
            EXPECT_LE(drift, bound) << name << " " << clip;
            EXPECT_EQ(t.tokens, fx().golden_json(clip, "tokens.json")["ids"].get<std::vector<int32_t>>()) << name << " " << clip;
        }
    }
}
