// Whisper end to end against the goldens of whisper-tiny (openai/whisper's own code on random weights in
// OpenAI's layout): the log-mel window, the encoder's stages, detect_language, decode() of each task
// (every greedy step's raw logits by id, the ids, text, avg_logprob, no_speech_prob), whisper's beam
// search and its finished candidates, and each 30-second window transcribe() decoded on the long clip
// (with the prompt of the segments before it). Tolerances: the fixture MANIFEST's suggested_atol.
#include "core/npy.h"
#include "decoding/whisper_long_form.h"
#include "families/whisper.h"
#include "support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

using namespace transcribe;

namespace {

const test::Fixture & fx() { return test::whisper_fixture(); }

const char * kClips[] = {"jfk", "cards_005", "espeak_goforward"};

// MANIFEST's tolerance of golden/<clip>/<file>: same_input where the stage is fed the golden's own input.
double atol(const std::string & rel, bool same_input = false) {
    const auto & g = fx().manifest()["goldens"]["golden/" + rel];
    return g[same_input && g.contains("suggested_atol_same_input") ? "suggested_atol_same_input" : "suggested_atol"].get<double>();
}

// A JSON scalar golden ({"value": v, "suggested_atol": a} or a bare number).
double value(const nlohmann::json & j) { return j.is_object() ? j["value"].get<double>() : j.get<double>(); }
double tolerance(const nlohmann::json & j) { return j.is_object() ? j["suggested_atol"].get<double>() : 1e-5; }

class WhisperGolden : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        model_ = test::load("whisper-tiny-f32.gguf").release();
        SessionOptions so;
        so.n_threads = 2;
        so.kv_type   = GGML_TYPE_F32;
        session_     = model_->new_session(so).release();
    }
    static void TearDownTestSuite() {
        delete session_;
        delete model_;
        session_ = nullptr;
        model_   = nullptr;
    }
    static WhisperModel &   model() { return dynamic_cast<WhisperModel &>(*model_); }
    static WhisperSession & session() { return dynamic_cast<WhisperSession &>(*session_); }

    // The first window transcribe() feeds: the clip's log-mel frames, zero past them. The golden's where
    // the fixture has one (GOLDEN), else ours.
    static std::vector<float> window(const std::string & clip, bool golden = true) {
        const int n_mels = 80, n_frames = 3000;
        std::vector<float> w(size_t(n_mels) * n_frames, 0.0f);
        if (golden && std::filesystem::exists(fx().path("golden/" + clip + "/mel.npy"))) {
            const NpyArray g = fx().golden(clip, "mel.npy"); // [3000, n_mels]
            for (int t = 0; t < n_frames; ++t) {
                for (int m = 0; m < n_mels; ++m) {
                    w[size_t(m) * n_frames + size_t(t)] = g.f32[size_t(t) * n_mels + size_t(m)];
                }
            }
            return w;
        }
        const std::vector<float> pcm = fx().wav_16k(clip);
        const MelFeatures mel = model().mel().compute(pcm.data(), pcm.size(), 2);
        for (int m = 0; m < n_mels; ++m) {
            std::copy_n(mel.data.begin() + long(m) * mel.n_frames, std::min(mel.n_valid, n_frames), w.begin() + long(m) * n_frames);
        }
        return w;
    }

    static Model *   model_;
    static Session * session_;
};
Model *   WhisperGolden::model_   = nullptr;
Session * WhisperGolden::session_ = nullptr;

} // namespace

TEST_F(WhisperGolden, Model_info_and_tokens_are_whispers) {
    const ModelInfo & i = model_->info();
    EXPECT_EQ(i.architecture, "whisper");
    EXPECT_EQ(i.languages.size(), 99u);
    EXPECT_TRUE(i.translation);
    EXPECT_TRUE(i.beam_search);
    const auto & t = fx().manifest()["tokenizer"];
    const WhisperVocab & v = model().vocab();
    EXPECT_EQ(v.eot, t["eot"].get<int>());
    EXPECT_EQ(v.sot, t["sot"].get<int>());
    EXPECT_EQ(v.timestamp_begin, t["timestamp_begin"].get<int>());
    EXPECT_EQ(v.no_speech, t["no_speech"].get<int>());
    std::vector<int32_t> blank = v.blank_tokens;
    blank.push_back(v.eot);
    EXPECT_EQ(blank, t["suppress_blank"].get<std::vector<int32_t>>());
    const WhisperLogitFilters filters(v, WhisperDecodeOptions {}, 3);
    EXPECT_EQ(filters.suppress_tokens(), t["suppress_tokens"].get<std::vector<int32_t>>());
}

