// The C API on the fixture model: batch == serial, truncation, context limits, abort, progress,
// tokenizer calls, model info.
#include "c_api_support.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using test::expect_same_transcript;
using test::load_cpu;
using test::tokens;

namespace {

class Api : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        transcribe_load_params lp = transcribe_load_params_init();
        lp.backend = TRANSCRIBE_BACKEND_CPU;
        ASSERT_EQ(transcribe_model_load(test::model("canary-qwen-tiny-f32.gguf").c_str(), &lp, &model_), TRANSCRIBE_OK);
        for (const char * clip : test::kClips) {
            audio_.push_back(test::read_wav_16k(clip));
        }
    }
    static void TearDownTestSuite() { transcribe_model_free(model_); }

    static transcribe_session * session(transcribe_session_params sp = transcribe_session_params_init()) {
        sp.n_threads = 2;
        sp.kv_type   = TRANSCRIBE_KV_F32;
        transcribe_session * s = nullptr;
        EXPECT_EQ(transcribe_session_create(model_, &sp, &s), TRANSCRIBE_OK);
        return s;
    }

    // A long recording: jfk four times over (44 s, past one window).
    static std::vector<float> four_jfk() {
        std::vector<float> four;
        for (int i = 0; i < 4; ++i) {
            four.insert(four.end(), audio_[0].begin(), audio_[0].end());
        }
        return four;
    }

    static transcribe_model *              model_;
    static std::vector<std::vector<float>> audio_;
};
transcribe_model *              Api::model_ = nullptr;
std::vector<std::vector<float>> Api::audio_;

} // namespace

TEST_F(Api, Model_info) {
    transcribe_model_info info;
    ASSERT_EQ(transcribe_model_get_info(model_, &info), TRANSCRIBE_OK);
    EXPECT_STREQ(info.architecture, "canary_qwen");
    EXPECT_STREQ(info.name, "canary-qwen-tiny");
    EXPECT_STREQ(info.backend, "CPU");
    EXPECT_EQ(info.sample_rate, 16000);
    EXPECT_EQ(info.max_audio_ms, 40000);
    EXPECT_EQ(info.n_vocab, 151936);
    ASSERT_EQ(info.n_languages, 1);
    EXPECT_STREQ(info.languages[0], "en");
    EXPECT_GT(info.load_ms, 0.0);
    EXPECT_FALSE(info.word_timestamps);
    EXPECT_FALSE(info.language_prompt);
    EXPECT_TRUE(info.token_budget);
}

