// NeMo's cache-aware streaming FastConformers against streaming-tiny (NeMo's own code on small random
// weights, see its README): a hybrid RNNT+CTC model trained with four lookaheads and an end-of-utterance
// RNNT model. Offline with each attention context (chunked_limited masks, causal subsampling and
// convolutions, the conv module's LayerNorm) and streamed as NeMo's cache_aware_stream_step runs it: every
// step's encoder output, the caches after the steps the fixture saved, every step's partial ids and text,
// the final transcripts, the <EOU> steps.
#include "blocks/fastconformer.h"
#include "model/family.h"
#include "core/audio.h"
#include "core/error.h"
#include "core/npy.h"
#include "support.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

using namespace transcribe;

namespace {

const std::string kDir = std::string(PARAKEET_FIXTURE) + "/../streaming-tiny";

struct Kind {
    const char * name;    // MANIFEST models.<name>
    const char * model;   // converted test model
    const char * sub;     // its folder under the fixture
    std::vector<const char *> clips;
};
const Kind kHybrid {"hybrid", "streaming-hybrid-tiny-f32.gguf", "", {"jfk", "librivox_0890", "cards_005"}};
const Kind kEou {"eou", "streaming-eou-tiny-f32.gguf", "eou/", {"eou_two_utts", "eou_long", "eou_cards_005"}};

const nlohmann::json & manifest() {
    static const nlohmann::json m = nlohmann::json::parse(std::ifstream(kDir + "/MANIFEST.json"));
    return m;
}
std::string golden_path(const Kind & k, const std::string & clip, const std::string & file) {
    return kDir + "/" + k.sub + "golden/" + clip + "/" + file;
}
double atol(const Kind & k, const std::string & clip, const std::string & file) {
    return manifest()["models"][k.name]["goldens"][clip][file]["suggested_atol"].get<double>();
}
nlohmann::json golden_json(const Kind & k, const std::string & clip, const std::string & file) {
    return nlohmann::json::parse(std::ifstream(golden_path(k, clip, file)));
}
std::vector<float> wav(const Kind & k, const std::string & clip) {
    return audio_decode_file(kDir + "/" + k.sub + "audio/" + clip + ".wav", 16000);
}
std::vector<std::vector<int>> contexts(const Kind & k) {
    return manifest()["models"][k.name]["att_context_sizes"].get<std::vector<std::vector<int>>>();
}
std::string context_dir(const std::vector<int> & c) {
    return "att_" + std::to_string(c[0]) + "_" + std::to_string(c[1]) + "/";
}

// Rows [from, to) of a time-major golden [T, d].
std::vector<float> rows(const NpyArray & a, int64_t from, int64_t to) {
    const int64_t d = a.shape[1];
    return std::vector<float>(a.f32.begin() + from * d, a.f32.begin() + to * d);
}

// Each of a run's step logits (joint evaluations, CTC frames) within the MANIFEST tolerance of the
// hybrid's golden FILE's row.
void expect_rows_within(const std::vector<std::vector<float>> & ours, const std::string & clip, const std::string & file) {
    const NpyArray want = npy_read(golden_path(kHybrid, clip, file));
    ASSERT_EQ(ours.size(), size_t(want.shape[0])) << clip << " " << file;
    float worst = 0;
    for (size_t e = 0; e < ours.size(); ++e) {
        worst = std::max(worst, test::max_abs_diff(ours[e], rows(want, int64_t(e), int64_t(e) + 1)));
    }
    EXPECT_LE(worst, atol(kHybrid, clip, file)) << clip << " " << file;
}

class ScopedDump {
public:
    explicit ScopedDump(const std::string & name) : dir_(::testing::TempDir() + name) {
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        setenv("TRANSCRIBE_DUMP_DIR", dir_.c_str(), 1);
    }
    ~ScopedDump() { unsetenv("TRANSCRIBE_DUMP_DIR"); }
    NpyArray read(const std::string & name) const { return npy_read(dir_ + "/" + name + ".npy"); }

private:
    std::string dir_;
};

struct Streamed {
    std::vector<StreamStep> steps;
    std::vector<int32_t>    tokens;
    std::string             text;
};
// NeMo's re.sub(r'(\s)(marks)', r'\2', text) with the marks of these models' vocabularies (pieces not
// starting a word): the clean-up its text has and the joined deltas do not.
std::string nemo_punctuation_spaces(const std::string & text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (!(text[i] == ' ' && i + 1 < text.size() && std::strchr(",.'", text[i + 1]))) {
            out += text[i];
        }
    }
    return out;
}

