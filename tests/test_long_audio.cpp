// Long audio: cut points at pauses, silence trimming, and the joined transcript of many pieces.
#include "engine/long_audio.h"
#include "support.h"

#include "ggml-backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace transcribe;

namespace {

constexpr int kRate = 16000;

// "Words": 1.5 s noise bursts separated by 80 ms gaps, with one 300 ms pause at `pause_at` seconds.
std::vector<float> speech_like(double seconds, double pause_at) {
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.2f);
    std::vector<float> x(size_t(seconds * kRate), 0.0f);
    for (size_t i = 0; i < x.size(); ++i) {
        const double t = double(i) / kRate;
        const bool gap   = std::fmod(t, 1.58) > 1.5;
        const bool pause = t >= pause_at && t < pause_at + 0.3;
        // Short gaps are not silent (breath, room noise): only the pause is.
        x[i] = pause ? 0.0005f * noise(rng) : (gap ? 0.02f : 1.0f) * noise(rng);
    }
    return x;
}

} // namespace

TEST(LongAudio, Cuts_inside_the_pause_in_the_last_quarter) {
    const auto x = speech_like(60.0, 33.0); // window 40 s: last quarter is 30..40 s
    const auto pieces = split_at_pauses(x.data(), x.size(), kRate, size_t(40 * kRate));
    ASSERT_EQ(pieces.size(), 2u);
    const double cut = double(pieces[0].end) / kRate;
    EXPECT_GT(cut, 33.0);
    EXPECT_LT(cut, 33.3);
    EXPECT_EQ(pieces[0].begin, 0u);
    EXPECT_EQ(pieces[1].begin, pieces[0].end);
    EXPECT_EQ(pieces[1].end, x.size());
}

TEST(LongAudio, Pieces_cover_everything_and_never_exceed_the_window) {
    const auto x = speech_like(30 * 60.0, 1e9); // 30 minutes, no long pause at all
    const size_t window = size_t(40 * kRate);
    const auto pieces = split_at_pauses(x.data(), x.size(), kRate, window);
    EXPECT_GE(pieces.size(), 45u);
    size_t at = 0;
    for (const auto & p : pieces) {
        EXPECT_EQ(p.begin, at);
        EXPECT_GT(p.end, p.begin);
        EXPECT_LE(p.end - p.begin, window);
        at = p.end;
    }
    EXPECT_EQ(at, x.size());
    for (size_t i = 0; i + 1 < pieces.size(); ++i) {
        EXPECT_GE(pieces[i].end - pieces[i].begin, window * 3 / 4);
    }
}

TEST(LongAudio, Short_audio_is_one_piece) {
    const auto x = speech_like(12.0, 5.0);
    const auto pieces = split_at_pauses(x.data(), x.size(), kRate, size_t(40 * kRate));
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_EQ(pieces[0].end, x.size());
}

TEST(LongAudio, Trim_silence_finds_the_speech) {
    std::vector<float> x(size_t(5 * kRate), 0.0f);
    for (size_t i = size_t(1.2 * kRate); i < size_t(3.7 * kRate); ++i) {
        x[i] = 0.3f * std::sin(0.05f * float(i));
    }
    const AudioSpan s = trim_silence(x.data(), {0, x.size()}, kRate);
    EXPECT_NEAR(double(s.begin) / kRate, 1.2, 0.011);
    EXPECT_NEAR(double(s.end) / kRate, 3.7, 0.011);
    const std::vector<float> quiet(1600, 0.0f);
    const AudioSpan q = trim_silence(quiet.data(), {0, quiet.size()}, kRate);
    EXPECT_EQ(q.begin, q.end);
}

TEST(LongAudio, Pieces_are_transcribed_and_joined_with_times) {
    auto model = test::load("canary-qwen-tiny-f32.gguf");
    SessionOptions so;
    so.n_threads = 2;
    auto session = model->new_session(so);
    // jfk (11 s) + 2 s silence + jfk_0p7s, cut with a 12 s window: two pieces, the cut in the silence.
    std::vector<float> x = test::read_wav_16k("jfk");
    x.resize(x.size() + 2 * kRate, 0.0f);
    const auto tail = test::read_wav_16k("jfk_0p7s");
    x.insert(x.end(), tail.begin(), tail.end());
    RunOptions ro;
    ro.max_new_tokens = 16;
    const Transcript t = transcribe_pieces(*session, x.data(), x.size(), kRate, size_t(12 * kRate), ro);
    ASSERT_EQ(t.segments.size(), 2u);
    EXPECT_LE(t.segments[0].t1_ms, 11000);
    EXPECT_GE(t.segments[1].t0_ms, 13000); // leading silence trimmed
    EXPECT_LE(t.segments[1].t1_ms, 13700);
    EXPECT_LT(t.segments[0].t1_ms, t.segments[1].t0_ms);
    EXPECT_TRUE(t.truncated);
    EXPECT_EQ(t.tokens.size(), t.segments[0].tokens.size() + t.segments[1].tokens.size());
    EXPECT_EQ(session->timings().n_decode_tokens, 2 * 16);
    EXPECT_EQ(t.segments[0].tokens.size(), 16u);
    EXPECT_FALSE(t.segments[0].text.empty());
}

namespace {

// A model that gives word times: one word per second of the audio it hears, [k s, k s + 0.5 s).
class TimedWordsSession final : public Session {
public:
    Transcript run(const float *, size_t n, const RunOptions &) override {
        Transcript t;
        t.timed = true;
        Segment seg;
        for (int64_t k = 0; k * kRate < int64_t(n); ++k) {
            seg.words.push_back({"w" + std::to_string(k), k * 1000, k * 1000 + 500});
        }
        seg.t0_ms = 0;
        seg.t1_ms = seg.words.back().t1_ms;
        t.segments.push_back(seg);
        return t;
    }
};

} // namespace

TEST(LongAudio, Speech_pieces_map_word_times_back_through_their_regions) {
    // Regions [1 s, 3 s) and [10 s, 12.2 s) heard back to back (4.2 s): the words at 0-3 s of the piece
    // lie in the first region, from 2 s on in the second, shifted by where each region starts.
    std::vector<float> x(size_t(15 * kRate), 0.0f);
    TimedWordsSession session;
    const std::vector<SpeechPiece> pieces = {{{{size_t(1 * kRate), size_t(3 * kRate)}, {size_t(10 * kRate), size_t(12.2 * kRate)}}}};
    auto model = test::load("parakeet-tdt-tiny-f32.gguf"); // its tokenizer: timed pieces never need it
    const Transcript t = transcribe_speech(session, model->tokenizer(), x.data(), pieces, kRate, RunOptions {});
    ASSERT_EQ(t.words.size(), 5u);
    const int64_t want[5][2] = {{1000, 1500}, {2000, 2500}, {10000, 10500}, {11000, 11500}, {12000, 12200}};
    for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(t.words[k].t0_ms, want[k][0]) << k;
        EXPECT_EQ(t.words[k].t1_ms, want[k][1]) << k;
    }
    ASSERT_EQ(t.segments.size(), 1u);
    EXPECT_EQ(t.segments[0].t0_ms, 1000);
    EXPECT_EQ(t.segments[0].t1_ms, 12200);
}
