// Live streams: turn detection on hand-worked probability sequences, the streamed VAD against
// onnxruntime's probabilities, the stream's events and partial-transcript deltas with a scripted
// detector and transcriber, and end to end through the C API (the real Silero VAD, a fixture model):
// every turn's transcript is transcribe_run's on the turn's own samples.
#include "core/audio.h"
#include "core/error.h"
#include "core/npy.h"
#include "engine/live_stream.h"
#include "engine/turn_detector.h"
#include "families/silero_vad.h"
#include "support.h"
#include "transcribe.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <future>
#include <map>
#include <thread>

using namespace transcribe;

namespace {

constexpr size_t kChunk = 512; // Silero at 16 kHz: 32 ms

// Edges as (started, sample) after feeding PROBS to a detector with these parameters.
std::vector<std::pair<bool, int64_t>> edges(const TurnDetectionParams & p, const std::vector<float> & probs,
                                            TurnDetector * keep = nullptr) {
    TurnDetector local(p, 16000, kChunk);
    TurnDetector & d = keep ? *keep : local;
    std::vector<TurnEdge> out;
    for (float x : probs) {
        d.push(x, out);
    }
    std::vector<std::pair<bool, int64_t>> r;
    for (const TurnEdge & e : out) {
        r.emplace_back(e.started, e.sample);
    }
    return r;
}

TurnDetectionParams params(float threshold, int prefix_ms, int silence_ms) {
    TurnDetectionParams p;
    p.threshold           = threshold;
    p.prefix_padding_ms   = prefix_ms;
    p.silence_duration_ms = silence_ms;
    return p;
}

using Edges = std::vector<std::pair<bool, int64_t>>;

TEST(TurnDetector, StartReachesBackThePrefixAndStopWaitsOutTheSilence) {
    // Prefix 64 ms = 1024 samples, silence 96 ms = 1536 samples (3 chunks).
    // Chunk 3 (samples 1536..2048) starts a turn at 1536 - 1024 = 512; chunk 5 (0.4) lies between the
    // thresholds (0.35..0.5) and starts no silence; the silence begins with chunk 6 at 3072 and has lasted
    // 1536 samples at the end of chunk 8 (4608): the turn ends there. The next turn (chunk 10 at 5120)
    // reaches back only to the last turn's end, 4608, not to 4096.
    const Edges got = edges(params(0.5f, 64, 96), {0.1f, 0.1f, 0.1f, 0.9f, 0.9f, 0.4f, 0.2f, 0.2f, 0.2f, 0.1f, 0.9f});
    EXPECT_EQ(got, (Edges {{true, 512}, {false, 4608}, {true, 4608}}));
}

TEST(TurnDetector, SpeechInsideTheSilenceStartsItAgain) {
    // Silence from chunk 1 (512) is broken by chunk 3 (0.6); a new one from chunk 4 (2048) ends the turn at
    // the end of chunk 6 (3584). A turn at the stream's start cannot reach back before sample 0.
    const Edges got = edges(params(0.5f, 300, 96), {0.9f, 0.1f, 0.1f, 0.6f, 0.1f, 0.1f, 0.1f, 0.1f});
    EXPECT_EQ(got, (Edges {{true, 0}, {false, 3584}}));
}

TEST(TurnDetector, ThresholdItselfIsSpeechAndTheLowerThresholdHasAFloor) {
    // At the threshold exactly: speech. Threshold 0.1: the quiet threshold is max(0.1 - 0.15, 0.01) = 0.01,
    // so 0.02 is "in between" (no silence) and 0.005 is silence; silence 0 ms ends the turn with the
    // first silent chunk (chunk 3, ending at 2048).
    EXPECT_EQ(edges(params(0.5f, 0, 32), {0.5f, 0.1f}), (Edges {{true, 0}, {false, 1024}}));
    EXPECT_EQ(edges(params(0.1f, 0, 0), {0.1f, 0.02f, 0.02f, 0.005f, 0.02f}), (Edges {{true, 0}, {false, 2048}}));
}

TEST(TurnDetector, RestartDropsTheOpenTurnAndMovesTheFloor) {
    TurnDetector d(params(0.5f, 300, 96), 16000, kChunk);
    EXPECT_EQ(edges({}, {0.1f, 0.9f, 0.9f}, &d), (Edges {{true, 0}}));
    d.restart(); // at 1536
    EXPECT_FALSE(d.in_turn());
    // Silence after the restart ends nothing; speech at chunk 5 (2560) reaches back only to 1536.
    EXPECT_EQ(edges({}, {0.1f, 0.1f, 0.9f}, &d), (Edges {{true, 1536}}));
}

TEST(TurnDetector, RejectsBadParameters) {
    for (const TurnDetectionParams & p : {params(-0.1f, 0, 0), params(1.5f, 0, 0), params(0.5f, -1, 0), params(0.5f, 0, -5)}) {
        try {
            TurnDetector d(p, 16000, kChunk);
            ADD_FAILURE() << "accepted threshold " << p.threshold << ", " << p.prefix_padding_ms << ", " << p.silence_duration_ms;
        } catch (const Error & e) {
            EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        }
    }
}

// ---------------------------------------------------------------- the streamed VAD

TEST(SileroVadStream, PiecesGiveOnnxruntimesProbabilities) {
    SileroVad model(test::model("silero-vad-v5.gguf"));
    SileroVadSession session(model, 1);
    const std::vector<float> pcm = audio_decode_file(test::fixture("audio/jfk.wav"), 16000);
    const NpyArray ref = npy_read(std::string(SILERO_FIXTURE) + "/v5/jfk.probs.npy");
    const size_t whole = pcm.size() / kChunk * kChunk; // the golden's last chunk is zero-padded: left out
    std::vector<float> probs;
    SileroVadStream stream;
    size_t at = 0;
    for (size_t chunks = 1; at < whole; chunks = chunks % 7 + 1) { // pieces of 1..7 chunks
        const size_t n = std::min(chunks * kChunk, whole - at);
        const std::vector<float> p = session.run(stream, pcm.data() + at, n);
        probs.insert(probs.end(), p.begin(), p.end());
        at += n;
    }
    ASSERT_EQ(probs.size(), whole / kChunk);
    ASSERT_GE(ref.f32.size(), probs.size());
    const std::vector<float> head(ref.f32.begin(), ref.f32.begin() + long(probs.size()));
    EXPECT_LE(test::max_abs_diff(probs, head), 1e-4f); // the fixture MANIFEST's bound for probabilities
}

// ---------------------------------------------------------------- the stream, scripted

// Probabilities from a script, one per 16-kHz chunk, 0 past its end; records what it heard.
class ScriptedDetector final : public SpeechDetector {
public:
    explicit ScriptedDetector(std::vector<float> probs, size_t * heard) : probs_(std::move(probs)), heard_(heard) {}
    std::vector<float> probabilities(const float *, size_t, int, const std::function<bool()> &) override { return {}; }
    size_t chunk_samples(int) const override { return kChunk; }
    std::vector<float> next_probabilities(const float *, size_t n, int sample_rate) override {
        EXPECT_EQ(sample_rate, 16000);
        EXPECT_EQ(n % kChunk, 0u);
        *heard_ += n;
        std::vector<float> out;
        for (size_t i = 0; i < n / kChunk; ++i, ++next_) {
            out.push_back(next_ < probs_.size() ? probs_[next_] : 0.0f);
        }
        return out;
    }

private:
    std::vector<float> probs_;
    size_t             next_ = 0;
    size_t *           heard_;
};

// A ramp, so a slice's first sample says where it was cut.
std::vector<float> ramp(size_t n, size_t from = 0) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = float(from + i) * 1e-6f;
    }
    return v;
}

