// Parakeet-RNNT (EncDecRNNTBPEModel with the standard RNNT loss) end to end against the NeMo goldens of
// parakeet-rnnt-tiny (its encoder, prediction net and joint projections are parakeet-tdt-tiny's, whose
// stages test_parakeet_tdt.cpp checks): every joint evaluation of NeMo's greedy label-looping decoder
// (several tokens on one frame, max_symbols' forced advance), the ids and their frames, NeMo's text and
// its RNNT word and segment times (no punctuation refinement, a token spans its frame).
#include "model/family.h"
#include "core/npy.h"
#include "support.h"

#include <gtest/gtest.h>

using namespace transcribe;

namespace {

const test::Fixture & fx() { return test::parakeet_rnnt_fixture(); }

const char * kClips[] = {"jfk", "jfk_div8", "tone_noise_3s"};
constexpr int64_t kFrameMs = 80;

void expect_nemos_ids_text_and_times(const Transcript & t, const std::string & clip) {
    const nlohmann::json hyp = fx().golden_json(clip, "hypothesis.json");
    EXPECT_EQ(t.tokens, hyp["y_sequence"].get<std::vector<int32_t>>()) << clip;
    EXPECT_EQ(t.token_frames, hyp["timestep"].get<std::vector<int32_t>>()) << clip;
    EXPECT_TRUE(t.token_durations.empty()) << clip; // RNNT tokens have no durations
    EXPECT_EQ(t.text, hyp["text"].get<std::string>()) << clip;
    EXPECT_EQ(test::word_spans(t), test::nemo_offset_spans(hyp["timestamp"]["word"], "word", kFrameMs)) << clip;
    EXPECT_EQ(test::segment_spans(t), test::nemo_offset_spans(hyp["timestamp"]["segment"], "segment", kFrameMs)) << clip;
}

} // namespace

// The joint's encoder projection is within parakeet-tdt-tiny's joint_enc_proj tolerance of NeMo's (the
// same weights; test_parakeet_tdt.cpp holds it there); ReLU moves nothing further and the output layer's
// rows sum to at most max_output_row_l1 in absolute value (MANIFEST), so every logit is within
// atol x max_output_row_l1 (+1e-4 for the prediction side's float rounding). Every decision leads by at
// least the MANIFEST's min_margin (> 0.3), so every decision, and with it the path, is NeMo's.
TEST(ParakeetRnntGolden, Every_joint_evaluation_id_frame_text_and_time_is_nemos) {
    auto model = test::load("parakeet-rnnt-tiny-f32.gguf");
    EXPECT_EQ(model->info().architecture, "parakeet_rnnt");
    EXPECT_TRUE(model->info().word_timestamps);
    EXPECT_TRUE(model->info().transducer_head);
    EXPECT_FALSE(model->info().ctc_head);
    const double row_l1 = fx().manifest()["model"]["max_output_row_l1"].get<double>();
    int forced = 0, multi = 0;
    for (const char * clip : kClips) {
        const test::ClipRun d = test::run_clip(*model, fx(), clip);
        const NpyArray want = fx().golden(clip, "joint_trace_logits.npy");
        const nlohmann::json trace = fx().golden_json(clip, "joint_trace.json");
        const std::vector<int> labels = trace["label"].get<std::vector<int>>();
        ASSERT_EQ(d.step_logits.size(), size_t(want.shape[0])) << clip;
        const size_t V1 = size_t(want.shape[1]);
        const double bound = test::parakeet_fixture().atol(clip, "joint_enc_proj.npy") * row_l1 + 1e-4;
        float worst = 0;
        for (size_t e = 0; e < d.step_logits.size(); ++e) {
            ASSERT_EQ(d.step_logits[e].size(), V1);
            const std::vector<float> row(want.f32.begin() + long(e * V1), want.f32.begin() + long((e + 1) * V1));
            worst = std::max(worst, test::max_abs_diff(d.step_logits[e], row));
            EXPECT_EQ(int(std::max_element(d.step_logits[e].begin(), d.step_logits[e].end()) - d.step_logits[e].begin()),
                      labels[e]) << clip << " evaluation " << e;
        }
        std::printf("%s: %zu joint evaluations within %.3g of NeMo's (bound %.3g)\n", clip, d.step_logits.size(), worst, bound);
        EXPECT_LE(worst, bound) << clip;
        expect_nemos_ids_text_and_times(d.transcript, clip);
        forced += fx().manifest()["clips"][clip]["frames_at_max_symbols"].get<int>();
        for (size_t i = 1; i < d.transcript.token_frames.size(); ++i) {
            multi += d.transcript.token_frames[i] == d.transcript.token_frames[i - 1];
        }
    }
    // What the fixture reaches: frames with several tokens, and frames left at max_symbols.
    EXPECT_GT(multi, 0);
    EXPECT_GT(forced, 0);
}

// The BF16 file: the drift stays below every decision's lead, so the ids, text and times stay NeMo's.
TEST(ParakeetRnntGolden, Bf16_keeps_nemos_ids_text_and_times) {
    auto model = test::load("parakeet-rnnt-tiny-bf16.gguf");
    for (const char * clip : kClips) {
        expect_nemos_ids_text_and_times(test::run_clip(*model, fx(), clip).transcript, clip);
    }
}
