// Sortformer (offline) against the NeMo goldens of sortformer-tiny: every stage from the mel to the
// speaker probabilities within the MANIFEST's tolerances, and each frame's decision at every
// post-processing threshold the fixture lists on the same side as NeMo's.
#include "core/npy.h"
#include "families/sortformer.h"
#include "support.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace transcribe;

namespace {
const test::Fixture & fx() {
    static const test::Fixture f(std::string(CANARY_AED_FIXTURE) + "/../sortformer-tiny");
    return f;
}
const char * kClips[] = {"jfk", "conv2_budget", "conv3_meeting"};
} // namespace

TEST(SortformerGolden, Every_stage_and_the_speaker_probabilities_match_within_manifest_tolerance) {
    const Sortformer model(test::model("sortformer-tiny-f32.gguf"), ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    EXPECT_EQ(model.n_speakers(), 4);
    for (const char * clip : kClips) {
        const std::string dir = ::testing::TempDir() + "sortformer_dump_" + clip;
        std::filesystem::create_directories(dir);
        SortformerSession session(model, 2);
        const std::vector<float> pcm = fx().wav_16k(clip);
        setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
        const SpeakerActivity act = session.run(pcm.data(), pcm.size());
        unsetenv("TRANSCRIBE_DUMP_DIR");
        for (const char * name : {"mel", "pre_encode", "enc_layer_0", "enc_layer_last", "fc_encoder_out", "encoder_proj",
                                  "tf_layer_0", "tf_layer_last", "head_hidden", "head_logits", "preds"}) {
            const std::string file = std::string(name) + ".npy";
            const NpyArray got = npy_read(dir + "/" + file), want = fx().golden(clip, file);
            EXPECT_EQ(got.shape, want.shape) << clip << " " << name;
            EXPECT_LE(test::max_abs_diff(got.f32, want.f32), fx().atol(clip, file)) << clip << " " << name;
        }
        // The smallest distance of a golden probability from a post-processing threshold is 1.3e-3
        // (MANIFEST), above preds' tolerance: every frame falls on NeMo's side of every threshold.
        const NpyArray want = fx().golden(clip, "preds.npy");
        ASSERT_EQ(act.probs.size(), want.f32.size());
        EXPECT_EQ(act.n_frames, int(want.shape[0]));
        for (const double th : fx().manifest()["postprocessing"]["thresholds_for_margins"]) {
            for (size_t i = 0; i < want.f32.size(); ++i) {
                EXPECT_EQ(act.probs[i] > float(th), want.f32[i] > float(th)) << clip << " " << i << " at " << th;
            }
        }
    }
}

TEST(SortformerGolden, Audio_past_the_limit_is_an_error) {
    const Sortformer model(test::model("sortformer-tiny-f32.gguf"), ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    SortformerSession session(model, 2);
    const std::vector<float> pcm(size_t(model.sample_rate()) * size_t(model.max_audio_ms() / 1000 + 1), 0.1f);
    EXPECT_THROW(session.run(pcm.data(), pcm.size()), Error);
}