std::vector<LiveEvent> drain(LiveStream & s) {
    std::vector<LiveEvent> out;
    for (LiveEvent e {LiveEventKind::Delta}; s.next_event(e);) {
        out.push_back(e);
    }
    return out;
}

TEST(LiveStream, TurnEventsAndTheTurnsOwnSamples) {
    LiveStreamOptions o;
    o.turns               = params(0.5f, 64, 96);
    o.partial_interval_ms = 0;
    size_t heard = 0;
    // Speech in chunks 10..19; silence from 20: the turn is [10*512 - 1024, 23*512) = [4096, 11776).
    std::vector<float> probs(40, 0.0f);
    std::fill(probs.begin() + 10, probs.begin() + 20, 0.9f);
    LiveStream s(o, std::make_unique<ScriptedDetector>(probs, &heard));
    const std::vector<float> pcm = ramp(40 * kChunk);
    for (size_t at = 0; at < pcm.size(); at += 300) { // pieces that do not fall on chunks
        s.push(pcm.data() + at, std::min<size_t>(300, pcm.size() - at));
    }
    EXPECT_EQ(heard, pcm.size() / kChunk * kChunk);
    const std::vector<LiveEvent> ev = drain(s);
    ASSERT_EQ(ev.size(), 3u);
    EXPECT_EQ(ev[0].kind, LiveEventKind::SpeechStarted);
    EXPECT_EQ(ev[0].audio_start_ms, 256);
    EXPECT_EQ(ev[1].kind, LiveEventKind::SpeechStopped);
    EXPECT_EQ(ev[1].audio_end_ms, 736);
    EXPECT_EQ(ev[2].kind, LiveEventKind::Committed);
    EXPECT_EQ(ev[2].audio_start_ms, 256);
    EXPECT_EQ(ev[2].audio_end_ms, 736);
    ASSERT_TRUE(s.decode_due());
    EXPECT_EQ(s.turns_waiting(), 1u);
    std::vector<std::pair<float, size_t>> asked;
    s.decode([&](const float * x, size_t n) {
        asked.emplace_back(x[0], n);
        return std::string("turn text");
    });
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].first, pcm[4096]);
    EXPECT_EQ(asked[0].second, 11776u - 4096u);
    const std::vector<LiveEvent> done = drain(s);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].kind, LiveEventKind::Completed);
    EXPECT_EQ(done[0].text, "turn text");
    EXPECT_EQ(done[0].item, 0);
    EXPECT_FALSE(s.decode_due());
    EXPECT_EQ(s.turns_waiting(), 0u);
}

