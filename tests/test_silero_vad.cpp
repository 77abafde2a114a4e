// Silero VAD v5 against onnxruntime's outputs (tests/fixtures/silero-vad, tolerances from its
// MANIFEST), and the speech-region post-processing against hand-worked cases of upstream's loop.
#include "core/audio.h"
#include "core/error.h"
#include "engine/long_audio.h"
#include "core/npy.h"
#include "engine/speech_segments.h"
#include "families/silero_vad.h"
#include "support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace transcribe;

namespace {

const std::string kFixture = SILERO_FIXTURE;

std::string vad_model_path() { return test::model("silero-vad-v5.gguf"); }

std::string clip_path(const std::string & clip) {
    return clip == "vad_mix_public" ? kFixture + "/audio/vad_mix_public.wav" : test::fixture("audio/" + clip + ".wav");
}

const SileroVad & vad_model() {
    static SileroVad model(vad_model_path());
    return model;
}

nlohmann::json segments_golden() {
    std::ifstream f(kFixture + "/v5/segments.json");
    return nlohmann::json::parse(f);
}

// Largest |a - b| over max(1, max |b|).
float scaled_diff(const std::vector<float> & a, const std::vector<float> & b) {
    return test::max_abs_diff(a, b) / std::max(1.0f, test::max_abs(b));
}

class VadClips : public ::testing::TestWithParam<const char *> {};

TEST_P(VadClips, ProbabilitiesStateAndSegmentsMatchOnnxruntime) {
    const std::string clip = GetParam();
    const std::vector<float> pcm = audio_decode_file(clip_path(clip), 16000);
    for (int threads : {1, 2}) {
        SileroVadSession session(vad_model(), threads);
        const std::vector<float> probs = session.run(pcm.data(), pcm.size(), 16000);
        const NpyArray ref = npy_read(kFixture + "/v5/" + clip + ".probs.npy");
        ASSERT_EQ(probs.size(), ref.f32.size()) << clip;
        EXPECT_LE(test::max_abs_diff(probs, ref.f32), 1e-4f) << clip << ", " << threads << " threads";

        const NpyArray state = npy_read(kFixture + "/v5/" + clip + ".state.npy"); // [2, 1, 128]: h, then c
        EXPECT_LE(scaled_diff(session.state(), state.f32), 1e-4f) << clip;

        const std::vector<AudioSpan> regions = speech_regions(probs, 512, pcm.size(), 16000, default_speech_params());
        const nlohmann::json golden = segments_golden();
        const nlohmann::json & want = golden["clips"][clip]["segments"];
        ASSERT_EQ(regions.size(), want.size()) << clip;
        for (size_t i = 0; i < regions.size(); ++i) {
            EXPECT_EQ(regions[i].begin, want[i]["start_sample"].get<size_t>()) << clip << " segment " << i;
            EXPECT_EQ(regions[i].end, want[i]["end_sample"].get<size_t>()) << clip << " segment " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Public, VadClips, ::testing::Values("jfk", "tone_noise_3s", "vad_mix_public"));

// Every stage of jfk's first 80 chunks (silence, speech onset at chunk 10, a pause from 68).
TEST(SileroVad, IntermediatesMatchOnnxruntime) {
    const std::string dir = kFixture + "/v5/intermediates/jfk_first80/";
    const std::vector<float> pcm = audio_decode_file(clip_path("jfk"), 16000);
    const size_t n_chunks = 80;
    SileroVadSession session(vad_model(), 2);
    SileroVadTaps taps;
    const std::vector<float> probs = session.run(pcm.data(), n_chunks * 512, 16000, {}, &taps);

    // Ours per chunk [length][channels]; onnxruntime's per chunk [channels][length].
    auto transposed = [&](const std::vector<float> & ours, int64_t channels, int64_t len) {
        std::vector<float> out(ours.size());
        for (size_t k = 0; k < n_chunks; ++k) {
            for (int64_t c = 0; c < channels; ++c) {
                for (int64_t t = 0; t < len; ++t) {
                    out[(k * channels + c) * len + t] = ours[(k * len + t) * channels + c];
                }
            }
        }
        return out;
    };
    const struct {
        const char *               name;
        const std::vector<float> & ours;
        int64_t                    channels, len;
    } stages[] = {
        {"magnitude", taps.magnitude, 129, 4}, {"enc0", taps.enc[0], 128, 4}, {"enc1", taps.enc[1], 64, 2},
        {"enc2", taps.enc[2], 64, 1},          {"enc3", taps.enc[3], 128, 1},
    };
    for (const auto & s : stages) {
        const NpyArray ref = npy_read(dir + s.name + ".npy");
        ASSERT_EQ(s.ours.size(), ref.f32.size()) << s.name;
        EXPECT_LE(scaled_diff(transposed(s.ours, s.channels, s.len), ref.f32), 1e-5f) << s.name;
    }
    EXPECT_LE(scaled_diff(taps.logit, npy_read(dir + "logit.npy").f32), 1e-5f);
    EXPECT_LE(scaled_diff(probs, npy_read(dir + "prob.npy").f32), 1e-5f);
    // The state after chunk 79, and the h / c onnxruntime produced at that step.
    const NpyArray h = npy_read(dir + "lstm_h.npy"), c = npy_read(dir + "lstm_c.npy"); // [80, 128]
    const std::vector<float> h79(h.f32.end() - 128, h.f32.end()), c79(c.f32.end() - 128, c.f32.end());
    EXPECT_LE(scaled_diff(std::vector<float>(session.state().begin(), session.state().begin() + 128), h79), 1e-5f);
    EXPECT_LE(scaled_diff(std::vector<float>(session.state().begin() + 128, session.state().end()), c79), 1e-5f);
}

TEST(SileroVad, SessionsAreIndependentAndRerunsIdentical) {
    const std::vector<float> jfk = audio_decode_file(clip_path("jfk"), 16000);
    const std::vector<float> mix = audio_decode_file(clip_path("vad_mix_public"), 16000);
    SileroVadSession session(vad_model(), 1);
    const std::vector<float> first = session.run(jfk.data(), jfk.size(), 16000);
    session.run(mix.data(), mix.size(), 16000); // other graphs, other state
    EXPECT_EQ(session.run(jfk.data(), jfk.size(), 16000), first);
}

TEST(SileroVad, EightKilohertzBranchRuns) {
    // No onnxruntime reference at 8 kHz here: the branch must load, stream 256-sample chunks and find
    // speech where the 16 kHz branch does on the same recording.
    const std::vector<float> pcm = audio_decode_file(clip_path("jfk"), 8000);
    SileroVadSession session(vad_model(), 1);
    const std::vector<float> probs = session.run(pcm.data(), pcm.size(), 8000);
    ASSERT_EQ(probs.size(), (pcm.size() + 255) / 256);
    const std::vector<AudioSpan> regions = speech_regions(probs, 256, pcm.size(), 8000, default_speech_params());
    ASSERT_FALSE(regions.empty());
    EXPECT_NEAR(double(regions.front().begin) / 8000, 0.29, 0.15);
    EXPECT_NEAR(double(regions.back().end) / 8000, 10.62, 0.3);
}

TEST(SileroVad, Errors) {
    SileroVadSession session(vad_model(), 1);
    const std::vector<float> pcm(1000, 0.0f);
    try {
        session.run(pcm.data(), pcm.size(), 44100);
        FAIL() << "44.1 kHz accepted";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("16000"), std::string::npos) << e.what();
    }
    try {
        session.run(pcm.data(), pcm.size(), 16000, [] { return true; });
        FAIL() << "abort ignored";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_ABORTED);
    }
    EXPECT_TRUE(session.run(pcm.data(), 0, 16000).empty());
    try {
        SileroVad wrong(test::model("canary-qwen-tiny-f32.gguf"));
        FAIL() << "a transcription model loaded as a VAD";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_UNSUPPORTED_ARCH);
    }
    try {
        load_model(vad_model_path(), WeightOptions {}, ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
        FAIL() << "a VAD loaded as a transcription model";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_UNSUPPORTED_ARCH);
    }
}