TEST_F(WhisperGolden, Mel_window_matches_log_mel_spectrogram) {
    for (const char * clip : {"jfk", "espeak_goforward"}) {
        const std::vector<float> ours = window(clip, false), ref = window(clip, true);
        EXPECT_LE(test::max_abs_diff(ours, ref), atol(std::string(clip) + "/mel.npy")) << clip;
    }
}

TEST_F(WhisperGolden, Encoder_stages_match_from_the_golden_mel) {
    const std::string dir = ::testing::TempDir() + "whisper_dump";
    std::filesystem::create_directories(dir);
    setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
    const std::vector<float> enc = session().encode(window("jfk"));
    unsetenv("TRANSCRIBE_DUMP_DIR");
    EXPECT_LE(test::max_abs_diff(enc, fx().golden("jfk", "enc_out.npy").f32), atol("jfk/enc_out.npy", true));
    for (const char * stage : {"enc_conv", "enc_layer_0"}) {
        const NpyArray ours = npy_read(dir + "/" + stage + ".npy");
        const std::string file = std::string(stage) + ".npy";
        EXPECT_EQ(ours.shape, (std::vector<int64_t> {1500, 64})) << stage;
        EXPECT_LE(test::max_abs_diff(ours.f32, fx().golden("jfk", file).f32), atol("jfk/" + file, true)) << stage;
    }
}

TEST_F(WhisperGolden, Language_detection_matches_detect_language) {
    for (const char * clip : kClips) {
        const nlohmann::json g = fx().golden_json(clip, "lang_probs.json");
        session().encode(window(clip));
        std::vector<float> probs;
        const int32_t token = session().detect_language(&probs);
        EXPECT_EQ(token, g["detected_token"].get<int>()) << clip;
        EXPECT_EQ(model().language_code(token), g["detected"].get<std::string>()) << clip;
        const double tol = g["probs_suggested_atol"].get<double>();
        const auto & codes = model_->info().languages;
        for (size_t i = 0; i < codes.size(); ++i) {
            EXPECT_NEAR(probs[i], g["probs"][codes[i]].get<double>(), tol) << clip << " " << codes[i];
        }
    }
}

TEST_F(WhisperGolden, Greedy_decode_of_every_task_matches_decode) {
    for (const char * clip : kClips) {
        for (const char * task : {"transcribe", "transcribe_ts", "translate"}) {
            SCOPED_TRACE(std::string(clip) + "/" + task);
            const std::string dir = std::string(clip) + "/" + task;
            const nlohmann::json g = fx().golden_json(dir, "decode.json");
            WhisperDecodeRequest req;
            req.language           = std::string(task) == "translate" ? "" : "en"; // translate: language=None
            req.translate          = std::string(task) == "translate";
            req.options.timestamps = std::string(task) == "transcribe_ts";
            std::vector<std::vector<float>> raw;
            req.raw_step_logits = &raw;
            const WhisperDecodeOutcome d = session().decode(window(clip), req);
            EXPECT_EQ(d.initial_tokens, g["initial_tokens"].get<std::vector<int32_t>>());
            EXPECT_EQ(d.language, g["language"].get<std::string>());
            const auto steps = g["step_tokens"].get<std::vector<int32_t>>();
            ASSERT_EQ(raw.size(), steps.size());
            EXPECT_EQ(d.result.tokens, g["tokens"].get<std::vector<int32_t>>());
            EXPECT_EQ(d.text, g["text"].get<std::string>());
            EXPECT_NEAR(d.result.avg_logprob, value(g["avg_logprob"]), tolerance(g["avg_logprob"]));
            EXPECT_NEAR(d.no_speech_prob, value(g["no_speech_prob"]), tolerance(g["no_speech_prob"]));
            EXPECT_NEAR(whisper_compression_ratio(d.text), g["compression_ratio"].get<double>(), 1e-12);
            // Every step's raw logits at the golden's top-32 ids.
            const NpyArray ids = fx().golden(dir, "dec_step_topk_ids.npy"), lg = fx().golden(dir, "dec_step_topk_logits.npy");
            const bool golden_mel = std::filesystem::exists(fx().path("golden/" + std::string(clip) + "/mel.npy"));
            const double tol = atol(dir + "/dec_step_topk_logits.npy", golden_mel);
            ASSERT_EQ(ids.shape[0], int64_t(raw.size()));
            double worst = 0;
            for (size_t s = 0; s < raw.size(); ++s) {
                for (int64_t k = 0; k < ids.shape[1]; ++k) {
                    const size_t at = s * size_t(ids.shape[1]) + size_t(k);
                    const int32_t id = int32_t(ids.i32[at]);
                    worst = std::max(worst, std::abs(double(raw[s][size_t(id)]) - double(lg.f32[at])));
                }
            }
            EXPECT_LE(worst, tol);
        }
    }
}