TEST(LiveStream, DeltasAreTheWordsTwoHearingsAgreeOn) {
    LiveStreamOptions o;
    o.turns               = params(0.5f, 0, 96);
    o.partial_interval_ms = 64; // two chunks
    size_t heard = 0;
    LiveStream s(o, std::make_unique<ScriptedDetector>(std::vector<float>(100, 0.9f), &heard));
    const std::vector<std::string> hearings = {"Hello", "Hello world", " Hello  world again", "Hello there again",
                                               "Hello world again today"};
    size_t next = 0;
    std::vector<std::string> deltas;
    const std::vector<float> pcm = ramp(kChunk);
    for (int chunk = 0; chunk < 12 && next < hearings.size(); ++chunk) {
        s.push(pcm.data(), pcm.size());
        if (s.decode_due()) {
            s.decode([&](const float *, size_t n) {
                EXPECT_EQ(n, size_t(chunk + 1) * kChunk); // the open turn from its start, all of it
                return hearings[next++];
            });
        }
        for (const LiveEvent & e : drain(s)) {
            if (e.kind == LiveEventKind::Delta) {
                deltas.push_back(e.text);
            }
        }
    }
    // Hearings 1 and 2 agree on "Hello": out. 2 and 3 agree on "Hello world" (spacing aside): " world"
    // out. 4 agrees with 3 on "Hello" alone, 5 with 4 likewise: nothing more (and nothing taken back).
    EXPECT_EQ(next, hearings.size());
    EXPECT_EQ(deltas, (std::vector<std::string> {"Hello", " world"}));
}

