// Hotwords against NeMo (tests/fixtures/parakeet-hotwords, made by NeMo's own GPUBoostingTreeModel and
// greedy decoders): the phrase-boosting tree's scores along every path for five option sets, and the
// boosted greedy decoding of the three Parakeet heads (TDT, RNNT, CTC); by hand: the fused choice
// (ties, the CTC's excluded previous token) and the API's checks.
#include "core/error.h"
#include "decoding/ctc_greedy.h"
#include "decoding/phrase_boosting.h"
#include "model/family.h"
#include "support.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace transcribe;

namespace {

const test::Fixture & hotwords_fixture() {
    static const test::Fixture f(test::parakeet_fixture().path("../parakeet-hotwords"));
    return f;
}

nlohmann::json read_json(const std::string & rel) {
    std::ifstream f(hotwords_fixture().path(rel));
    return nlohmann::json::parse(f);
}

constexpr int64_t kFrameMs = 80;

} // namespace

// Every walk of tree.json: the phrases tokenized by our SentencePiece (NeMo: text_to_ids), the tree built
// with the case's options, followed along the path; each token's score after it is NeMo's (float32 sums
// of the same float32 weights: to 1e-6).
TEST(PhraseBoostingGolden, Tree_scores_along_every_path_are_nemos) {
    auto model = test::load("parakeet-tdt-tiny-f32.gguf");
    const Tokenizer & tok = model->tokenizer();
    const nlohmann::json tree = read_json("golden/tree.json");
    const auto phrases = tree["phrases"].get<std::vector<std::string>>();
    const auto ids     = tree["token_ids"].get<std::vector<std::vector<int32_t>>>();
    for (size_t i = 0; i < phrases.size(); ++i) {
        EXPECT_EQ(tok.encode(phrases[i]), ids[i]) << phrases[i];
    }
    const int vocab = tok.n_vocab();
    for (const auto & [name, c] : tree["cases"].items()) {
        PhraseBoostingOptions o;
        const nlohmann::json & opt = c["options"];
        o.context_score    = opt.value("context_score", 1.0f);
        o.depth_scaling    = opt.value("depth_scaling", 1.0f);
        o.unk_score        = opt.value("unk_score", 0.0f);
        o.score_per_phrase = opt.value("score_per_phrase", 0.0f);
        o.uniform_weights  = opt.value("uniform_weights", false);
        const PhraseBoostingTree t = PhraseBoostingTree::from_text(phrases, tok, vocab, o);
        std::vector<float>   scores;
        std::vector<int32_t> next;
        for (const auto & walk : c["walks"]) {
            int32_t state = PhraseBoostingTree::kStart;
            for (int32_t token : walk["path"].get<std::vector<int32_t>>()) {
                t.advance(state, scores, next);
                state = next[size_t(token)];
            }
            t.advance(state, scores, next);
            const auto want = walk["scores"].get<std::vector<float>>();
            ASSERT_EQ(scores.size(), want.size());
            EXPECT_LE(test::max_abs_diff(scores, want), 1e-6f) << name << " after " << walk["path"].dump();
        }
    }
}

// Boosted greedy decoding: each model's cases (phrases, weight) on every clip give NeMo's text, ids
// (transducers: and frames), words and segments. Every decision leads by at least the case's min_margin
// (MANIFEST: 0.0136 for TDT, 0.089 or more for RNNT and CTC), ten times the TDT joint's tolerance or more.
TEST(PhraseBoostingGolden, Boosted_greedy_decoding_of_tdt_rnnt_and_ctc_is_nemos) {
    const nlohmann::json & manifest = hotwords_fixture().manifest();
    int cases = 0, changed = 0;
    for (const auto & [key, info] : manifest["decoding"].items()) {
        const std::string model_name = key.substr(0, key.find('/'));
        auto model = test::load(model_name + "-f32.gguf");
        const test::Fixture fx(test::parakeet_fixture().path("../" + model_name));
        const bool ctc = model_name == "parakeet-ctc-tiny";
        for (const char * clip : {"jfk", "jfk_div8", "tone_noise_3s"}) {
            const nlohmann::json want = read_json("golden/" + key + "/" + clip + ".json");
            RunOptions ro;
            ro.hotwords       = want["phrases"].get<std::vector<std::string>>();
            ro.hotword_weight = want["alpha"].get<float>();
            const Transcript t = test::run_clip(*model, fx, clip, ro).transcript;
            EXPECT_EQ(t.text, want["text"].get<std::string>()) << key << " " << clip;
            if (!ctc) {
                EXPECT_EQ(t.tokens, want["y_sequence"].get<std::vector<int32_t>>()) << key << " " << clip;
                EXPECT_EQ(t.token_frames, want["timestep"].get<std::vector<int32_t>>()) << key << " " << clip;
            }
            EXPECT_EQ(test::word_spans(t), test::nemo_offset_spans(want["word"], "word", kFrameMs)) << key << " " << clip;
            EXPECT_EQ(test::segment_spans(t), test::nemo_offset_spans(want["segment"], "segment", kFrameMs)) << key << " " << clip;
            // The same clip without hotwords: the fixture's own goldens; the case changed it or not.
            changed += test::run_clip(*model, fx, clip).transcript.text != t.text;
        }
        ++cases;
    }
    EXPECT_EQ(cases, 5);
    EXPECT_GE(changed, 2 * cases); // every case changes at least two clips' transcripts (MANIFEST clips_changed)
}

