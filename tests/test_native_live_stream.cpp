// Live streams through a model that transcribes as it hears (transcribe_stream_create_native), against
// streaming-tiny's NeMo goldens: the end-of-utterance model's turns split where NeMo's streaming run said
// <EOU>, a commit's turn is NeMo's streaming transcript of the audio committed (a fresh stream each
// time), a cleared turn sends nothing, and a turn the VAD found is the model's streaming run over that
// turn's own audio.
#include "transcribe.h"
#include "support.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

const std::string kDir = std::string(PARAKEET_FIXTURE) + "/../streaming-tiny";

nlohmann::json stream_golden(const std::string & sub, const std::string & clip, const std::string & context) {
    return nlohmann::json::parse(std::ifstream(kDir + "/" + sub + "golden/" + clip + "/att_" + context + "/stream.json"));
}

std::vector<float> clip_at(const std::string & path, int rate) {
    transcribe_audio a {};
    EXPECT_EQ(transcribe_audio_load(path.c_str(), rate, &a), TRANSCRIBE_OK);
    std::vector<float> pcm(a.samples, a.samples + a.n_samples);
    transcribe_audio_free(&a);
    return pcm;
}

// NeMo writes no space before these (its text); the tokenizer's text keeps the piece boundary.
std::string nemo_spaces(const std::string & text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (!(text[i] == ' ' && i + 1 < text.size() && std::string(",.'").find(text[i + 1]) != std::string::npos)) {
            out += text[i];
        }
    }
    return out;
}