TEST(LiveStream, PushesGoOnWhileATurnIsHeardOnAnotherThread) {
    LiveStreamOptions o;
    o.turns               = params(0.5f, 0, 96);
    o.partial_interval_ms = 64;
    size_t heard = 0;
    // Speech in chunks 0..9, silence from 10: the turn is [0, 13*512).
    std::vector<float> probs(20, 0.0f);
    std::fill(probs.begin(), probs.begin() + 10, 0.9f);
    LiveStream s(o, std::make_unique<ScriptedDetector>(probs, &heard));
    const std::vector<float> chunk = ramp(kChunk);
    for (int i = 0; i < 4; ++i) {
        s.push(chunk.data(), chunk.size());
    }
    ASSERT_TRUE(s.decode_due()); // a partial of the open turn
    EXPECT_EQ(s.turns_waiting(), 0u);
    std::promise<void> entered, release;
    std::thread decoder([&] {
        s.decode([&](const float *, size_t n) {
            EXPECT_EQ(n, 4 * kChunk);
            entered.set_value();
            release.get_future().wait();
            return std::string("early words");
        });
    });
    entered.get_future().wait();
    for (int i = 4; i < 16; ++i) { // the turn ends while its partial is being heard
        s.push(chunk.data(), chunk.size());
    }
    std::vector<LiveEventKind> kinds;
    for (const LiveEvent & e : drain(s)) {
        kinds.push_back(e.kind);
    }
    EXPECT_EQ(kinds, (std::vector<LiveEventKind> {LiveEventKind::SpeechStarted, LiveEventKind::SpeechStopped,
                                                  LiveEventKind::Committed}));
    EXPECT_EQ(s.turns_waiting(), 1u);
    release.set_value();
    decoder.join();
    EXPECT_TRUE(drain(s).empty()); // the partial of a turn that has ended says nothing
    ASSERT_TRUE(s.decode_due());
    size_t asked = 0;
    s.decode([&](const float *, size_t n) {
        asked = n;
        return std::string("all the words");
    });
    EXPECT_EQ(asked, 13 * kChunk);
    const std::vector<LiveEvent> done = drain(s);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].kind, LiveEventKind::Completed);
    EXPECT_EQ(done[0].text, "all the words");
}

TEST(LiveStream, CommitAndClear) {
    LiveStreamOptions o;
    o.detect_turns = false;
    LiveStream s(o, nullptr);
    const std::vector<float> pcm = ramp(16000);
    s.push(pcm.data(), 1500); // 93 ms
    try {
        s.commit();
        ADD_FAILURE() << "committed 93 ms";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
    }
    s.push(pcm.data() + 1500, 1700); // 200 ms in all
    s.commit();
    s.push(pcm.data() + 3200, 4800);
    s.clear(); // 300 ms forgotten
    s.push(pcm.data() + 8000, 8000);
    s.commit();
    std::vector<std::pair<float, size_t>> asked;
    s.decode([&](const float * x, size_t n) {
        asked.emplace_back(x[0], n);
        return std::to_string(asked.size());
    });
    const std::vector<LiveEvent> ev = drain(s);
    ASSERT_EQ(ev.size(), 4u);
    EXPECT_EQ(ev[0].kind, LiveEventKind::Committed);
    EXPECT_EQ(ev[0].audio_start_ms, 0);
    EXPECT_EQ(ev[0].audio_end_ms, 200);
    EXPECT_EQ(ev[1].kind, LiveEventKind::Committed);
    EXPECT_EQ(ev[1].item, 1);
    EXPECT_EQ(ev[1].audio_start_ms, 500);
    EXPECT_EQ(ev[1].audio_end_ms, 1000);
    EXPECT_EQ(ev[2].kind, LiveEventKind::Completed);
    EXPECT_EQ(ev[2].text, "1");
    EXPECT_EQ(ev[3].text, "2");
    ASSERT_EQ(asked.size(), 2u);
    EXPECT_EQ(asked[0], std::make_pair(pcm[0], size_t(3200)));
    EXPECT_EQ(asked[1], std::make_pair(pcm[8000], size_t(8000)));
}

TEST(LiveStream, ACommitTakesAllSinceTheLastOneOrTheKeptSilence) {
    // Without turn detection: five seconds pushed in pieces, all of them committed.
    LiveStreamOptions manual;
    manual.detect_turns = false;
    LiveStream s(manual, nullptr);
    const std::vector<float> pcm = ramp(5 * 16000);
    for (size_t at = 0; at < pcm.size(); at += 1000) {
        s.push(pcm.data() + at, 1000);
    }
    s.commit();
    std::vector<std::pair<float, size_t>> asked;
    auto record = [&](const float * x, size_t n) {
        asked.emplace_back(x[0], n);
        return std::string();
    };
    s.decode(record);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0], std::make_pair(pcm[0], pcm.size()));

    // With it, between turns: the last second and the prefix padding (300 ms) at most, 1.3 s; the
    // buffer is cut once half of it is older than that.
    size_t heard = 0;
    LiveStream vad(LiveStreamOptions {}, std::make_unique<ScriptedDetector>(std::vector<float> {}, &heard));
    for (size_t at = 0; at < pcm.size(); at += 1000) {
        vad.push(pcm.data() + at, 1000);
    }
    vad.commit();
    asked.clear();
    vad.decode(record);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_GE(asked[0].second, size_t(20800)); // 1.3 s
    EXPECT_LE(asked[0].second, size_t(2 * 20800 + 1000));
    EXPECT_EQ(asked[0].first, pcm[pcm.size() - asked[0].second]); // the latest audio
}