// ---- speech_regions: cases worked by hand through upstream's v5.1.2 loop (chunk 512 at 16 kHz).

std::vector<std::pair<size_t, size_t>> spans(const std::vector<AudioSpan> & v) {
    std::vector<std::pair<size_t, size_t>> out;
    for (const AudioSpan & s : v) {
        out.emplace_back(s.begin, s.end);
    }
    return out;
}

TEST(SpeechRegions, MaxSpeechCutsWithoutAPause) {
    // 100 chunks of speech, max 1 s: max_speech = 16000 - 512 - 2 * 480 = 14528 samples, so the region
    // is cut at chunk 29 (14848), restarts at 30 (15360), and so on; the 512-sample gaps are then
    // shared by the padding (256 each side).
    transcribe_vad_params p = default_speech_params();
    p.max_speech_s = 1.0f;
    const std::vector<float> probs(100, 0.9f);
    const std::vector<std::pair<size_t, size_t>> want = {{0, 15104}, {15104, 30464}, {30464, 45824}, {45824, 51200}};
    EXPECT_EQ(spans(speech_regions(probs, 512, 51200, 16000, p)), want);
    p.max_speech_s = 0.0f; // no limit: one region
    EXPECT_EQ(spans(speech_regions(probs, 512, 51200, 16000, p)), (std::vector<std::pair<size_t, size_t>> {{0, 51200}}));
}

TEST(SpeechRegions, MaxSpeechCutsAtThePause) {
    // Speech, 6 chunks below neg_threshold (3072 samples: over 98 ms, under min_silence 1000 ms, so the
    // region goes on), speech again; max 2 s (30528 samples) is passed at chunk 60 and the region is
    // cut where the pause began (10240), the next one starting where speech resumed (13312).
    transcribe_vad_params p = default_speech_params();
    p.max_speech_s   = 2.0f;
    p.min_silence_ms = 1000;
    std::vector<float> probs(70, 0.9f);
    for (int i = 20; i < 26; ++i) {
        probs[size_t(i)] = 0.1f;
    }
    const std::vector<std::pair<size_t, size_t>> want = {{0, 10720}, {12832, 35840}};
    EXPECT_EQ(spans(speech_regions(probs, 512, 35840, 16000, p)), want);
}