// The clip pushed in packets of PACKET samples (the mel made as the samples come), then finished.
Streamed stream(Model & model, const std::vector<float> & pcm, RunOptions ro, size_t packet) {
    SessionOptions so;
    so.n_threads = 2;
    auto session = model.new_session(so);
    auto s = session->open_stream(ro);
    Streamed out;
    for (size_t at = 0; at < pcm.size(); at += packet) {
        s->push(pcm.data() + at, std::min(packet, pcm.size() - at));
        for (StreamStep & st : s->take_steps()) {
            out.steps.push_back(std::move(st));
        }
    }
    s->finish();
    for (StreamStep & st : s->take_steps()) {
        out.steps.push_back(std::move(st));
    }
    out.tokens = s->tokens();
    out.text   = s->text();
    return out;
}

} // namespace

TEST(StreamingGolden, Offline_every_stage_and_decision_at_every_lookahead_is_nemos) {
    auto model = test::load(kHybrid.model);
    EXPECT_TRUE(model->info().native_streaming);
    EXPECT_EQ(model->info().end_of_turn_token, -1);
    EXPECT_EQ(model->info().att_contexts, (std::vector<int32_t> {70, 13, 70, 6, 70, 1, 70, 0}));
    for (const char * clip : kHybrid.clips) {
        const std::vector<std::vector<int>> cs = contexts(kHybrid);
        for (size_t i = 0; i < cs.size(); ++i) {
            const std::string at = context_dir(cs[i]), where = std::string(clip) + " " + at;
            RunOptions ro;
            ro.att_context_size = cs[i];
            const nlohmann::json golden = golden_json(kHybrid, clip, at + "offline.json");
            test::ClipRun r;
            {
                ScopedDump dump(std::string("stream_offline_") + clip);
                SessionOptions so;
                so.n_threads = 2;
                ro.step_logits = &r.step_logits;
                const std::vector<float> pcm = wav(kHybrid, clip);
                r.transcript = model->new_session(so)->run(pcm.data(), pcm.size(), ro);
                ro.step_logits = nullptr;
                for (const auto & [ours, theirs] : {std::pair<std::string, std::string> {"pre_encode", "offline_pre_encode.npy"},
                                                    {"enc_layer_0", at + "offline_enc_layer_0.npy"},
                                                    {"enc_out", at + "offline_enc_out.npy"}}) {
                    const NpyArray got = dump.read(ours), want = npy_read(golden_path(kHybrid, clip, theirs));
                    ASSERT_EQ(got.shape, want.shape) << where << ours;
                    EXPECT_LE(test::max_abs_diff(got.f32, want.f32), atol(kHybrid, clip, theirs)) << where << ours;
                }
            }
            EXPECT_EQ(r.transcript.tokens, golden["rnnt"]["ids"].get<std::vector<int32_t>>()) << where;
            EXPECT_EQ(r.transcript.text, golden["rnnt"]["text"].get<std::string>()) << where;
            EXPECT_EQ(r.transcript.token_frames, golden["rnnt"]["frames"].get<std::vector<int32_t>>()) << where;
            if (i == 0) { // the default lookahead's raw joint logits, every evaluation
                expect_rows_within(r.step_logits, clip, at + "offline_rnnt_joint_logits.npy");
            }
            // The CTC head of the same encoder: log-probabilities (default lookahead), frame decisions, text.
            ro.decoder_type = DecoderType::Ctc;
            const test::ClipRun c = test::run_clip(*model, test::Fixture(kDir), clip, ro);
            EXPECT_EQ(c.transcript.tokens, golden["ctc"]["collapsed"].get<std::vector<int32_t>>()) << where;
            EXPECT_EQ(c.transcript.text, golden["ctc"]["text"].get<std::string>()) << where;
            if (i == 0) {
                expect_rows_within(c.step_logits, clip, at + "offline_ctc_log_probs.npy");
            }
        }
    }
}

TEST(StreamingGolden, Offline_end_of_utterance_model_gives_nemos_ids_and_text) {
    auto model = test::load(kEou.model);
    EXPECT_TRUE(model->info().native_streaming);
    EXPECT_EQ(model->info().end_of_turn_token, 1); // <EOU>, a user-defined piece
    for (const char * clip : kEou.clips) {
        const nlohmann::json golden = golden_json(kEou, clip, "att_70_1/offline.json");
        ScopedDump dump(std::string("eou_offline_") + clip);
        SessionOptions so;
        so.n_threads = 2;
        const std::vector<float> pcm = wav(kEou, clip);
        const Transcript t = model->new_session(so)->run(pcm.data(), pcm.size(), RunOptions {});
        EXPECT_EQ(t.tokens, golden["rnnt"]["ids"].get<std::vector<int32_t>>()) << clip;
        EXPECT_EQ(t.text, golden["rnnt"]["text"].get<std::string>()) << clip;
        const std::string file = "att_70_1/offline_enc_out.npy";
        EXPECT_LE(test::max_abs_diff(dump.read("enc_out").f32, npy_read(golden_path(kEou, clip, file)).f32),
                  atol(kEou, clip, file)) << clip;
    }
}