TEST(LiveStream, AnotherRateIsHeardAt16kHzAndCutAtItsOwn) {
    LiveStreamOptions o;
    o.sample_rate         = 24000;
    o.turns               = params(0.5f, 0, 96);
    o.partial_interval_ms = 0;
    size_t heard = 0;
    std::vector<float> probs(40, 0.0f);
    std::fill(probs.begin() + 4, probs.begin() + 10, 0.9f); // turn [4*512, 13*512) at 16 kHz = [128, 416) ms
    LiveStream s(o, std::make_unique<ScriptedDetector>(probs, &heard));
    const std::vector<float> pcm = ramp(24000);
    s.push(pcm.data(), pcm.size());
    std::vector<std::pair<float, size_t>> asked;
    s.decode([&](const float * x, size_t n) {
        asked.emplace_back(x[0], n);
        return std::string();
    });
    EXPECT_NEAR(double(heard), 16000.0, 2.0 * kChunk); // one second at 16 kHz, less what soxr holds back
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].first, pcm[3072]); // 128 ms at 24 kHz
    EXPECT_EQ(asked[0].second, size_t(9984 - 3072));
}

// ---------------------------------------------------------------- end to end through the C API

struct Turn {
    int64_t     start_ms = -1, end_ms = -1;
    std::string text, deltas;
    std::vector<transcribe_stream_event_type> order;
};

std::map<int64_t, Turn> stream_events(transcribe_stream * stream, std::map<int64_t, Turn> & turns) {
    transcribe_stream_event e;
    while (transcribe_stream_next_event(stream, &e)) {
        Turn & t = turns[e.item];
        t.order.push_back(e.type);
        if (e.type == TRANSCRIBE_STREAM_SPEECH_STARTED) {
            t.start_ms = e.audio_start_ms;
        } else if (e.type == TRANSCRIBE_STREAM_COMMITTED) {
            EXPECT_EQ(e.audio_start_ms, t.start_ms);
            t.end_ms = e.audio_end_ms;
        } else if (e.type == TRANSCRIBE_STREAM_DELTA) {
            t.deltas += e.text;
        } else if (e.type == TRANSCRIBE_STREAM_COMPLETED) {
            t.text = e.text;
        }
    }
    return turns;
}

class LiveStreamEndToEnd : public ::testing::TestWithParam<int> {};