TEST(SpeechRegions, ThresholdsAndShortSpeech) {
    // 0.4 continues speech (above neg 0.35) but does not start it; 7 chunks (3584 samples) are below
    // min_speech 4000 and dropped.
    std::vector<float> probs(40, 0.0f);
    for (int i = 5; i < 12; ++i) {
        probs[size_t(i)] = 0.9f;
    }
    for (int i = 20; i < 30; ++i) {
        probs[size_t(i)] = i < 22 ? 0.9f : 0.4f;
    }
    // Second region: starts 10240, ends where 0.0 begins (15360) after 4 chunks of silence (2048 >= 1600).
    const std::vector<std::pair<size_t, size_t>> want = {{10240 - 480, 15360 + 480}};
    EXPECT_EQ(spans(speech_regions(probs, 512, 40 * 512, 16000, default_speech_params())), want);
    transcribe_vad_params bad = default_speech_params();
    bad.threshold = 1.5f;
    EXPECT_THROW(speech_regions(probs, 512, 40 * 512, 16000, bad), Error);
}

// ---- pieces for the decoder

TEST(SpeechPieces, MergeUpToTheWindowAndSplitLongRegionsAtTheirLowestProbability) {
    const size_t sr = 16000, chunk = 512, window = 40 * sr;
    const size_t n_chunks = 140 * sr / chunk;
    std::vector<float> probs(n_chunks, 0.9f);
    const size_t dip1 = 75 * sr / chunk, dip2 = 100 * sr / chunk;
    probs[dip1] = 0.2f;
    probs[dip2] = 0.3f;
    const std::vector<AudioSpan> regions = {{0, 5 * sr}, {6 * sr, 10 * sr}, {50 * sr, 130 * sr}};
    const std::vector<SpeechPiece> pieces = plan_speech_pieces(regions, probs, chunk, window);
    // The 80 s region is cut at the dips (75 s, then 100 s); 5 + 4 + 25 s of speech fill the first piece.
    const size_t cut1 = dip1 * chunk + chunk / 2, cut2 = dip2 * chunk + chunk / 2;
    using Spans = std::vector<std::pair<size_t, size_t>>;
    ASSERT_EQ(pieces.size(), 3u);
    EXPECT_EQ(spans(pieces[0].regions), (Spans {{0, 5 * sr}, {6 * sr, 10 * sr}, {50 * sr, cut1}}));
    EXPECT_EQ(spans(pieces[1].regions), (Spans {{cut1, cut2}}));
    EXPECT_EQ(spans(pieces[2].regions), (Spans {{cut2, 130 * sr}}));
    for (const SpeechPiece & p : pieces) {
        EXPECT_LE(p.samples(), window);
    }
    EXPECT_TRUE(plan_speech_pieces({}, probs, chunk, window).empty());
}

TEST(SpeechPieces, WordsGoToRegionsByDurationAndCuesStaySubtitleSized) {
    const auto model = test::load("canary-qwen-tiny-f32.gguf");
    const Tokenizer & tok = model->tokenizer();
    Transcript piece;
    piece.tokens = tok.encode(" one two three four five six"); // 28 characters
    // Regions of 1 s and 2 s: the first third of the characters (9.3) holds the middles of " one" and " two".
    const std::vector<Segment> segs = speech_segments(piece, {{16000, 32000}, {48000, 80000}}, tok, 16000);
    ASSERT_EQ(segs.size(), 2u);
    EXPECT_EQ(segs[0].text, " one two");
    EXPECT_EQ(segs[0].t0_ms, 1000);
    EXPECT_EQ(segs[0].t1_ms, 2000);
    EXPECT_EQ(segs[1].text, " three four five six");
    EXPECT_EQ(segs[1].t0_ms, 3000);
    EXPECT_EQ(segs[1].t1_ms, 5000);

    // 20 ten-character words over one 30 s region: cues of 4 words (40 characters, 6 s).
    std::string text;
    for (int i = 0; i < 20; ++i) {
        text += " abcdefghi";
    }
    piece.tokens    = tok.encode(text);
    piece.truncated = true;
    const std::vector<Segment> cues = speech_segments(piece, {{0, 30 * 16000}}, tok, 16000);
    ASSERT_EQ(cues.size(), 5u);
    for (size_t i = 0; i < cues.size(); ++i) {
        EXPECT_EQ(cues[i].text.size(), 40u);
        EXPECT_EQ(cues[i].t0_ms, int64_t(6000 * i));
        EXPECT_EQ(cues[i].t1_ms, int64_t(6000 * (i + 1)));
        EXPECT_EQ(cues[i].truncated, i == 4); // the piece's end is where its budget ran out
    }
    piece.tokens.clear();
    EXPECT_TRUE(speech_segments(piece, {{0, 16000}}, tok, 16000).empty());
}

} // namespace