// ---- By hand ----

namespace {
// A 4-token vocabulary (blank = 4), the phrase [1, 2] boosted: from the start token 1 scores
// context_score 1; after 1, token 2 scores 1 + log 2 and any other token falls back (-1).
PhraseBoostingTree small_tree() { return PhraseBoostingTree({{1, 2}}, {"ab"}, 4); }
} // namespace

TEST(PhraseBoosting, Pick_adds_weight_times_boost_and_ties_go_to_the_lowest_id) {
    const PhraseBoostingTree tree = small_tree();
    PhraseBoost boost(tree, 0.5f);
    const float logits[5] = {1.0f, 0.6f, 0.9f, 1.0f, 9.0f}; // the blank's logit is never a choice
    EXPECT_EQ(boost.pick(logits), 1);                      // 0.6 + 0.5 x 1 = 1.1 beats 1.0
    EXPECT_EQ(boost.pick(logits, 1), 0);                   // 1 excluded: 0 and 3 tie at 1.0, the lower wins
    boost.emit(1);
    EXPECT_EQ(boost.pick(logits), 2); // 0.9 + 0.5 x (1 + log 2) = 1.75
    boost.emit(0);                    // off the phrase: back to the start
    EXPECT_EQ(boost.pick(logits), 1);
    PhraseBoost off(tree, 0.0f);
    EXPECT_EQ(off.pick(logits), 0); // weight 0: the acoustic argmax among tokens
}

// NeMo's greedy_batch CTC with fusion: a frame whose argmax is the blank or the previous frame's id is
// left alone; another takes the boosted best, never the previous frame's id; the tree follows what was
// chosen and folding runs on the chosen ids.
TEST(PhraseBoosting, Ctc_boosts_only_new_non_blank_frames_and_never_repeats_the_previous_id) {
    const PhraseBoostingTree tree = small_tree();
    // From the start: 1 scores 1, the others 0. After 1: 2 scores 1 + log 2, 1 scores 0, the others -1.
    const std::vector<float> logits = {
        1.0f, 0.8f, 0.0f,  0.0f, 0.0f, // argmax 0, new: boosted 0 1.0 | 1 1.8 -> 1
        1.0f, 0.9f, -2.0f, 0.0f, 0.0f, // argmax 0, new: 1 (0.9, the best) is the previous id, excluded -> 0
        0.0f, 0.0f, 0.0f,  0.0f, 2.0f, // the blank
        0.0f, 0.5f, 0.0f,  0.8f, 0.0f, // argmax 3, new: 1 (0.5 + 1) beats 3 (0.8) -> 1
        0.0f, 0.9f, 0.0f,  1.0f, 0.0f, // argmax 3, new: after 1, 2 (0 + 1.69) beats 3 (1 - 1) -> 2
        0.0f, 0.0f, 2.0f,  0.0f, 0.0f, // argmax 2 = the previous id: left alone, folded away
    };
    PhraseBoost boost(tree, 1.0f);
    std::vector<int32_t> ids;
    for (const TimedToken & t : ctc_greedy(logits.data(), 6, 5, 4, &boost)) {
        ids.push_back(t.id);
    }
    EXPECT_EQ(ids, (std::vector<int32_t> {1, 0, 1, 2}));
    std::vector<int32_t> plain;
    for (const TimedToken & t : ctc_greedy(logits.data(), 6, 5, 4)) {
        plain.push_back(t.id);
    }
    EXPECT_EQ(plain, (std::vector<int32_t> {0, 3, 2}));
}

// Blank and repeated phrases are dropped (NeMo keys phrases by text and would divide by an empty
// phrase's length); a model that takes no hotwords and a negative weight are clear errors.
TEST(PhraseBoosting, Blank_and_repeated_phrases_are_skipped_and_bad_requests_are_errors) {
    auto model = test::load("parakeet-tdt-tiny-f32.gguf");
    const Tokenizer & tok = model->tokenizer();
    const PhraseBoostingTree once  = PhraseBoostingTree::from_text({"license"}, tok, tok.n_vocab());
    const PhraseBoostingTree twice = PhraseBoostingTree::from_text({" license ", "", "license", "  "}, tok, tok.n_vocab());
    EXPECT_EQ(once.n_states(), twice.n_states());
    EXPECT_TRUE(model->info().hotwords);
    auto canary = test::load("canary-qwen-tiny-f32.gguf");
    EXPECT_FALSE(canary->info().hotwords);
}