// Every step as NeMo's streaming loop ran it, the audio pushed 100 ms at a time (the mel made as it comes).
void expect_streamed_as_nemo(const Kind & k, Model & model, const char * clip, const std::vector<int> & context) {
    const std::string at = context_dir(context), where = std::string(clip) + " " + at;
    const nlohmann::json golden = golden_json(k, clip, at + "stream.json");
    RunOptions ro;
    ro.att_context_size = context;
    const std::vector<float> pcm = wav(k, clip);
    Streamed s;
    {
        ScopedDump dump(std::string("stream_") + k.name + clip);
        s = stream(model, pcm, ro, 1600);
        ASSERT_EQ(int(s.steps.size()), golden["n_steps"].get<int>()) << where;
        const NpyArray enc = npy_read(golden_path(k, clip, at + "stream_enc.npy"));
        const double enc_tol = atol(k, clip, at + "stream_enc.npy");
        const NpyArray stacked = dump.read("stream_enc"); // the golden's own name and layout
        ASSERT_EQ(stacked.shape, enc.shape) << where;
        EXPECT_LE(test::max_abs_diff(stacked.f32, enc.f32), enc_tol) << where;
        for (const nlohmann::json & step : golden["steps"]) {
            const int n = step["step"].get<int>();
            const std::vector<int> r = step["enc_rows"].get<std::vector<int>>();
            const NpyArray got = dump.read("stream_enc_step" + std::to_string(n));
            ASSERT_EQ(got.shape[0], r[1] - r[0]) << where << " step " << n;
            EXPECT_LE(test::max_abs_diff(got.f32, rows(enc, r[0], r[1])), enc_tol) << where << " step " << n;
        }
        for (const int n : golden["cache_steps_saved"].get<std::vector<int>>()) {
            for (const char * cache : {"stream_cache_last_channel_step", "stream_cache_last_time_step"}) {
                const std::string file = cache + std::to_string(n);
                const NpyArray want = npy_read(golden_path(k, clip, at + file + ".npy"));
                const NpyArray got  = dump.read(file);
                ASSERT_EQ(got.shape, want.shape) << where << file;
                EXPECT_LE(test::max_abs_diff(got.f32, want.f32), atol(k, clip, at + file + ".npy")) << where << file;
            }
        }
    }
    // Each step's partial hypothesis is the ids so far; the deltas join into the text.
    std::vector<int32_t> so_far;
    std::string joined;
    for (size_t n = 0; n < s.steps.size(); ++n) {
        so_far.insert(so_far.end(), s.steps[n].tokens.begin(), s.steps[n].tokens.end());
        joined += s.steps[n].text;
        EXPECT_EQ(so_far, golden["steps"][n]["rnnt_ids"].get<std::vector<int32_t>>()) << where << " step " << n;
        EXPECT_EQ(nemo_punctuation_spaces(joined), golden["steps"][n]["rnnt_text"].get<std::string>()) << where << " step " << n;
    }
    EXPECT_EQ(s.tokens, golden["final_rnnt_ids"].get<std::vector<int32_t>>()) << where;
    EXPECT_EQ(s.text, golden["final_rnnt_text"].get<std::string>()) << where;
    if (golden.contains("eou_events")) { // <EOU> decoded in the very steps NeMo's loop decoded it
        std::vector<int> ours, theirs;
        for (const StreamStep & st : s.steps) {
            for (const int32_t id : st.tokens) {
                if (id == model.info().end_of_turn_token) {
                    ours.push_back(st.index);
                }
            }
        }
        for (const nlohmann::json & e : golden["eou_events"]) {
            theirs.push_back(e["step"].get<int>());
        }
        EXPECT_EQ(ours, theirs) << where;
        EXPECT_FALSE(theirs.empty()) << where;
    }
    if (golden.contains("final_ctc_text")) { // the hybrid's CTC head streamed: every step's text
        ro.decoder_type = DecoderType::Ctc;
        const Streamed c = stream(model, pcm, ro, 4000);
        ASSERT_EQ(c.steps.size(), s.steps.size()) << where;
        std::string text;
        for (size_t n = 0; n < c.steps.size(); ++n) {
            text += c.steps[n].text;
            EXPECT_EQ(nemo_punctuation_spaces(text), golden["steps"][n]["ctc_text"].get<std::string>()) << where << " ctc step " << n;
        }
        EXPECT_EQ(c.tokens, golden["final_ctc_collapsed"].get<std::vector<int32_t>>()) << where;
        EXPECT_EQ(c.text, golden["final_ctc_text"].get<std::string>()) << where;
    }
}