TEST_P(LiveStreamEndToEnd, TurnsCoverTheSpeechAndTranscribeAsRunDoes) {
    const int rate = GetParam();
    transcribe_model * model = nullptr;
    ASSERT_EQ(transcribe_model_load(test::model("parakeet-tdt-tiny-f32.gguf").c_str(), nullptr, &model), TRANSCRIBE_OK);
    transcribe_vad_model * vad = nullptr;
    ASSERT_EQ(transcribe_vad_model_load(test::model("silero-vad-v5.gguf").c_str(), &vad), TRANSCRIBE_OK);
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 2;
    transcribe_session * session = nullptr;
    ASSERT_EQ(transcribe_session_create(model, &sp, &session), TRANSCRIBE_OK);
    transcribe_audio audio {};
    ASSERT_EQ(transcribe_audio_load(test::fixture("audio/jfk.wav").c_str(), rate, &audio), TRANSCRIBE_OK);

    transcribe_stream_params p = transcribe_stream_params_init();
    p.sample_rate = rate;
    transcribe_stream * stream = nullptr;
    ASSERT_EQ(transcribe_stream_create(vad, &p, &stream), TRANSCRIBE_OK);
    const transcribe_run_params rp = transcribe_run_params_init();
    std::map<int64_t, Turn> turns;
    const size_t packet = size_t(rate) / 50; // 20 ms
    for (size_t at = 0; at < audio.n_samples; at += packet) {
        ASSERT_EQ(transcribe_stream_push(stream, audio.samples + at, std::min(packet, audio.n_samples - at)), TRANSCRIBE_OK);
        if (transcribe_stream_decode_due(stream)) {
            ASSERT_EQ(transcribe_stream_decode(stream, session, nullptr, &rp), TRANSCRIBE_OK);
        }
        stream_events(stream, turns);
    }
    // jfk.wav's last words end 378 ms before the file: that turn is still open, and the end commits it.
    ASSERT_EQ(transcribe_stream_commit(stream), TRANSCRIBE_OK);
    ASSERT_EQ(transcribe_stream_decode(stream, session, nullptr, &rp), TRANSCRIBE_OK);
    stream_events(stream, turns);

    // onnxruntime's speech regions (Silero's defaults) each lie inside one turn: 500 ms of silence ends a
    // turn, so the five regions of jfk.wav, with gaps of 1092, 228, 1028 and 516 ms, make 3 or 4 turns.
    std::ifstream f(std::string(SILERO_FIXTURE) + "/v5/segments.json");
    const nlohmann::json regions = nlohmann::json::parse(f)["clips"]["jfk"]["segments"];
    for (const auto & r : regions) {
        const double a = r["start_ms"], b = r["end_ms"];
        int inside = 0;
        for (const auto & [item, t] : turns) {
            inside += t.end_ms >= 0 && t.start_ms <= a && b <= double(t.end_ms);
        }
        EXPECT_EQ(inside, 1) << "speech " << a << ".." << b << " ms";
    }
    EXPECT_GE(turns.size(), 3u);
    EXPECT_LE(turns.size(), 4u);

    for (const auto & [item, t] : turns) {
        SCOPED_TRACE("turn " + std::to_string(item));
        ASSERT_GE(t.order.size(), 3u); // started, (stopped), committed, completed
        EXPECT_EQ(t.order.front(), TRANSCRIBE_STREAM_SPEECH_STARTED);
        EXPECT_EQ(t.order.back(), TRANSCRIBE_STREAM_COMPLETED);
        // What a recording of the turn's samples alone gives: cut at the stream's rate, then brought to the
        // model's as an upload at that rate would be.
        const size_t a = size_t(t.start_ms) * size_t(rate) / 1000, b = size_t(t.end_ms) * size_t(rate) / 1000;
        transcribe_audio turn {};
        ASSERT_EQ(transcribe_audio_from_pcm(audio.samples + a, b - a, rate, 1, 16000, &turn), TRANSCRIBE_OK);
        transcribe_result * r = nullptr;
        ASSERT_EQ(transcribe_run(session, turn.samples, turn.n_samples, &rp, &r), TRANSCRIBE_OK);
        EXPECT_EQ(t.text, transcribe_result_text(r));
        transcribe_result_free(r);
        transcribe_audio_free(&turn);
    }
    transcribe_stream_free(stream);
    transcribe_audio_free(&audio);
    transcribe_session_free(session);
    transcribe_vad_model_free(vad);
    transcribe_model_free(model);
}

INSTANTIATE_TEST_SUITE_P(Rates, LiveStreamEndToEnd, ::testing::Values(16000, 24000));

TEST(LiveStreamApi, BadArguments) {
    transcribe_stream * stream = nullptr;
    transcribe_stream_params p = transcribe_stream_params_init();
    EXPECT_EQ(transcribe_stream_create(nullptr, &p, &stream), TRANSCRIBE_ERR_INVALID_ARG); // turn detection, no VAD
    EXPECT_EQ(stream, nullptr);
    p.turn_detection = false;
    p.sample_rate    = 10;
    EXPECT_EQ(transcribe_stream_create(nullptr, &p, &stream), TRANSCRIBE_ERR_INVALID_ARG);
    p.sample_rate = 16000;
    ASSERT_EQ(transcribe_stream_create(nullptr, &p, &stream), TRANSCRIBE_OK);
    const float nan = std::nanf("");
    EXPECT_EQ(transcribe_stream_push(stream, &nan, 1), TRANSCRIBE_ERR_AUDIO_DECODE);
    EXPECT_EQ(transcribe_stream_commit(stream), TRANSCRIBE_ERR_INVALID_ARG); // nothing to commit
    EXPECT_EQ(transcribe_stream_decode(stream, nullptr, nullptr, nullptr), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_FALSE(transcribe_stream_decode_due(stream));
    EXPECT_EQ(transcribe_stream_turns_waiting(stream), 0u);
    EXPECT_EQ(transcribe_stream_turns_waiting(nullptr), 0u);
    transcribe_stream_event e;
    EXPECT_FALSE(transcribe_stream_next_event(stream, &e));
    transcribe_stream_free(stream);
}

} // namespace