TEST_F(WhisperGolden, Beam_search_matches_whispers_beam_search) {
    for (const char * clip : kClips) {
        SCOPED_TRACE(clip);
        const nlohmann::json g = fx().golden_json(std::string(clip) + "/beam5", "beam.json");
        WhisperDecodeRequest req;
        req.language           = "en";
        req.options.timestamps = false;
        req.options.beam_size  = 5;
        const WhisperDecodeOutcome d = session().decode(window(clip), req);
        EXPECT_EQ(d.result.tokens, g["tokens"].get<std::vector<int32_t>>());
        EXPECT_EQ(d.text, g["text"].get<std::string>());
        EXPECT_NEAR(d.result.avg_logprob, value(g["avg_logprob"]), tolerance(g["avg_logprob"]));
        const auto & finished = g["finished_candidates"];
        ASSERT_EQ(d.result.candidates.size(), finished.size());
        for (size_t i = 0; i < finished.size(); ++i) {
            EXPECT_EQ(d.result.candidates[i], finished[i]["tokens"].get<std::vector<int32_t>>()) << i;
            EXPECT_NEAR(d.result.candidate_sums[i], finished[i]["sum_logprob"].get<double>(), 1e-4) << i;
        }
    }
}

TEST_F(WhisperGolden, Each_long_form_window_decodes_as_transcribe_decoded_it) {
    const nlohmann::json g = fx().golden_json("long_38s", "transcribe.json");
    const std::vector<float> pcm = fx().wav_16k("long_38s");
    const MelFeatures mel = model().mel().compute(pcm.data(), pcm.size(), 2);
    ASSERT_EQ(mel.n_valid, 3800);
    for (const auto & w : g["windows"]) {
        SCOPED_TRACE("window " + w["window"].dump());
        const int seek = w["seek"].get<int>(), size = std::min(3000, mel.n_valid - seek);
        std::vector<float> cut(size_t(80) * 3000, 0.0f);
        for (int m = 0; m < 80; ++m) {
            std::copy_n(mel.data.begin() + long(m) * mel.n_frames + seek, size, cut.begin() + long(m) * 3000);
        }
        WhisperDecodeRequest req;
        req.language = "en";
        req.prompt   = w["prompt_tokens"].get<std::vector<int32_t>>();
        const WhisperDecodeOutcome d = session().decode(cut, req);
        EXPECT_EQ(d.initial_tokens, w["initial_tokens"].get<std::vector<int32_t>>());
        EXPECT_EQ(d.result.tokens, w["tokens"].get<std::vector<int32_t>>());
        EXPECT_NEAR(d.result.avg_logprob, value(w["avg_logprob"]), tolerance(w["avg_logprob"]));
        EXPECT_NEAR(d.no_speech_prob, value(w["no_speech_prob"]), tolerance(w["no_speech_prob"]));
        EXPECT_NEAR(whisper_compression_ratio(d.text), w["compression_ratio"].get<double>(), 1e-12);
    }
}

TEST_F(WhisperGolden, Transcribe_cuts_the_first_window_at_its_timestamp_pairs) {
    // jfk is one window, decoded by transcribe() as decode() decodes it with timestamps (transcribe_ts).
    // Those ids have timestamp pairs at indices 2-3, 5-6, 8-9 and 11-12 and end in text (no single
    // timestamp at the end), so transcribe() keeps the segments [0, 3), [3, 6), [6, 9), [9, 12) and drops
    // the tail; the next seek (the last timestamp, 29.80 s) is past the audio. Times: (id - 50364) x 0.02 s.
    const nlohmann::json g = fx().golden_json("jfk/transcribe_ts", "decode.json");
    const auto ids = g["tokens"].get<std::vector<int32_t>>();
    const std::vector<float> pcm = fx().wav_16k("jfk");
    RunOptions o;
    o.language = "en";
    const Transcript t = session_->run(pcm.data(), pcm.size(), o);
    EXPECT_EQ(t.tokens, std::vector<int32_t>(ids.begin(), ids.begin() + 12));
    EXPECT_EQ(t.text, "started started started started");
    EXPECT_EQ(t.language, "en");
    ASSERT_EQ(t.segments.size(), 4u);
    const int64_t times[4][2] = {{700, 14140}, {14140, 17780}, {26360, 26380}, {26380, 29800}};
    const size_t cuts[5] = {0, 3, 6, 9, 12};
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(t.segments[i].t0_ms, times[i][0]) << i;
        EXPECT_EQ(t.segments[i].t1_ms, times[i][1]) << i;
        EXPECT_EQ(t.segments[i].tokens, std::vector<int32_t>(ids.begin() + long(cuts[i]), ids.begin() + long(cuts[i + 1]))) << i;
        EXPECT_TRUE(t.segments[i].has_decode);
        EXPECT_EQ(t.segments[i].decode.seek, 0);
        EXPECT_NEAR(t.segments[i].decode.avg_logprob, value(g["avg_logprob"]), tolerance(g["avg_logprob"]));
        EXPECT_NEAR(t.segments[i].decode.no_speech_prob, value(g["no_speech_prob"]), tolerance(g["no_speech_prob"]));
    }
    EXPECT_EQ(t.segments[1].text, "started");
}