TEST(StreamingGolden, Every_step_cache_and_partial_hypothesis_of_the_hybrid_is_nemos_at_every_lookahead) {
    auto model = test::load(kHybrid.model);
    for (const char * clip : kHybrid.clips) {
        for (const std::vector<int> & c : contexts(kHybrid)) {
            expect_streamed_as_nemo(kHybrid, *model, clip, c);
        }
    }
}

TEST(StreamingGolden, The_end_of_utterance_model_streams_as_nemo_and_says_eou_in_the_same_steps) {
    auto model = test::load(kEou.model);
    for (const char * clip : kEou.clips) {
        expect_streamed_as_nemo(kEou, *model, clip, {70, 1});
    }
}

TEST(Streaming, A_context_the_model_was_not_trained_for_or_an_offline_model_is_a_clear_error) {
    auto model = test::load(kHybrid.model);
    SessionOptions so;
    so.n_threads = 2;
    auto session = model->new_session(so);
    RunOptions ro;
    ro.att_context_size = {70, 2};
    const std::vector<float> pcm = wav(kHybrid, "cards_005");
    try {
        session->run(pcm.data(), pcm.size(), ro);
        FAIL() << "an untrained context ran";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
        EXPECT_NE(std::string(e.what()).find("70,13, 70,6, 70,1, 70,0"), std::string::npos) << e.what();
    }
    EXPECT_THROW(session->open_stream(ro), Error);
    auto offline = test::load("parakeet-tdt-tiny-f32.gguf");
    EXPECT_FALSE(offline->info().native_streaming);
    EXPECT_TRUE(offline->info().att_contexts.empty());
    try {
        offline->new_session(so)->open_stream(RunOptions {});
        FAIL() << "an offline model streamed natively";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INVALID_ARG);
    }
}

namespace {
// The keys each query sees in attention_mask's rows.
std::vector<std::vector<int>> seen(const std::vector<float> & mask, int T, int n_keys) {
    std::vector<std::vector<int>> out(static_cast<size_t>(T));
    for (int i = 0; i < T; ++i) {
        for (int j = 0; j < n_keys; ++j) {
            const float v = mask[size_t(i) * size_t(n_keys) + size_t(j)];
            EXPECT_TRUE(v == 0.0f || v == -INFINITY);
            if (v == 0.0f) {
                out[size_t(i)].push_back(j);
            }
        }
    }
    return out;
}
} // namespace

// NeMo's _create_masks worked by hand for the branches the fixture's chunked_limited models do not reach.
TEST(AttentionMask, Each_style_and_context_as_nemos_create_masks) {
    using V = std::vector<std::vector<int>>;
    // chunked_limited [4, 1]: chunks of 2 frames, each seeing its own and the 2 chunks before.
    EXPECT_EQ(seen(attention_mask(true, {4, 1}, 8, 0, 0), 8, 8),
              (V {{0, 1}, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5},
                  {2, 3, 4, 5, 6, 7}, {2, 3, 4, 5, 6, 7}}));
    // chunked_limited [-1, 1]: every chunk before (left_chunks 10000).
    EXPECT_EQ(seen(attention_mask(true, {-1, 1}, 5, 0, 0), 5, 5),
              (V {{0, 1}, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}}));
    // chunked_limited with an unlimited right context: only the left limit (triu(-2)).
    EXPECT_EQ(seen(attention_mask(true, {2, -1}, 5, 0, 0), 5, 5),
              (V {{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {1, 2, 3, 4}, {2, 3, 4}}));
    // regular [1, 1]: a band; regular [-1, 0]: causal; regular [-1, -1]: everything.
    EXPECT_EQ(seen(attention_mask(false, {1, 1}, 4, 0, 0), 4, 4), (V {{0, 1}, {0, 1, 2}, {1, 2, 3}, {2, 3}}));
    EXPECT_EQ(seen(attention_mask(false, {-1, 0}, 3, 0, 0), 3, 3), (V {{0}, {0, 1}, {0, 1, 2}}));
    EXPECT_EQ(seen(attention_mask(false, {-1, -1}, 2, 0, 0), 2, 2), (V {{0, 1}, {0, 1}}));
    // A streaming step: 4 cache slots, the first 2 still empty, then a window of 2 (frames 4 and 5, chunk 2
    // of [4, 1]: chunks 0 to 2 seen, the empty slots not).
    EXPECT_EQ(seen(attention_mask(true, {4, 1}, 2, 4, 2), 2, 6), (V {{2, 3, 4, 5}, {2, 3, 4, 5}}));
    // A full cache of [2, 1] (one chunk before): frames 4, 5 see frames 2 to 5.
    EXPECT_EQ(seen(attention_mask(true, {2, 1}, 2, 4, 4), 2, 6), (V {{2, 3, 4, 5}, {2, 3, 4, 5}}));
}
