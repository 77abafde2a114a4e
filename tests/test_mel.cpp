// NeMo mel features against the fixture goldens (MANIFEST tolerance) for every clip.
#include "core/mel.h"
#include "core/model_file.h"
#include "support.h"

#include <gtest/gtest.h>

using namespace transcribe;

class Mel : public ::testing::TestWithParam<const char *> {};

TEST_P(Mel, Matches_nemo_golden) {
    const std::string clip = GetParam();
    ModelFile file(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    file.load_weights(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    MelFrontend mel(mel_config_from_file(file));
    const std::vector<float> pcm = test::read_wav_16k(clip);
    const MelFeatures got = mel.compute(pcm.data(), pcm.size(), 2);
    const NpyArray want = test::golden(clip, "mel.npy");
    ASSERT_EQ(want.shape.size(), 2u);
    EXPECT_EQ(got.n_mels, want.shape[0]);
    EXPECT_EQ(got.n_frames, want.shape[1]);
    EXPECT_EQ(got.n_valid, test::manifest()["clips"][clip]["mel_len"].get<int>());
    EXPECT_LE(test::max_abs_diff(got.data, want.f32), test::golden_atol(clip, "mel.npy"));
    // Thread count must not change the result.
    const MelFeatures one = mel.compute(pcm.data(), pcm.size(), 1);
    EXPECT_EQ(one.data, got.data);
}

INSTANTIATE_TEST_SUITE_P(Fixture, Mel, ::testing::ValuesIn(test::kClips));

TEST(MelFrontend, Rejects_audio_shorter_than_one_hop) {
    ModelFile file(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    file.load_weights(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    MelFrontend mel(mel_config_from_file(file));
    std::vector<float> pcm(100, 0.1f);
    EXPECT_THROW(mel.compute(pcm.data(), pcm.size(), 1), std::exception);
}
