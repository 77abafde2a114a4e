// Speaker turns for models without word times: the turn rule by hand, and a recording transcribed turn
// by turn through the pipeline (each turn's text is the model's transcript of that turn's audio alone).
#include "engine/pipeline.h"
#include "engine/speaker_turns.h"
#include "support.h"

#include <gtest/gtest.h>

using namespace transcribe;

namespace {
constexpr int    kRate = 16000;
constexpr size_t at(double seconds) { return size_t(seconds * kRate); }
} // namespace

TEST(SpeakerTurns, Takeovers_backchannels_and_same_speaker_runs_by_hand) {
    // spk0 [0.2, 0.5] and [1, 4] run together; spk1 starts at 3.5 inside it and outlasts it: it takes over
    // at 3.5; spk0 [4.5, 5] lies inside spk1's turn (absorbed); spk1 [6.5, 7] continues spk1's turn; spk2
    // [8, 9]. Tiled over 10 s: spk0 [0, 3.5), spk1 [3.5, 8), spk2 [8, 10].
    const std::vector<SpeakerSegment> segs = {{1.0, 4.0, 0}, {3.5, 6.0, 1}, {4.5, 5.0, 0}, {6.5, 7.0, 1},
                                              {8.0, 9.0, 2}, {0.2, 0.5, 0}};
    const std::vector<SpeakerTurn> turns = speaker_turns(segs, at(10), kRate);
    ASSERT_EQ(turns.size(), 3u);
    EXPECT_EQ(turns[0].span.begin, 0u);
    EXPECT_EQ(turns[0].span.end, at(3.5));
    EXPECT_EQ(turns[0].speaker, 0);
    EXPECT_EQ(turns[1].span.begin, at(3.5));
    EXPECT_EQ(turns[1].span.end, at(8.0));
    EXPECT_EQ(turns[1].speaker, 1);
    EXPECT_EQ(turns[2].span.begin, at(8.0));
    EXPECT_EQ(turns[2].span.end, at(10));
    EXPECT_EQ(turns[2].speaker, 2);
}

TEST(SpeakerTurns, A_turn_taken_over_at_its_start_disappears_and_no_speech_is_one_unknown_turn) {
    // Same start: the segment listed first opens the turn, the longer other one takes it over at once.
    std::vector<SpeakerTurn> turns = speaker_turns({{1.0, 2.0, 0}, {1.0, 3.0, 1}}, at(5), kRate);
    ASSERT_EQ(turns.size(), 1u);
    EXPECT_EQ(turns[0].speaker, 1);
    EXPECT_EQ(turns[0].span.begin, 0u);
    EXPECT_EQ(turns[0].span.end, at(5));
    turns = speaker_turns({}, at(5), kRate);
    ASSERT_EQ(turns.size(), 1u);
    EXPECT_EQ(turns[0].speaker, -1);
    EXPECT_EQ(turns[0].span.end, at(5));
    // Segments past the audio are clipped to it; empty ones are skipped.
    turns = speaker_turns({{4.0, 9.0, 3}, {2.0, 2.0, 1}}, at(5), kRate);
    ASSERT_EQ(turns.size(), 1u);
    EXPECT_EQ(turns[0].speaker, 3);
}

TEST(SpeakerTurns, Clipping_regions_and_labelling_segments_by_their_midpoint) {
    const std::vector<AudioSpan> regions = {{0, 100}, {150, 300}, {400, 500}};
    const std::vector<AudioSpan> clipped = clip_to(regions, {50, 420});
    ASSERT_EQ(clipped.size(), 3u);
    EXPECT_EQ(clipped[0].begin, 50u);
    EXPECT_EQ(clipped[0].end, 100u);
    EXPECT_EQ(clipped[1].begin, 150u);
    EXPECT_EQ(clipped[2].end, 420u);

    const std::vector<SpeakerTurn> turns = {{{0, at(2)}, 1}, {{at(2), at(6)}, 0}};
    Transcript t;
    t.segments.push_back({0, 1500, "a", {}, {{"a", 100, 400}}});
    t.segments.push_back({1500, 3000, "b", {}, {{"b", 1600, 2900}}}); // midpoint 2.25 s: the second turn
    t.segments.push_back({5000, 7000, "c"});                          // past the last turn's end: the last
    t.words = {{"a", 100, 400}, {"b", 1600, 2900}};
    label_speakers(t, turns, kRate);
    EXPECT_EQ(t.segments[0].speaker, 1);
    EXPECT_EQ(t.segments[1].speaker, 0);
    EXPECT_EQ(t.segments[2].speaker, 0);
    EXPECT_EQ(t.segments[0].words[0].speaker, 1);
    EXPECT_EQ(t.words[1].speaker, 0);
}

TEST(SpeakerTurns, A_model_without_word_times_transcribes_each_turn_alone) {
    auto model = test::load("canary-qwen-tiny-f32.gguf");
    SessionOptions so;
    so.n_threads = 2;
    // jfk (11 s), 2 s of silence, jfk_0p7s: speaker 1 from 0.5 s to 10.5 s, speaker 0 from 13 s.
    std::vector<float> x = test::read_wav_16k("jfk");
    x.resize(x.size() + 2 * kRate, 0.0f);
    const std::vector<float> tail = test::read_wav_16k("jfk_0p7s");
    x.insert(x.end(), tail.begin(), tail.end());
    RecordingRequest req;
    req.options.max_new_tokens = 12;
    req.diarize = [](const float *, size_t) { return std::vector<SpeakerSegment> {{0.5, 10.5, 1}, {13.0, 13.7, 0}}; };
    RecordingPipeline pipeline(*model, so);
    const Transcript t = pipeline.run(x.data(), x.size(), req);

    auto alone = model->new_session(so);
    RunOptions ro;
    ro.max_new_tokens = 12;
    const Transcript first = alone->run(x.data(), at(13.0), ro);
    const Transcript second = alone->run(x.data() + at(13.0), x.size() - at(13.0), ro);
    ASSERT_EQ(t.segments.size(), 2u);
    EXPECT_EQ(t.segments[0].speaker, 1);
    EXPECT_EQ(t.segments[0].tokens, first.tokens);
    EXPECT_EQ(t.segments[1].speaker, 0);
    EXPECT_EQ(t.segments[1].tokens, second.tokens);
    EXPECT_GE(t.segments[1].t0_ms, 13000);
    EXPECT_NE(first.tokens, second.tokens);
}
