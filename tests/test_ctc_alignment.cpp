// CTC forced alignment against NeMo Forced Aligner (tests/fixtures/parakeet-ctc-alignment: NeMo's
// get_utt_obj, viterbi_decoding and add_t_start_end_to_utt_obj on parakeet-ctc-tiny's golden
// log-probabilities): the chain, every frame's state, every segment's and word's frames; by hand: the
// skip rule and ties, the unknown mark's splitting.
#include "core/npy.h"
#include "decoding/ctc_forced_alignment.h"
#include "model/family.h"
#include "support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

using namespace transcribe;

namespace {
const test::Fixture & alignment_fixture() {
    static const test::Fixture f(test::parakeet_ctc_fixture().path("../parakeet-ctc-alignment"));
    return f;
}
nlohmann::json golden_case(const std::string & name) {
    std::ifstream f(alignment_fixture().path("golden/" + name + ".json"));
    return nlohmann::json::parse(f);
}
// NeMo's seconds (frame x 0.08) back to frames; -1 stays -1.
int64_t frames_of(double seconds) { return seconds < 0 ? -1 : int64_t(std::llround(seconds / 0.08)); }
} // namespace

// Every case of the fixture from NeMo's own log-probabilities: our chain is NeMo's token_ids_with_blanks,
// our Viterbi path NeMo's alignment (exactly: the same float32 sums), our segments and words NeMo's
// texts and frames.
TEST(CtcAlignmentGolden, Chain_path_segments_and_words_are_nfas) {
    auto model = test::load("parakeet-ctc-tiny-f32.gguf");
    const Tokenizer & tok = model->tokenizer();
    const int32_t blank = tok.n_vocab();
    int n_cases = 0;
    for (const auto & [name, info] : alignment_fixture().manifest()["cases"].items()) {
        const nlohmann::json g = golden_case(name);
        const NpyArray lp = test::parakeet_ctc_fixture().golden(g["clip"].get<std::string>(), "log_probs.npy");
        const int T = int(lp.shape[0]), V = int(lp.shape[1]);
        const std::string text = g["text"].get<std::string>();
        const AlignmentChain chain = alignment_chain(text, tok, blank, T);
        EXPECT_EQ(chain.states, g["token_ids_with_blanks"].get<std::vector<int32_t>>()) << name;
        EXPECT_EQ(ctc_viterbi(lp.f32.data(), T, V, chain.states), g["alignment"].get<std::vector<int>>()) << name;
        std::vector<std::tuple<std::string, int64_t, int64_t>> got_s, want_s, got_w, want_w;
        for (const AlignedSegment & s : ctc_forced_alignment(lp.f32.data(), T, V, text, tok, blank)) {
            got_s.emplace_back(s.span.text, s.span.first_frame, s.span.end_frame);
            for (const AlignedSpan & w : s.words) {
                got_w.emplace_back(w.text, w.first_frame, w.end_frame);
            }
        }
        for (const auto & s : g["segments"]) {
            want_s.emplace_back(s["text"].get<std::string>(), frames_of(s["t_start"]), frames_of(s["t_end"]));
        }
        for (const auto & w : g["words"]) {
            want_w.emplace_back(w["text"].get<std::string>(), frames_of(w["t_start"]), frames_of(w["t_end"]));
        }
        EXPECT_EQ(got_s, want_s) << name;
        EXPECT_EQ(got_w, want_w) << name;
        ++n_cases;
    }
    EXPECT_EQ(n_cases, 8);
}