TEST_F(WhisperGolden, Transcribe_with_word_timestamps_matches_transcribe_on_the_long_clip) {
    // whisper.transcribe(..., word_timestamps=True, language='en'): three windows (seeks 0, 3000, 3798: the
    // second ends mid-segment, so the third starts at its last word's end), every segment's times moved to
    // its words, the instantaneous ones kept empty.
    const nlohmann::json g = fx().golden_json("long_38s", "transcribe.json");
    const std::vector<float> pcm = fx().wav_16k("long_38s");
    RunOptions o;
    o.language   = "en";
    o.timestamps = true;
    const Transcript t = session_->run(pcm.data(), pcm.size(), o);
    EXPECT_EQ(t.text, strip_whitespace(g["text"].get<std::string>()));
    ASSERT_EQ(t.segments.size(), g["segments"].size());
    std::vector<int32_t> all;
    for (size_t i = 0; i < t.segments.size(); ++i) {
        const auto & gs = g["segments"][i];
        const Segment & s = t.segments[i];
        SCOPED_TRACE("segment " + std::to_string(i));
        EXPECT_EQ(s.decode.seek, gs["seek"].get<int>());
        EXPECT_EQ(s.t0_ms, std::llround(gs["start"].get<double>() * 1000.0));
        EXPECT_EQ(s.t1_ms, std::llround(gs["end"].get<double>() * 1000.0));
        EXPECT_EQ(s.text, strip_whitespace(gs["text"].get<std::string>()));
        EXPECT_EQ(s.tokens, gs["tokens"].get<std::vector<int32_t>>());
        ASSERT_EQ(s.words.size(), gs["words"].size());
        for (size_t w = 0; w < s.words.size(); ++w) {
            EXPECT_EQ(s.words[w].text, strip_whitespace(gs["words"][w]["word"].get<std::string>()));
            EXPECT_EQ(s.words[w].t0_ms, std::llround(gs["words"][w]["start"].get<double>() * 1000.0));
            EXPECT_EQ(s.words[w].t1_ms, std::llround(gs["words"][w]["end"].get<double>() * 1000.0));
        }
        all.insert(all.end(), s.tokens.begin(), s.tokens.end());
    }
    EXPECT_EQ(t.tokens, all);
}

TEST_F(WhisperGolden, Word_probabilities_match_find_alignment) {
    // The first window of the long clip, decoded, then aligned: its words' probabilities (the mean softmax
    // of their tokens over the ids below <|endoftext|>).
    const nlohmann::json g = fx().golden_json("long_38s", "transcribe.json");
    const std::vector<float> pcm = fx().wav_16k("long_38s");
    const MelFeatures mel = model().mel().compute(pcm.data(), pcm.size(), 2);
    std::vector<float> cut(size_t(80) * 3000, 0.0f);
    for (int m = 0; m < 80; ++m) {
        std::copy_n(mel.data.begin() + long(m) * mel.n_frames, 3000, cut.begin() + long(m) * 3000);
    }
    WhisperDecodeRequest req;
    req.language = "en";
    session().decode(cut, req);
    std::vector<int32_t> text;
    for (size_t i = 0; i < 3; ++i) { // the window's three segments
        for (int32_t id : g["segments"][i]["tokens"].get<std::vector<int32_t>>()) {
            if (id < model().vocab().eot) {
                text.push_back(id);
            }
        }
    }
    const std::vector<WhisperWordTiming> words = session().align_words(text, 3000, "en", false);
    ASSERT_EQ(words.size(), 3u);
    const double tol = g["word_probability_suggested_atol"].get<double>();
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_NEAR(words[i].probability, g["segments"][i]["words"][0]["probability"].get<double>(), tol) << i;
    }
}

