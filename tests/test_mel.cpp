// NeMo mel features against the fixture goldens (MANIFEST tolerance) for every clip.
#include "core/mel.h"
#include "core/model_file.h"
#include "support.h"

#include <gtest/gtest.h>

#include <cmath>

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

// NeMo's normalize "NA" (diar_streaming_sortformer_4spk-v2): the log-mel as it is. Normalising those
// frames by hand (mean and unbiased std over the valid frames, + 1e-5) must give the per_feature
// output, which matches NeMo's golden above; frames past the valid ones stay zero.
TEST(MelFrontend, Without_normalisation_it_is_the_log_mel_per_feature_normalises) {
    ModelFile file(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    file.load_weights(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    MelConfig config = mel_config_from_file(file);
    EXPECT_TRUE(config.per_feature);
    const MelFrontend normalised(config);
    config.per_feature = false;
    const MelFrontend raw(config);
    const std::vector<float> pcm = test::read_wav_16k("jfk");
    const MelFeatures want = normalised.compute(pcm.data(), pcm.size(), 2), got = raw.compute(pcm.data(), pcm.size(), 2);
    ASSERT_EQ(got.n_frames, want.n_frames);
    ASSERT_EQ(got.n_valid, want.n_valid);
    ASSERT_GT(got.n_frames, got.n_valid);
    double worst = 0;
    for (int m = 0; m < got.n_mels; ++m) {
        const float * row = got.data.data() + size_t(m) * size_t(got.n_frames);
        double mean = 0, var = 0;
        for (int t = 0; t < got.n_valid; ++t) {
            mean += row[t];
        }
        mean /= got.n_valid;
        for (int t = 0; t < got.n_valid; ++t) {
            var += (row[t] - mean) * (row[t] - mean);
        }
        const double sd = std::sqrt(var / (got.n_valid - 1)) + 1e-5;
        for (int t = 0; t < got.n_valid; ++t) {
            worst = std::max(worst, std::fabs((row[t] - mean) / sd - want.data[size_t(m) * size_t(got.n_frames) + size_t(t)]));
        }
        EXPECT_EQ(row[got.n_valid], 0.0f);
        EXPECT_LT(row[0], 0.0f); // a log power, not a normalised value around 0
    }
    EXPECT_LT(worst, 1e-4);
}