// By hand, 3 classes (a = 0, b = 1, blank = 2). The chain of "a a" is _ a _ a _: the blank between the
// two a's cannot be skipped, so with three frames that favour a the path is a _ a (never a a).
TEST(CtcAlignment, A_repeated_token_keeps_its_blank_and_ties_go_to_the_earlier_move) {
    const std::vector<int32_t> aa = {2, 0, 2, 0, 2};
    const float l = std::log(0.8f), s = std::log(0.1f);
    const std::vector<float> favour_a = {l, s, s, l, s, s, l, s, s};
    EXPECT_EQ(ctc_viterbi(favour_a.data(), 3, 3, aa), (std::vector<int> {1, 2, 3}));
    // _ a _ b _ (different tokens): b may follow a directly, skipping the blank.
    const std::vector<int32_t> ab = {2, 0, 2, 1, 2};
    const std::vector<float> a_then_b = {l, s, s, s, l, s};
    EXPECT_EQ(ctc_viterbi(a_then_b.data(), 2, 3, ab), (std::vector<int> {1, 3}));
    // All equal (3 frames): b (state 3) is first reached at frame 1 by the skip, its only finite move;
    // at frame 2 staying ties stepping from the blank and the earlier candidate (stay) wins; at the end b
    // ties the final blank and the first of the last two states wins. NeMo's path: a b b.
    const std::vector<float> flat(9, std::log(1.0f / 3));
    EXPECT_EQ(ctc_viterbi(flat.data(), 3, 3, ab), (std::vector<int> {1, 3, 3}));
}

namespace {
// A hand-made tokenizer: a word starts with the piece 3 ("▁", as SentencePiece's do), then a = 0, b = 1,
// anything else the unknown id 2, whose text is UNK_TEXT.
class LetterTokenizer : public Tokenizer {
public:
    explicit LetterTokenizer(std::string unk_text) : unk_text_(std::move(unk_text)) {}
    std::vector<int32_t> encode(const std::string & text) const override {
        std::vector<int32_t> ids;
        bool word_start = true;
        for (char ch : text) {
            if (ch == ' ') {
                word_start = true;
                continue;
            }
            if (word_start) {
                ids.push_back(3);
                word_start = false;
            }
            ids.push_back(ch == 'a' ? 0 : ch == 'b' ? 1 : 2);
        }
        return ids;
    }
    std::string decode_bytes(const std::vector<int32_t> & ids) const override {
        std::string s;
        for (int32_t id : ids) {
            s += id == 0 ? "a" : id == 1 ? "b" : id == 3 ? " " : unk_text_;
        }
        return s;
    }
    std::string piece(int32_t id) const override { return decode_bytes({id}); }
    int  n_vocab() const override { return 4; }
    bool is_control(int32_t) const override { return false; }
    int32_t unknown_id() const override { return 2; }

private:
    std::string unk_text_;
};
} // namespace

// By hand, from get_utt_obj's code: UNK_WORD is the unknown id's text, stripped ("?" here). The word "?b"
// is split at it: tokens("") + [unk] + tokens("b") = 2 3 1 (not 3 2 1, its plain tokenization); the segment
// "a ?b" counts tokens("a") + tokens("b") + one per mark = 5 tokens, so it ends at state 1 + 5 * 2 - 2 = 9.
// An unknown id whose text is empty marks nothing (Python's split("") would raise): plain tokenization.
TEST(CtcAlignment, The_unknown_mark_splits_words_as_get_utt_obj_does) {
    const int32_t blank = 4;
    const AlignmentChain marked = alignment_chain("a ?b", LetterTokenizer(" ? "), blank, 20);
    EXPECT_EQ(marked.states, (std::vector<int32_t> {4, 3, 4, 0, 4, 2, 4, 3, 4, 1, 4}));
    ASSERT_EQ(marked.segments.size(), 1u);
    EXPECT_EQ(marked.segments[0].span.s_start, 1);
    EXPECT_EQ(marked.segments[0].span.s_end, 9);
    ASSERT_EQ(marked.segments[0].words.size(), 2u);
    EXPECT_EQ(marked.segments[0].words[1].text, "?b");
    EXPECT_EQ(marked.segments[0].words[1].s_start, 5);
    EXPECT_EQ(marked.segments[0].words[1].s_end, 9);
    const AlignmentChain unmarked = alignment_chain("a ?b", LetterTokenizer(""), blank, 20);
    EXPECT_EQ(unmarked.states, (std::vector<int32_t> {4, 3, 4, 0, 4, 3, 4, 2, 4, 1, 4}));
    EXPECT_EQ(unmarked.segments[0].span.s_end, 9);
}