TEST_F(WhisperGolden, English_only_requests_and_unknown_languages_are_refused) {
    const std::vector<float> pcm = fx().wav_16k("cards_005");
    RunOptions o;
    o.language = "xx";
    try {
        session_->run(pcm.data(), pcm.size(), o);
        FAIL() << "an unknown language ran";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("knows en, zh, de"), std::string::npos) << e.what();
    }
    o.language        = "de";
    o.target_language = "fr";
    try {
        session_->run(pcm.data(), pcm.size(), o);
        FAIL() << "a translation into French ran";
    } catch (const Error & e) {
        EXPECT_NE(std::string(e.what()).find("into English (en) only"), std::string::npos) << e.what();
    }
}

// F16, Q8_0 and Q5_0 files in a default session (both caches F16, as whisper.cpp keeps them): every raw
// step logit within a stated bound of the F32 goldens, and the same decisions wherever the golden's margin
// (top-1 over top-2 of the filtered logits) exceeds twice that bound: each decode is followed up to its
// first decision closer than that (random weights leave many margins below any quantization's drift; past
// such a step the contexts may differ). Worst drift measured over the 9 decodes, bounds about 1.5x above:
//   F16 0.0217 (0.003 with an F32 cross-attention cache), Q8_0 0.0633, Q5_0 0.227.
TEST_F(WhisperGolden, F16_Q8_0_and_Q5_0_stay_within_their_drift_and_take_the_clear_decisions) {
    struct Case {
        const char * file;
        double       bound;      // on any raw logit
        size_t       min_steps;  // steps the clear decisions must reach, summed over the decodes
    };
    for (const Case & c : {Case {"whisper-tiny-f16.gguf", 0.033, 50}, Case {"whisper-tiny-Q8_0.gguf", 0.095, 15}, Case {"whisper-tiny-Q5_0.gguf", 0.34, 8}}) {
        const char * file  = c.file;
        const double bound = c.bound;
        auto other = test::load(file);
        SessionOptions so;
        so.n_threads = 2;
        auto session = other->new_session(so);
        auto & ws = dynamic_cast<WhisperSession &>(*session);
        size_t followed = 0;
        double worst_of_all = 0;
        for (const char * clip : kClips) {
            for (const char * task : {"transcribe", "transcribe_ts", "translate"}) {
                SCOPED_TRACE(std::string(file) + " " + clip + "/" + task);
                const std::string dir = std::string(clip) + "/" + task;
                const nlohmann::json g = fx().golden_json(dir, "decode.json");
                WhisperDecodeRequest req;
                req.language           = g["language"].get<std::string>();
                req.translate          = std::string(task) == "translate";
                req.options.timestamps = std::string(task) == "transcribe_ts";
                std::vector<std::vector<float>> raw;
                req.raw_step_logits = &raw;
                const WhisperDecodeOutcome d = ws.decode(window(clip), req);
                std::vector<int32_t> steps = d.result.tokens;
                steps.push_back(model().vocab().eot);
                const auto golden_steps = g["step_tokens"].get<std::vector<int32_t>>();
                const auto margins      = g["step_margin"];
                size_t clear = 0; // steps whose decision and all before it are clear of the drift
                while (clear < golden_steps.size() && margins[clear].is_number() && margins[clear].get<double>() > 2 * bound) {
                    ++clear;
                }
                ASSERT_GE(steps.size(), clear);
                EXPECT_EQ(std::vector<int32_t>(steps.begin(), steps.begin() + long(clear)),
                          std::vector<int32_t>(golden_steps.begin(), golden_steps.begin() + long(clear)));
                const NpyArray ids = fx().golden(dir, "dec_step_topk_ids.npy"), lg = fx().golden(dir, "dec_step_topk_logits.npy");
                double worst = 0;
                for (size_t s = 0; s <= std::min(clear, raw.size() - 1); ++s) { // the step after the last clear one has its context too
                    for (int64_t k = 0; k < ids.shape[1]; ++k) {
                        const size_t at = s * size_t(ids.shape[1]) + size_t(k);
                        worst = std::max(worst, std::abs(double(raw[s][size_t(ids.i32[at])]) - double(lg.f32[at])));
                    }
                }
                EXPECT_LE(worst, bound);
                worst_of_all = std::max(worst_of_all, worst);
                followed += clear + 1;
            }
        }
        EXPECT_GE(followed, c.min_steps) << file; // not a vacuous check
        std::printf("%s: %zu steps followed, worst raw-logit drift %.3g (bound %.3g)\n", file, followed, worst_of_all, bound);
    }
}
