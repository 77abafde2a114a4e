// Qwen3-ASR against the goldens of qwen3-asr-tiny (QwenLM/Qwen3-ASR's own modeling, processing and parsing
// code on seeded weights in the released layout): the WhisperFeatureExtractor log-mel, the audio
// encoder's stages (fed the golden mel: chunks, windows, positions), the prompt ids as the chat template
// and the processor make them (context, forced language), every greedy step's logits, the ids, the raw
// text parsed into language and transcript. Tolerances: the MANIFEST's suggested_atol (10x the reference's
// own float32-to-float64 distance, at least 1e-4), except where a stage is fed our mel rather than the
// golden one (said where).
#include "blocks/windowed_audio_encoder.h"
#include "core/model_file.h"
#include "support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace transcribe;

namespace {

const test::Fixture & fx() { return test::qwen3_asr_fixture(); }

double atol(const std::string & clip, const std::string & stage) {
    return fx().manifest()["clips"][clip]["suggested_atol"][stage].get<double>();
}

// The golden log-mel [n_mels][frames] as MelFeatures holds it.
std::vector<float> golden_mel(const std::string & clip, int & frames) {
    const NpyArray g = fx().golden(clip, "mel.npy");
    frames = int(g.shape[1]);
    return g.f32;
}

struct GoldenRun {
    std::string clip, name;
};
std::vector<GoldenRun> runs() {
    std::vector<GoldenRun> out;
    for (const auto & [clip, entry] : fx().manifest()["clips"].items()) {
        for (const auto & [name, _] : entry["runs"].items()) {
            out.push_back({clip, name});
        }
    }
    return out;
}

class Qwen3AsrGolden : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = test::load("qwen3-asr-tiny-f32.gguf").release(); }
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
    static Model * model_;
};
Model * Qwen3AsrGolden::model_ = nullptr;

} // namespace

TEST_F(Qwen3AsrGolden, Model_info_says_what_it_can_do) {
    const ModelInfo & i = model_->info();
    EXPECT_EQ(i.architecture, "qwen3_asr");
    EXPECT_EQ(i.languages.size(), 30u);
    EXPECT_EQ(i.languages.front(), "Chinese");
    EXPECT_TRUE(i.text_prompt);
    EXPECT_TRUE(i.language_prompt);
    EXPECT_TRUE(i.language_detection);
    EXPECT_TRUE(i.speculative);
    EXPECT_FALSE(i.word_timestamps);
}