std::string trim(const std::string & s) {
    const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

struct Turn {
    int64_t     item = -1, start_ms = 0, end_ms = 0;
    std::string deltas, text;
    bool        committed = false, started = false, stopped = false;
};

class NativeLive : public ::testing::Test {
protected:
    void open(const char * model_name) {
        ASSERT_EQ(transcribe_model_load(test::model(model_name).c_str(), nullptr, &model_), TRANSCRIBE_OK);
        transcribe_session_params sp = transcribe_session_params_init();
        sp.n_threads = 2;
        ASSERT_EQ(transcribe_session_create(model_, &sp, &session_), TRANSCRIBE_OK);
    }
    void TearDown() override {
        transcribe_stream_free(stream_);
        transcribe_session_free(session_);
        transcribe_vad_model_free(vad_);
        transcribe_model_free(model_);
    }

    // PCM pushed in packets of 100 ms, the steps due run after each; events gathered per turn.
    void push(const std::vector<float> & pcm, int rate) {
        const size_t packet = size_t(rate / 10);
        for (size_t at = 0; at < pcm.size(); at += packet) {
            ASSERT_EQ(transcribe_stream_push(stream_, pcm.data() + at, std::min(packet, pcm.size() - at)), TRANSCRIBE_OK);
            decode();
        }
    }
    void decode() {
        ASSERT_EQ(transcribe_stream_decode(stream_, nullptr, nullptr, nullptr), TRANSCRIBE_OK);
        transcribe_stream_event e;
        while (transcribe_stream_next_event(stream_, &e)) {
            if (turns_.empty() || turns_.back().item != e.item) {
                ASSERT_TRUE(turns_.empty() || e.item > turns_.back().item) << "events of an earlier turn came late";
                turns_.push_back({});
                turns_.back().item = e.item;
            }
            Turn & t = turns_.back();
            switch (e.type) {
            case TRANSCRIBE_STREAM_SPEECH_STARTED: t.started = true; t.start_ms = e.audio_start_ms; break;
            case TRANSCRIBE_STREAM_SPEECH_STOPPED: t.stopped = true; break;
            case TRANSCRIBE_STREAM_COMMITTED: t.committed = true; break;
            case TRANSCRIBE_STREAM_DELTA: EXPECT_TRUE(t.text.empty()) << "a delta after the turn completed"; t.deltas += e.text; break;
            case TRANSCRIBE_STREAM_COMPLETED:
                t.text     = e.text;
                t.start_ms = e.audio_start_ms;
                t.end_ms   = e.audio_end_ms;
                EXPECT_TRUE(t.committed);
                break;
            }
        }
    }

    transcribe_model *     model_ = nullptr;
    transcribe_session *   session_ = nullptr;
    transcribe_vad_model * vad_ = nullptr;
    transcribe_stream *    stream_ = nullptr;
    std::vector<Turn>      turns_;
};

TEST_F(NativeLive, End_of_utterance_turns_are_nemos_streaming_text_split_at_eou) {
    open("streaming-eou-tiny-f32.gguf");
    transcribe_stream_params p = transcribe_stream_params_init();
    p.turn_detection = false;
    p.end_of_turn    = true;
    ASSERT_EQ(transcribe_stream_create_native(session_, nullptr, &p, nullptr, &stream_), TRANSCRIBE_OK);
    const nlohmann::json golden = stream_golden("eou/", "eou_two_utts", "70_1");
    push(clip_at(kDir + "/eou/audio/eou_two_utts.wav", 16000), 16000);
    ASSERT_EQ(transcribe_stream_commit(stream_), TRANSCRIBE_OK); // the audio after the last <EOU>
    decode();

    // NeMo's text, cut where it says <EOU>: the turns completed there, in the steps it decoded them.
    const std::string nemo = golden["final_rnnt_text"].get<std::string>();
    std::vector<std::string> expected;
    for (size_t from = 0;;) {
        const size_t at = nemo.find("<EOU>", from);
        expected.push_back(trim(nemo.substr(from, at == std::string::npos ? std::string::npos : at - from)));
        if (at == std::string::npos) {
            break;
        }
        from = at + 5;
    }
    ASSERT_EQ(turns_.size(), expected.size());
    const nlohmann::json & eou = golden["eou_events"];
    for (size_t i = 0; i < turns_.size(); ++i) {
        EXPECT_EQ(nemo_spaces(trim(turns_[i].text)), expected[i]) << "turn " << i;
        EXPECT_EQ(trim(turns_[i].deltas), trim(turns_[i].text)) << "turn " << i << ": the deltas join into it";
        if (i < eou.size()) { // ended by the model, at the end of the step NeMo decoded <EOU> in
            EXPECT_TRUE(turns_[i].started && turns_[i].stopped) << "turn " << i;
            EXPECT_GE(turns_[i].end_ms, int64_t(eou[i]["time_s"].get<double>() * 1000)) << "turn " << i;
        }
    }
}

TEST_F(NativeLive, A_commit_is_nemos_streaming_transcript_of_the_audio_committed_and_a_clear_sends_nothing) {
    open("streaming-hybrid-tiny-f32.gguf");
    transcribe_stream_params p = transcribe_stream_params_init();
    p.turn_detection = false;
    const int32_t context[2] = {70, 13}; // the longest chunks: the fewest steps
    transcribe_run_params rp = transcribe_run_params_init();
    rp.att_context_size = context;
    ASSERT_EQ(transcribe_stream_create_native(session_, nullptr, &p, &rp, &stream_), TRANSCRIBE_OK);
    const std::string jfk = stream_golden("", "jfk", "70_13")["final_rnnt_text"].get<std::string>();
    const std::string cards = stream_golden("", "cards_005", "70_13")["final_rnnt_text"].get<std::string>();
    const std::vector<float> a = clip_at(kDir + "/audio/jfk.wav", 16000), b = clip_at(kDir + "/audio/cards_005.wav", 16000);

    push(a, 16000);
    ASSERT_EQ(transcribe_stream_commit(stream_), TRANSCRIBE_OK);
    push(std::vector<float>(b.begin(), b.begin() + long(b.size() / 2)), 16000);
    ASSERT_EQ(transcribe_stream_clear(stream_), TRANSCRIBE_OK); // half a clip heard, then forgotten
    push(b, 16000);
    ASSERT_EQ(transcribe_stream_commit(stream_), TRANSCRIBE_OK);
    decode();

    std::vector<const Turn *> completed;
    for (const Turn & t : turns_) {
        if (t.committed) {
            completed.push_back(&t);
        }
    }
    ASSERT_EQ(completed.size(), 2u);
    EXPECT_EQ(nemo_spaces(trim(completed[0]->text)), trim(jfk));
    EXPECT_EQ(nemo_spaces(trim(completed[1]->text)), trim(cards));
    EXPECT_EQ(completed[0]->end_ms, int64_t(a.size() / 16));
    EXPECT_EQ(transcribe_stream_commit(stream_), TRANSCRIBE_ERR_INVALID_ARG); // nothing since: under 100 ms
}

TEST_F(NativeLive, A_turn_the_vad_found_is_the_models_streaming_run_over_that_turns_audio) {
    open("streaming-hybrid-tiny-f32.gguf");
    ASSERT_EQ(transcribe_vad_model_load(test::model("silero-vad-v5.gguf").c_str(), &vad_), TRANSCRIBE_OK);
    transcribe_stream_params p = transcribe_stream_params_init();
    ASSERT_EQ(transcribe_stream_create_native(session_, vad_, &p, nullptr, &stream_), TRANSCRIBE_OK);
    std::vector<float> pcm = clip_at(kDir + "/audio/jfk.wav", 16000);
    pcm.resize(pcm.size() + 16000, 0.0f); // a second of silence after: the last turn ends
    push(pcm, 16000);
    decode();

    // Each turn's own samples through a native stream on a session of their own.
    transcribe_session * other = nullptr;
    ASSERT_EQ(transcribe_session_create(model_, nullptr, &other), TRANSCRIBE_OK);
    ASSERT_FALSE(turns_.empty());
    for (const Turn & t : turns_) {
        ASSERT_TRUE(t.started && t.stopped && t.committed) << "turn " << t.item;
        const size_t from = size_t(t.start_ms * 16), to = std::min(pcm.size(), size_t(t.end_ms * 16));
        ASSERT_LT(from, to);
        transcribe_native_stream * own = nullptr;
        ASSERT_EQ(transcribe_native_stream_open(other, nullptr, &own), TRANSCRIBE_OK);
        ASSERT_EQ(transcribe_native_stream_push(own, pcm.data() + from, to - from), TRANSCRIBE_OK);
        ASSERT_EQ(transcribe_native_stream_finish(own), TRANSCRIBE_OK);
        EXPECT_EQ(nemo_spaces(trim(t.text)), trim(transcribe_native_stream_text(own))) << "turn " << t.item;
        EXPECT_EQ(trim(t.deltas), trim(t.text)) << "turn " << t.item;
        transcribe_native_stream_free(own);
    }
    transcribe_session_free(other);
}

TEST_F(NativeLive, Audio_at_another_rate_is_resampled_to_the_models) {
    open("streaming-eou-tiny-f32.gguf");
    transcribe_stream_params p = transcribe_stream_params_init();
    p.sample_rate    = 24000; // OpenAI's
    p.turn_detection = false;
    p.end_of_turn    = true;
    ASSERT_EQ(transcribe_stream_create_native(session_, nullptr, &p, nullptr, &stream_), TRANSCRIBE_OK);
    const std::vector<float> pcm = clip_at(kDir + "/eou/audio/eou_two_utts.wav", 24000);
    push(pcm, 24000);
    ASSERT_EQ(transcribe_stream_commit(stream_), TRANSCRIBE_OK);
    decode();
    ASSERT_GE(turns_.size(), 2u); // the utterances still end where the model hears them end
    EXPECT_NEAR(double(turns_.back().end_ms), double(pcm.size()) / 24, 1.0); // all of it heard: the resampler flushed
    for (const Turn & t : turns_) {
        EXPECT_TRUE(t.committed) << "turn " << t.item;
        EXPECT_EQ(trim(t.deltas), trim(t.text)) << "turn " << t.item;
    }
}

TEST_F(NativeLive, Models_and_modes_that_cannot_stream_natively_are_clear_errors) {
    open("streaming-hybrid-tiny-f32.gguf");
    transcribe_stream_params p = transcribe_stream_params_init();
    p.turn_detection = false;
    p.end_of_turn    = true; // the hybrid has no end-of-utterance token
    EXPECT_EQ(transcribe_stream_create_native(session_, nullptr, &p, nullptr, &stream_), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_NE(std::string(transcribe_last_error()).find("end-of-utterance"), std::string::npos) << transcribe_last_error();
    p.end_of_turn    = false;
    p.turn_detection = true; // without a VAD
    EXPECT_EQ(transcribe_stream_create_native(session_, nullptr, &p, nullptr, &stream_), TRANSCRIBE_ERR_INVALID_ARG);

    transcribe_model * offline = nullptr;
    ASSERT_EQ(transcribe_model_load(test::model("parakeet-tdt-tiny-f32.gguf").c_str(), nullptr, &offline), TRANSCRIBE_OK);
    transcribe_session * s = nullptr;
    ASSERT_EQ(transcribe_session_create(offline, nullptr, &s), TRANSCRIBE_OK);
    p.turn_detection = false;
    EXPECT_EQ(transcribe_stream_create_native(s, nullptr, &p, nullptr, &stream_), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(stream_, nullptr);
    transcribe_session_free(s);
    transcribe_model_free(offline);
}

} // namespace