TEST_F(Api, A_language_the_model_does_not_transcribe_is_refused) {
    transcribe_session * s = session();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 2;
    transcribe_result * r = nullptr;
    rp.language = "fr";
    EXPECT_EQ(transcribe_run(s, audio_[1].data(), audio_[1].size(), &rp, &r), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(transcribe_last_error()).find("transcribes en only"), std::string::npos);
    rp.language = "EN";
    EXPECT_EQ(transcribe_run(s, audio_[1].data(), audio_[1].size(), &rp, &r), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    transcribe_result_free(r);
    transcribe_session_free(s);
}

// The word API on a model that gives word times: the words of each segment, then all of them, as the
// model's transcript has them; out-of-range requests are INVALID_ARG.
TEST(ApiWords, Words_per_segment_and_overall) {
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend = TRANSCRIBE_BACKEND_CPU;
    transcribe_model * model = nullptr;
    ASSERT_EQ(transcribe_model_load(test::model("parakeet-tdt-tiny-f32.gguf").c_str(), &lp, &model), TRANSCRIBE_OK);
    transcribe_model_info info;
    ASSERT_EQ(transcribe_model_get_info(model, &info), TRANSCRIBE_OK);
    EXPECT_TRUE(info.word_timestamps);
    EXPECT_FALSE(info.token_budget);
    transcribe_session * s = nullptr;
    ASSERT_EQ(transcribe_session_create(model, nullptr, &s), TRANSCRIBE_OK);
    const std::vector<float> pcm = test::parakeet_fixture().wav_16k("jfk_div8");
    transcribe_result * r = nullptr;
    ASSERT_EQ(transcribe_run(s, pcm.data(), pcm.size(), nullptr, &r), TRANSCRIBE_OK);
    const nlohmann::json words = test::parakeet_fixture().golden_json("jfk_div8", "hypothesis.json")["timestamp"]["word"];
    ASSERT_EQ(transcribe_result_n_words(r, -1), int(words.size()));
    ASSERT_EQ(transcribe_result_n_segments(r), 1);
    ASSERT_EQ(transcribe_result_n_words(r, 0), int(words.size()));
    for (int i = 0; i < int(words.size()); ++i) {
        transcribe_word all, seg;
        ASSERT_EQ(transcribe_get_word(r, -1, i, &all), TRANSCRIBE_OK);
        ASSERT_EQ(transcribe_get_word(r, 0, i, &seg), TRANSCRIBE_OK);
        EXPECT_EQ(std::string(all.text), words[size_t(i)]["word"].get<std::string>());
        EXPECT_EQ(all.t0_ms, words[size_t(i)]["start_offset"].get<int64_t>() * 80);
        EXPECT_EQ(all.t1_ms, words[size_t(i)]["end_offset"].get<int64_t>() * 80);
        EXPECT_STREQ(all.text, seg.text);
    }
    transcribe_word w;
    EXPECT_EQ(transcribe_get_word(r, -1, int(words.size()), &w), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(transcribe_get_word(r, 1, 0, &w), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(transcribe_result_n_words(r, 7), 0);
    EXPECT_EQ(transcribe_result_n_words(nullptr, -1), 0);
    transcribe_result_free(r);
    transcribe_session_free(s);
    transcribe_model_free(model);
}

TEST_F(Api, Batch_equals_serial) {
    transcribe_session * s = session();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 16;
    std::vector<transcribe_result *> serial;
    for (const auto & a : audio_) {
        transcribe_result * r = nullptr;
        const transcribe_status st = transcribe_run(s, a.data(), a.size(), &rp, &r);
        EXPECT_TRUE(st == TRANSCRIBE_OK || st == TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
        serial.push_back(r);
    }
    std::vector<const float *> pcm;
    std::vector<size_t> n;
    for (const auto & a : audio_) {
        pcm.push_back(a.data());
        n.push_back(a.size());
    }
    std::vector<transcribe_result *> batch(audio_.size());
    std::vector<transcribe_status> statuses(audio_.size());
    transcribe_run_batch(s, pcm.data(), n.data(), int(n.size()), &rp, batch.data(), statuses.data());
    for (size_t i = 0; i < audio_.size(); ++i) {
        ASSERT_NE(batch[i], nullptr);
        SCOPED_TRACE(test::kClips[i]);
        expect_same_transcript(batch[i], serial[i]); // segment times too: silence trimmed alike
        const auto golden = test::golden_ids(test::kClips[i]);
        EXPECT_EQ(tokens(batch[i]), std::vector<int32_t>(golden.begin(), golden.begin() + long(tokens(batch[i]).size())));
    }
    // jfk.wav opens with silence: its one segment starts where the speech does, batched or not.
    ASSERT_EQ(transcribe_result_n_segments(batch[0]), 1);
    EXPECT_GT(transcribe_result_segment_t0_ms(batch[0], 0), 0);
    EXPECT_LE(transcribe_result_segment_t1_ms(batch[0], 0), int64_t(audio_[0].size() / 16));
    for (size_t i = 0; i < audio_.size(); ++i) {
        transcribe_result_free(batch[i]);
        transcribe_result_free(serial[i]);
    }
    transcribe_session_free(s);
}

// One session reused for inputs of growing length: its cached graphs must be re-allocated each time
// (regression: stale addresses after the compute buffer grew crashed the second run).
TEST_F(Api, Reused_session_with_growing_inputs_matches_goldens) {
    transcribe_session * s = session();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 16;
    for (int i : {1, 2, 3, 0, 1}) {
        transcribe_result * r = nullptr;
        transcribe_run(s, audio_[size_t(i)].data(), audio_[size_t(i)].size(), &rp, &r);
        ASSERT_NE(r, nullptr);
        const auto golden = test::golden_ids(test::kClips[i]);
        const auto got = tokens(r);
        EXPECT_EQ(got, std::vector<int32_t>(golden.begin(), golden.begin() + long(got.size()))) << test::kClips[i];
        transcribe_result_free(r);
    }
    transcribe_session_free(s);
}

TEST_F(Api, Budget_exhaustion_is_reported_with_partial_text) {
    transcribe_session * s = session();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 4;
    transcribe_result * r = nullptr;
    ASSERT_EQ(transcribe_run(s, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(transcribe_result_truncated(r));
    const auto want = test::golden_ids("jfk");
    EXPECT_EQ(tokens(r), std::vector<int32_t>(want.begin(), want.begin() + 4));
    EXPECT_GT(std::strlen(transcribe_result_text(r)), 0u);
    ASSERT_EQ(transcribe_result_n_segments(r), 1);
    EXPECT_TRUE(transcribe_result_segment_truncated(r, 0));
    EXPECT_EQ(transcribe_result_segment_n_tokens(r, 0), 4);
    // Times are trimmed to the speech inside the 11 s clip.
    EXPECT_GE(transcribe_result_segment_t0_ms(r, 0), 0);
    EXPECT_LT(transcribe_result_segment_t0_ms(r, 0), 500);
    EXPECT_GT(transcribe_result_segment_t1_ms(r, 0), 10000);
    EXPECT_LE(transcribe_result_segment_t1_ms(r, 0), 11000);
    transcribe_result_free(r);
    transcribe_session_free(s);
}

TEST_F(Api, Input_too_long_for_context_fails_before_compute) {
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_ctx = 160; // jfk needs 152 prompt positions + the budget
    transcribe_session * s = session(sp);
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 16;
    transcribe_result * r = nullptr;
    EXPECT_EQ(transcribe_run(s, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_INPUT_TOO_LONG);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(transcribe_last_error()).find("152"), std::string::npos) << transcribe_last_error();
    transcribe_timings t;
    transcribe_session_get_timings(s, &t);
    EXPECT_EQ(t.mel_ms, 0.0);
    rp.max_new_tokens = 8; // 152 + 8 fits
    EXPECT_EQ(transcribe_run(s, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    transcribe_result_free(r);
    transcribe_session_free(s);
}

namespace {
struct AbortAfter {
    int polls_left;
};
bool abort_after(void * user) { return --static_cast<AbortAfter *>(user)->polls_left < 0; }
void record_progress(float f, void * user) { static_cast<std::vector<float> *>(user)->push_back(f); }
} // namespace

TEST_F(Api, Abort_callback_stops_the_run) {
    for (int polls : {0, 2, 6}) {
        AbortAfter state {polls};
        transcribe_session_params sp = transcribe_session_params_init();
        sp.abort_callback  = abort_after;
        sp.abort_user_data = &state;
        transcribe_session * s = session(sp);
        transcribe_result * r = nullptr;
        EXPECT_EQ(transcribe_run(s, audio_[0].data(), audio_[0].size(), nullptr, &r), TRANSCRIBE_ERR_ABORTED) << polls;
        EXPECT_EQ(r, nullptr);
        transcribe_session_free(s);
    }
}

TEST_F(Api, Progress_is_monotone_and_reaches_one) {
    std::vector<float> seen;
    transcribe_session_params sp = transcribe_session_params_init();
    sp.progress_callback  = record_progress;
    sp.progress_user_data = &seen;
    transcribe_session * s = session(sp);
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 8;
    transcribe_result * r = nullptr;
    transcribe_run(s, audio_[1].data(), audio_[1].size(), &rp, &r);
    ASSERT_GE(seen.size(), 5u);
    EXPECT_EQ(seen.front(), 0.0f);
    EXPECT_EQ(seen.back(), 1.0f);
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    transcribe_result_free(r);
    transcribe_session_free(s);
}

TEST_F(Api, Weights_used_from_the_mapped_file_give_the_same_result) {
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend  = TRANSCRIBE_BACKEND_CPU;
    lp.use_mmap = true; // the suite's default is the private copy
    transcribe_model * m = nullptr;
    ASSERT_EQ(transcribe_model_load(test::model("canary-qwen-tiny-f32.gguf").c_str(), &lp, &m), TRANSCRIBE_OK);
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 2;
    sp.kv_type   = TRANSCRIBE_KV_F32;
    transcribe_session * s = nullptr;
    ASSERT_EQ(transcribe_session_create(m, &sp, &s), TRANSCRIBE_OK);
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 16;
    transcribe_result * r = nullptr;
    transcribe_run(s, audio_[2].data(), audio_[2].size(), &rp, &r);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(tokens(r), test::golden_ids("jfk_div8"));
    transcribe_result_free(r);
    transcribe_session_free(s);
    transcribe_model_free(m);
}

TEST_F(Api, Timings_are_filled) {
    transcribe_session * s = session();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 4;
    transcribe_result * r = nullptr;
    transcribe_run(s, audio_[0].data(), audio_[0].size(), &rp, &r);
    transcribe_timings t;
    ASSERT_EQ(transcribe_session_get_timings(s, &t), TRANSCRIBE_OK);
    EXPECT_GT(t.mel_ms, 0);
    EXPECT_GT(t.encode_ms, 0);
    EXPECT_GT(t.prefill_ms, 0);
    EXPECT_EQ(t.n_prefill_tokens, 152);
    EXPECT_GE(t.n_decode_tokens, 3);
    transcribe_result_free(r);
    transcribe_session_free(s);
}

TEST_F(Api, Tokenize_and_detokenize) {
    int32_t ids[16];
    int n = 0;
    ASSERT_EQ(transcribe_tokenize(model_, "user\nTranscribe the following: ", ids, 16, &n), TRANSCRIBE_OK);
    EXPECT_EQ(std::vector<int32_t>(ids, ids + n), (std::vector<int32_t> {872, 198, 3167, 3114, 279, 2701, 25, 220}));
    EXPECT_EQ(transcribe_tokenize(model_, "user\nTranscribe the following: ", ids, 2, &n), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(n, 8);
    char buf[64];
    size_t len = 0;
    const int32_t with_special[] = {151644, 872, 198, 3167, 151645};
    ASSERT_EQ(transcribe_detokenize(model_, with_special, 5, buf, sizeof buf, &len), TRANSCRIBE_OK);
    EXPECT_STREQ(buf, "<|im_start|>user\nTrans");
    EXPECT_EQ(transcribe_detokenize(model_, with_special, 5, buf, 4, &len), TRANSCRIBE_ERR_INVALID_ARG);
}

TEST_F(Api, Null_and_invalid_arguments_are_rejected) {
    transcribe_model * m = nullptr;
    EXPECT_EQ(transcribe_model_load(nullptr, nullptr, &m), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(transcribe_model_load("x", nullptr, nullptr), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(transcribe_session_create(nullptr, nullptr, nullptr), TRANSCRIBE_ERR_INVALID_ARG);
    transcribe_backend b;
    EXPECT_EQ(transcribe_backend_from_name("quantum", &b), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(transcribe_backend_from_name("CPU", &b), TRANSCRIBE_OK);
    EXPECT_EQ(b, TRANSCRIBE_BACKEND_CPU);
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend = TRANSCRIBE_BACKEND_METAL;
    EXPECT_EQ(transcribe_model_load(test::model("canary-qwen-tiny-f32.gguf").c_str(), &lp, &m), TRANSCRIBE_ERR_BACKEND);
    EXPECT_STREQ(transcribe_status_string(TRANSCRIBE_ERR_OUTPUT_TRUNCATED), "OUTPUT_TRUNCATED");
    EXPECT_EQ(transcribe_result_text(nullptr), std::string());
}

// TRANSCRIBE_PROFILE=FILE: a session run node by node writes its per-op table on ending, and gives
// the same tokens as one run unprofiled.
TEST_F(Api, Profile_env_writes_an_op_table_and_changes_nothing) {
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 8; // a budget the fixture clip overruns: the run ends TRUNCATED with its tokens
    transcribe_session * plain = session();
    transcribe_result * r = nullptr;
    ASSERT_EQ(transcribe_run(plain, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    const std::vector<int32_t> expected = tokens(r);
    transcribe_result_free(r);
    transcribe_session_free(plain);

    const std::string path = ::testing::TempDir() + "transcribe-profile.txt";
    std::remove(path.c_str());
    setenv("TRANSCRIBE_PROFILE", path.c_str(), 1);
    transcribe_session * profiled = session();
    unsetenv("TRANSCRIBE_PROFILE");
    ASSERT_EQ(transcribe_run(profiled, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    EXPECT_EQ(tokens(r).size(), 8u);
    EXPECT_EQ(tokens(r), expected);
    transcribe_result_free(r);
    transcribe_session_free(profiled);

    std::FILE * f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << path;
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
        text.append(buf, n);
    }
    std::fclose(f);
    for (const char * want : {"profile: encoder", "profile: prefill", "profile: decode", "MUL_MAT f32", "CUSTOM decode_attention", "GFLOP/s"}) {
        EXPECT_NE(text.find(want), std::string::npos) << want << " missing from\n" << text;
    }
}

// ---- The shared session: concurrent callers decoded together ----

namespace {
struct StopAfter {
    std::atomic<int> polls {0};
    int              limit = 0;
};
bool stop_after(void * user) {
    auto * s = static_cast<StopAfter *>(user);
    return ++s->polls > s->limit;
}
} // namespace

// Six threads (each clip, jfk twice more with other budgets) through one batcher of a session decoding 4
// sequences: each gets what the clip alone gives (its golden ids), whatever joined the steps beside it;
// a seventh caller whose own abort fires after a few polls ends alone with ABORTED.
TEST_F(Api, Batcher_runs_concurrent_callers_together_with_their_own_results) {
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_batch = 4;
    transcribe_session * s = session(sp);
    ASSERT_EQ(transcribe_session_batch_size(s), 4);
    transcribe_batcher * b = nullptr;
    ASSERT_EQ(transcribe_batcher_create(s, &b), TRANSCRIBE_OK);
    const int clips[]   = {0, 1, 2, 3, 0, 0};
    const int budgets[] = {16, 16, 16, 16, 5, 11};
    std::vector<std::vector<int32_t>> got(6);
    std::vector<transcribe_status>    status(6);
    std::vector<std::thread>          threads;
    for (int i = 0; i < 6; ++i) {
        threads.emplace_back([&, i] {
            transcribe_run_params rp = transcribe_run_params_init();
            rp.max_new_tokens = budgets[i];
            rp.ignore_eos     = true;
            transcribe_result * r = nullptr;
            const auto & pcm = audio_[size_t(clips[i])];
            status[size_t(i)] = transcribe_batcher_run(b, pcm.data(), pcm.size(), &rp, &r);
            got[size_t(i)]    = r ? tokens(r) : std::vector<int32_t> {};
            transcribe_result_free(r);
        });
    }
    StopAfter stop;
    stop.limit = 3;
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens  = 16;
    rp.ignore_eos      = true;
    rp.abort_callback  = stop_after;
    rp.abort_user_data = &stop;
    transcribe_result * cancelled = nullptr;
    EXPECT_EQ(transcribe_batcher_run(b, audio_[0].data(), audio_[0].size(), &rp, &cancelled), TRANSCRIBE_ERR_ABORTED);
    EXPECT_EQ(cancelled, nullptr);
    for (std::thread & t : threads) {
        t.join();
    }
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(status[size_t(i)], TRANSCRIBE_OK) << i;
        const auto golden = test::golden_ids(test::kClips[clips[i]]);
        EXPECT_EQ(got[size_t(i)], std::vector<int32_t>(golden.begin(), golden.begin() + budgets[i])) << i;
    }
    transcribe_batcher_free(b);
    transcribe_session_free(s);
}

// A long recording (four copies of jfk, cut into 12 s pieces) through the batcher equals transcribe_run
// on it, piece texts and times included; a streaming caller's tokens arrive in order and spell its text.
TEST_F(Api, Batcher_long_audio_and_streaming_equal_a_plain_run) {
    const std::vector<float> four = four_jfk();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 12;
    rp.chunk_ms       = 12000;
    transcribe_session * plain = session();
    transcribe_result * want = nullptr;
    ASSERT_EQ(transcribe_run(plain, four.data(), four.size(), &rp, &want), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    ASSERT_GE(transcribe_result_n_segments(want), 4);

    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_batch = 3;
    transcribe_session * s = session(sp);
    transcribe_batcher * b = nullptr;
    ASSERT_EQ(transcribe_batcher_create(s, &b), TRANSCRIBE_OK);
    transcribe_result * got = nullptr;
    ASSERT_EQ(transcribe_batcher_run(b, four.data(), four.size(), &rp, &got), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    expect_same_transcript(got, want);
    std::vector<int32_t> streamed;
    rp.token_callback  = [](int32_t id, const char *, size_t, void * user) { static_cast<std::vector<int32_t> *>(user)->push_back(id); };
    rp.token_user_data = &streamed;
    transcribe_result * st = nullptr;
    ASSERT_EQ(transcribe_batcher_run(b, four.data(), four.size(), &rp, &st), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    EXPECT_EQ(streamed, tokens(want));
    transcribe_result_free(st);
    transcribe_result_free(got);
    transcribe_result_free(want);
    transcribe_batcher_free(b);
    transcribe_session_free(s);
    transcribe_session_free(plain);
}

// ---- Speculative decoding through the C API ----

// A long recording (four copies of jfk in 12 s pieces): with a draft (the plain run's own ids, so right
// for the first piece and shifted for the others; and the Parakeet fixture model's transcripts, each
// piece its own), the ids, texts and segments are the plain run's; the timings count the drafts.
TEST_F(Api, Drafted_runs_equal_a_plain_run_with_every_draft) {
    const std::vector<float> four = four_jfk();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = 12;
    rp.chunk_ms       = 12000;
    transcribe_session * s = session();
    transcribe_result * want = nullptr;
    ASSERT_EQ(transcribe_run(s, four.data(), four.size(), &rp, &want), TRANSCRIBE_ERR_OUTPUT_TRUNCATED);
    ASSERT_GE(transcribe_result_n_segments(want), 4);
    const std::vector<int32_t> own = tokens(want);

    transcribe_model * parakeet = load_cpu("parakeet-tdt-tiny-f32.gguf");
    for (int kind = 0; kind < 2; ++kind) {
        transcribe_run_params drafted = rp;
        if (kind == 0) {
            drafted.draft_ids   = own.data();
            drafted.n_draft_ids = int(own.size());
        } else {
            drafted.draft = parakeet;
        }
        transcribe_result * got = nullptr;
        ASSERT_EQ(transcribe_run(s, four.data(), four.size(), &drafted, &got), TRANSCRIBE_ERR_OUTPUT_TRUNCATED) << kind;
        SCOPED_TRACE(kind == 0 ? "draft ids" : "draft model");
        expect_same_transcript(got, want);
        transcribe_timings t;
        ASSERT_EQ(transcribe_session_get_timings(s, &t), TRANSCRIBE_OK);
        EXPECT_LE(t.n_accepted_tokens, t.n_drafted_tokens) << kind;
        EXPECT_LE(t.n_decode_steps, t.n_decode_tokens) << kind;
        if (kind == 0) {
            EXPECT_GT(t.n_accepted_tokens, 0); // the first piece's draft is its own ids
            EXPECT_LT(t.n_decode_steps, t.n_decode_tokens);
        } else {
            EXPECT_GT(t.draft_ms, 0.0); // the Parakeet model ran on each piece
        }
        transcribe_result_free(got);
    }
    transcribe_model_free(parakeet);
    transcribe_result_free(want);
    transcribe_session_free(s);
}

// Callers with and without drafts share the batcher's steps; each gets its own ids.
TEST_F(Api, Batcher_mixes_drafted_and_plain_callers) {
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_batch = 3;
    transcribe_session * s = session(sp);
    transcribe_batcher * b = nullptr;
    ASSERT_EQ(transcribe_batcher_create(s, &b), TRANSCRIBE_OK);
    transcribe_model * parakeet = load_cpu("parakeet-tdt-tiny-f32.gguf");
    std::vector<std::vector<int32_t>> golden, got(4);
    for (const char * c : test::kClips) {
        golden.push_back(test::golden_ids(c));
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            transcribe_run_params rp = transcribe_run_params_init();
            rp.max_new_tokens = 16;
            rp.ignore_eos     = true;
            if (i == 0) {
                rp.draft_ids   = golden[0].data();
                rp.n_draft_ids = int(golden[0].size());
            } else if (i == 2) {
                rp.draft = parakeet;
            }
            transcribe_result * r = nullptr;
            const auto & pcm = audio_[size_t(i)];
            EXPECT_EQ(transcribe_batcher_run(b, pcm.data(), pcm.size(), &rp, &r), TRANSCRIBE_OK) << i;
            got[size_t(i)] = r ? tokens(r) : std::vector<int32_t> {};
            transcribe_result_free(r);
        });
    }
    for (std::thread & t : threads) {
        t.join();
    }
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(got[size_t(i)], golden[size_t(i)]) << test::kClips[i];
    }
    transcribe_batcher_free(b);
    transcribe_model_free(parakeet);
    transcribe_session_free(s);
}

TEST_F(Api, A_draft_for_a_model_that_cannot_use_one_is_refused) {
    transcribe_model_info info;
    ASSERT_EQ(transcribe_model_get_info(model_, &info), TRANSCRIBE_OK);
    EXPECT_TRUE(info.speculative);
    transcribe_model * parakeet = load_cpu("parakeet-tdt-tiny-f32.gguf");
    ASSERT_EQ(transcribe_model_get_info(parakeet, &info), TRANSCRIBE_OK);
    EXPECT_FALSE(info.speculative);
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 2;
    transcribe_session * s = nullptr;
    ASSERT_EQ(transcribe_session_create(parakeet, &sp, &s), TRANSCRIBE_OK);
    transcribe_run_params rp = transcribe_run_params_init();
    rp.draft = model_;
    transcribe_result * r = nullptr;
    EXPECT_EQ(transcribe_run(s, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(transcribe_last_error()).find("does not decode with a draft"), std::string::npos)
        << transcribe_last_error();
    transcribe_session_free(s);
    transcribe_model_free(parakeet);

    transcribe_session * own = session();
    rp = transcribe_run_params_init();
    rp.n_draft_ids = -1;
    EXPECT_EQ(transcribe_run(own, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_INVALID_ARG);
    rp.n_draft_ids = 3; // and no ids
    EXPECT_EQ(transcribe_run(own, audio_[0].data(), audio_[0].size(), &rp, &r), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(r, nullptr);
    transcribe_session_free(own);
}
