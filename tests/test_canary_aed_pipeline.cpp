// Canary AED through the recording pipeline as Canary-Qwen goes through it (tests/test_api.cpp): a long
// recording cut into pieces, those pieces decoded together by the batcher (the same transcript), several
// recordings in one batch (each one's ids and text alone), a speech detector cutting at speech.
#include "c_api_support.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using test::expect_same_transcript;
using test::load_cpu;
using test::tokens;

namespace {

transcribe_session * session(transcribe_model * m, int n_batch = 1) {
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 2;
    sp.kv_type   = TRANSCRIBE_KV_F32;
    sp.n_batch   = n_batch;
    transcribe_session * s = nullptr;
    EXPECT_EQ(transcribe_session_create(m, &sp, &s), TRANSCRIBE_OK);
    return s;
}

bool finished(transcribe_status st) { return st == TRANSCRIBE_OK || st == TRANSCRIBE_ERR_OUTPUT_TRUNCATED; }

} // namespace

TEST(CanaryAedPipeline, Long_audio_batching_and_a_speech_detector_work_as_for_canary_qwen) {
    transcribe_model * model = load_cpu("canary-aed-tiny-f32.gguf");
    ASSERT_NE(model, nullptr);
    const std::vector<float> jfk = test::canary_aed_fixture().wav_16k("jfk");
    std::vector<float> four;
    for (int i = 0; i < 4; ++i) {
        four.insert(four.end(), jfk.begin(), jfk.end());
    }
    transcribe_run_params rp = transcribe_run_params_init();
    rp.language       = "en";
    rp.max_new_tokens = 10;
    rp.chunk_ms       = 12000;

    // Long audio: 44 s in pieces of at most 12 s, a segment each, in order inside the recording.
    transcribe_session * plain = session(model);
    transcribe_result * want = nullptr;
    ASSERT_TRUE(finished(transcribe_run(plain, four.data(), four.size(), &rp, &want))) << transcribe_last_error();
    ASSERT_GE(transcribe_result_n_segments(want), 4);
    int64_t last_end = 0;
    for (int i = 0; i < transcribe_result_n_segments(want); ++i) {
        EXPECT_GE(transcribe_result_segment_t0_ms(want, i), last_end) << i;
        EXPECT_LE(transcribe_result_segment_t1_ms(want, i) - transcribe_result_segment_t0_ms(want, i), 12000) << i;
        last_end = transcribe_result_segment_t1_ms(want, i);
    }
    EXPECT_LE(last_end, 44100);

    // The same pieces decoded together (continuous batching, 3 sequences a step): the same transcript.
    transcribe_session * batched = session(model, 3);
    transcribe_batcher * b = nullptr;
    ASSERT_EQ(transcribe_batcher_create(batched, &b), TRANSCRIBE_OK);
    transcribe_result * got = nullptr;
    ASSERT_TRUE(finished(transcribe_batcher_run(b, four.data(), four.size(), &rp, &got))) << transcribe_last_error();
    expect_same_transcript(got, want);
    transcribe_result_free(got);
    transcribe_batcher_free(b);

    // Three recordings in one batch: each what a run of its own gives.
    const std::vector<float> div8 = test::canary_aed_fixture().wav_16k("jfk_div8"),
                             tone = test::canary_aed_fixture().wav_16k("tone_noise_3s");
    const float * pcm[] = {jfk.data(), div8.data(), tone.data()};
    const size_t  n[]   = {jfk.size(), div8.size(), tone.size()};
    transcribe_result * together[3] = {};
    transcribe_status   statuses[3];
    rp.chunk_ms = 0;
    transcribe_run_batch(batched, pcm, n, 3, &rp, together, statuses);
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(finished(statuses[i])) << i;
        transcribe_result * alone = nullptr;
        ASSERT_TRUE(finished(transcribe_run(plain, pcm[i], n[i], &rp, &alone)));
        SCOPED_TRACE(i);
        expect_same_transcript(together[i], alone);
        transcribe_result_free(alone);
        transcribe_result_free(together[i]);
    }

    // A speech detector (Silero VAD) cuts the recording at speech instead: each segment is one of the
    // stretches of speech it finds (random weights leave most pieces without text, and those without
    // text leave no segment).
    transcribe_vad_model * vad = nullptr;
    ASSERT_EQ(transcribe_vad_model_load(test::model("silero-vad-v5.gguf").c_str(), &vad), TRANSCRIBE_OK);
    transcribe_vad_session * vs = nullptr;
    ASSERT_EQ(transcribe_vad_session_create(vad, 2, &vs), TRANSCRIBE_OK);
    transcribe_vad_result * speech = nullptr;
    ASSERT_EQ(transcribe_vad_detect(vs, four.data(), four.size(), 16000, nullptr, &speech), TRANSCRIBE_OK);
    ASSERT_GE(transcribe_vad_result_n_segments(speech), 8);
    rp.vad = vad;
    transcribe_result * cut = nullptr;
    ASSERT_TRUE(finished(transcribe_run(plain, four.data(), four.size(), &rp, &cut))) << transcribe_last_error();
    ASSERT_GE(transcribe_result_n_segments(cut), 1);
    for (int i = 0; i < transcribe_result_n_segments(cut); ++i) {
        bool is_speech = false;
        for (int k = 0; k < transcribe_vad_result_n_segments(speech); ++k) {
            is_speech = is_speech || (transcribe_result_segment_t0_ms(cut, i) == transcribe_vad_result_segment_begin(speech, k) / 16 &&
                                      transcribe_result_segment_t1_ms(cut, i) == transcribe_vad_result_segment_end(speech, k) / 16);
        }
        EXPECT_TRUE(is_speech) << "segment " << i << ": " << transcribe_result_segment_t0_ms(cut, i) << "-"
                               << transcribe_result_segment_t1_ms(cut, i) << " ms";
    }
    transcribe_result_free(cut);
    transcribe_vad_result_free(speech);
    transcribe_vad_session_free(vs);
    transcribe_vad_model_free(vad);

    transcribe_result_free(want);
    transcribe_session_free(batched);
    transcribe_session_free(plain);
    transcribe_model_free(model);
}