TEST(Qwen3AsrEncoder, Mel_matches_the_feature_extractor) {
    ModelFile f(test::model("qwen3-asr-tiny-f32.gguf"), WeightOptions {});
    f.load_weights(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    const MelFrontend mel(mel_config_from_file(f));
    for (const auto & [clip, _] : fx().manifest()["clips"].items()) {
        const std::vector<float> pcm = fx().wav_16k(clip);
        const MelFeatures ours = mel.compute(pcm.data(), pcm.size(), 2);
        int frames = 0;
        const std::vector<float> ref = golden_mel(clip, frames);
        EXPECT_EQ(ours.n_frames, frames) << clip; // samples // hop: nothing padded
        EXPECT_EQ(ours.n_frames, int(pcm.size() / 160)) << clip;
        EXPECT_LE(test::max_abs_diff(ours.data, ref), atol(clip, "mel")) << clip;
    }
}

TEST(Qwen3AsrEncoder, Stages_match_from_the_golden_mel) {
    ModelFile f(test::model("qwen3-asr-tiny-f32.gguf"), WeightOptions {});
    WindowedAudioEncoder encoder(f, "qwen3_asr");
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    f.load_weights(cpu);
    encoder.prepare(f);
    Executor exec(cpu, 2);
    WindowedAudioEncoder::Run run(encoder);
    const std::string dir = ::testing::TempDir() + "qwen3_asr_dump";
    for (const auto & [clip, entry] : fx().manifest()["clips"].items()) {
        int frames = 0;
        const std::vector<float> mel = golden_mel(clip, frames);
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
        Timings t;
        const std::vector<float> out = run.encode(exec, mel, frames, t);
        unsetenv("TRANSCRIBE_DUMP_DIR");
        const int n_tokens = entry["n_audio_tokens"].get<int>();
        EXPECT_EQ(encoder.hparams().tokens(frames), n_tokens) << clip; // _get_feat_extract_output_lengths
        EXPECT_EQ(out.size(), size_t(n_tokens) * 64u) << clip;
        for (const char * stage : {"enc_input", "enc_layer_0", "enc_layer_last", "enc_out"}) {
            const NpyArray ours = npy_read(dir + "/" + stage + ".npy");
            const NpyArray ref  = fx().golden(clip, std::string(stage) + ".npy");
            EXPECT_EQ(ours.shape, ref.shape) << clip << " " << stage;
            EXPECT_LE(test::max_abs_diff(ours.f32, ref.f32), atol(clip, stage)) << clip << " " << stage;
        }
    }
}

// Every run end to end from the clip's audio: the prompt ids, then greedy decoding as generate() does it.
TEST_F(Qwen3AsrGolden, Greedy_runs_match_the_reference) {
    auto s = session();
    const std::string dir = ::testing::TempDir() + "qwen3_asr_run_dump";
    for (const GoldenRun & r : runs()) {
        const nlohmann::json g = fx().golden_json(r.clip, r.name + "/greedy.json");
        const std::vector<float> pcm = fx().wav_16k(r.clip);
        RunOptions o;
        o.prompt         = g["context"].get<std::string>();
        o.language       = g["language_forced"].is_null() ? "" : g["language_forced"].get<std::string>();
        o.max_new_tokens = fx().manifest()["max_new_tokens"].get<int>();
        std::vector<std::vector<float>> logits;
        o.step_logits = &logits;
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
        const Transcript t = s->run(pcm.data(), pcm.size(), o);
        unsetenv("TRANSCRIBE_DUMP_DIR");
        std::ifstream pf(dir + "/prompt_ids.json");
        EXPECT_EQ(nlohmann::json::parse(pf).get<std::vector<int32_t>>(), g["prompt_ids"].get<std::vector<int32_t>>())
            << r.clip << "/" << r.name;
        EXPECT_EQ(t.tokens, g["ids"].get<std::vector<int32_t>>()) << r.clip << "/" << r.name;
        EXPECT_EQ(t.text, g["text"].get<std::string>()) << r.clip << "/" << r.name;
        EXPECT_EQ(t.language, g["language"].get<std::string>()) << r.clip << "/" << r.name;
        EXPECT_EQ(t.truncated, !g["stopped_at_eos"].get<bool>()) << r.clip << "/" << r.name;

        // The logits of every step (ours has one more where the budget ran out: the step that found it
        // had). From our own mel,
        // whose distance to the golden one the encoder carries into them: ten times the reference's own
        // float32 tolerance, well inside the smallest greedy margin.
        const NpyArray ref = fx().golden(r.clip, r.name + "/step_logits.npy");
        const auto & run_entry = fx().manifest()["clips"][r.clip]["runs"][r.name];
        const double tol = 10 * run_entry["suggested_atol_logits"].get<double>();
        ASSERT_LT(tol, run_entry["smallest_margin"].get<double>() / 2) << r.clip << "/" << r.name;
        ASSERT_EQ(int64_t(logits.size()), ref.shape[0] + (t.truncated ? 1 : 0)) << r.clip << "/" << r.name;
        const size_t vocab = size_t(ref.shape[1]);
        for (size_t k = 0; k < size_t(ref.shape[0]); ++k) {
            const std::vector<float> row(ref.f32.begin() + long(k * vocab), ref.f32.begin() + long((k + 1) * vocab));
            EXPECT_LE(test::max_abs_diff(logits[k], row), tol) << r.clip << "/" << r.name << " step " << k;
        }
    }
}

TEST_F(Qwen3AsrGolden, Audio_shorter_than_half_a_second_is_padded_as_transcribe_pads_it) {
    auto s = session();
    const std::vector<float> pcm = fx().wav_16k("jfk_0p7s");
    RunOptions o;
    o.max_new_tokens = 4;
    const std::vector<float> short_pcm(pcm.begin(), pcm.begin() + 4000);
    std::vector<float> padded(8000, 0.0f);
    std::copy(short_pcm.begin(), short_pcm.end(), padded.begin());
    const Transcript a = s->run(short_pcm.data(), short_pcm.size(), o);
    const Transcript b = s->run(padded.data(), padded.size(), o);
    EXPECT_EQ(a.tokens, b.tokens);
}

// Hotwords join the context after the prompt, a space before each (the reference's one context string, keywords
// space-separated as its examples write them): prompt "Ask not: Kennedy," with hotwords 1961, —, café is the
// golden's context "Ask not: Kennedy, 1961 — café"; hotwords alone, "Kennedy", the forced_en run's.
TEST_F(Qwen3AsrGolden, Hotwords_join_the_context) {
    auto s = session();
    ASSERT_TRUE(model_->info().hotwords);
    RunOptions o;
    o.max_new_tokens = fx().manifest()["max_new_tokens"].get<int>();
    o.prompt   = "Ask not: Kennedy,";
    o.hotwords = {"1961", "\u2014", "caf\u00e9"};
    const std::vector<float> a = fx().wav_16k("jfk_0p7s");
    EXPECT_EQ(s->run(a.data(), a.size(), o).tokens,
              fx().golden_json("jfk_0p7s", "context/greedy.json")["ids"].get<std::vector<int32_t>>());
    o.prompt.clear();
    o.hotwords = {"Kennedy"};
    o.language = "English";
    const std::vector<float> b = fx().wav_16k("jfk_2p37s");
    EXPECT_EQ(s->run(b.data(), b.size(), o).tokens,
              fx().golden_json("jfk_2p37s", "forced_en/greedy.json")["ids"].get<std::vector<int32_t>>());
}

TEST_F(Qwen3AsrGolden, A_language_it_does_not_list_is_refused_naming_those_it_does) {
    auto s = session();
    const std::vector<float> pcm = fx().wav_16k("jfk_0p7s");
    RunOptions o;
    o.max_new_tokens = 2;
    o.language       = "Klingon";
    try {
        s->run(pcm.data(), pcm.size(), o);
        FAIL() << "Klingon was accepted";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("Chinese, English, Cantonese"), std::string::npos) << e.what();
    }
    // A code or any case of a listed name is that language: the same prompt as the golden's "English".
    o.max_new_tokens = 20;
    o.prompt         = "Kennedy";
    const nlohmann::json g = fx().golden_json("jfk_2p37s", "forced_en/greedy.json");
    const std::vector<float> clip = fx().wav_16k("jfk_2p37s");
    for (const char * name : {"en", "ENGLISH"}) {
        o.language = name;
        const Transcript t = s->run(clip.data(), clip.size(), o);
        EXPECT_EQ(t.tokens, g["ids"].get<std::vector<int32_t>>()) << name;
        EXPECT_EQ(t.language, "English") << name;
    }
}
