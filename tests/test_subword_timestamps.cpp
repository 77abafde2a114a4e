// NeMo's word and segment rules on hand-worked token sequences, and SentencePiece encoding against
// sentencepiece's own output, over the parakeet-tdt-tiny vocabulary.
#include "core/model_file.h"
#include "core/sentencepiece_tokenizer.h"
#include "decoding/subword_timestamps.h"
#include "support.h"

#include <gtest/gtest.h>

using namespace transcribe;

namespace {

const SentencePieceTokenizer & vocab() {
    static const SentencePieceTokenizer t = [] {
        ModelFile f(test::model("parakeet-tdt-tiny-f32.gguf"), WeightOptions {});
        return SentencePieceTokenizer(f);
    }();
    return t;
}

int32_t id(const std::string & piece) {
    for (int32_t i = 0; i < vocab().n_vocab(); ++i) {
        if (vocab().piece(i) == piece) {
            return i;
        }
    }
    ADD_FAILURE() << "no piece " << piece;
    return 0;
}

const SubwordRules kRules = {{"'", ",", "."}, {".", "?", "!"}};

std::vector<TimedToken> timed(const std::vector<std::pair<std::string, std::pair<int, int>>> & pieces) {
    std::vector<TimedToken> out;
    for (const auto & p : pieces) {
        out.push_back({id(p.first), p.second.first, p.second.second});
    }
    return out;
}

} // namespace

TEST(SentencePiece, Encodes_as_sentencepiece_does) {
    // Expected ids from sentencepiece 0.1.97 on the fixture's tokenizer.model.
    EXPECT_EQ(vocab().encode("the license of this work"), (std::vector<int32_t> {7, 50, 20, 63, 68}));
    EXPECT_EQ(vocab().encode("copy, this."), (std::vector<int32_t> {82, 119, 63, 121}));
    EXPECT_EQ(vocab().decode({82, 119, 63, 121}), "copy, this.");
    EXPECT_EQ(vocab().decode({0}), " \xE2\x81\x87 ");
    EXPECT_EQ(vocab().decode_bytes({20}), " of"); // a word-initial piece keeps its space in decode_bytes
}

TEST(SubwordTimestamps, Punctuation_joins_the_word_before_and_takes_its_end) {
    // "▁su y ' ▁of ." : the apostrophe (frames 9-12) and the full stop are refined to the previous end.
    std::vector<TimedToken> t = timed({{"\xE2\x96\x81su", {1, 2}}, {"y", {3, 5}}, {"'", {9, 12}},
                                       {"\xE2\x96\x81of", {14, 15}}, {".", {20, 22}}});
    refine_punctuation_times(t, vocab(), kRules);
    EXPECT_EQ(t[2].start, 5);
    EXPECT_EQ(t[2].end, 5);
    EXPECT_EQ(t[4].start, 15);
    const std::vector<TimedText> w = word_offsets(t, vocab(), kRules);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(w[0].text, "suy'");
    EXPECT_EQ(w[0].start, 1);
    EXPECT_EQ(w[0].end, 5);
    EXPECT_EQ(w[1].text, "of.");
    EXPECT_EQ(w[1].end, 15);
}

TEST(SubwordTimestamps, A_word_ending_in_a_separator_ends_its_segment) {
    std::vector<TimedToken> t = timed({{"\xE2\x96\x81su", {0, 1}}, {".", {2, 3}}, {"\xE2\x96\x81or", {5, 7}},
                                       {"\xE2\x96\x81y", {8, 9}}, {"\xE2\x96\x81w", {11, 13}}, {".", {13, 13}}});
    refine_punctuation_times(t, vocab(), kRules);
    const std::vector<TimedText> w = word_offsets(t, vocab(), kRules);
    const std::vector<TimedText> s = segment_offsets(w, kRules);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].text, "su.");
    EXPECT_EQ(s[0].start, 0);
    EXPECT_EQ(s[0].end, 1);
    EXPECT_EQ(s[1].text, "or y w.");
    EXPECT_EQ(s[1].start, 5);
    EXPECT_EQ(s[1].end, 13);
}

TEST(SubwordTimestamps, Leading_continuation_pieces_form_the_first_word) {
    // Like the fixture's jfk: the transcript starts with pieces that are not word-initial.
    const std::vector<TimedToken> t = timed({{"tri", {0, 2}}, {"er", {2, 3}}, {"\xE2\x96\x81w", {5, 6}}});
    const std::vector<TimedText> w = word_offsets(t, vocab(), kRules);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(w[0].text, "trier");
    EXPECT_EQ(w[0].start, 0);
    EXPECT_EQ(w[0].end, 3);
    EXPECT_EQ(w[1].text, "w");
}

TEST(SubwordTimestamps, One_space_before_punctuation_is_stripped_from_the_transcript) {
    EXPECT_EQ(strip_space_before_punctuation("a , b  . c.", kRules), "a, b . c.");
}

// ---- The rules' branches the fixture's vocabulary does not reach, on a vocabulary of our own ----

namespace {

// SentencePiece-like pieces ("\xE2\x96\x81" starts a word), decoded as SentencePiece decodes them.
class PieceVocab final : public Tokenizer {
public:
    explicit PieceVocab(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
    std::vector<int32_t> encode(const std::string &) const override { return {}; }
    std::string decode_bytes(const std::vector<int32_t> & ids) const override {
        std::string s;
        for (int32_t i : ids) {
            const std::string & p = pieces_[size_t(i)];
            s += p.rfind("\xE2\x96\x81", 0) == 0 ? " " + p.substr(3) : p;
        }
        return s;
    }
    std::string decode(const std::vector<int32_t> & ids) const override {
        const std::string s = decode_bytes(ids);
        return s.empty() || s[0] != ' ' ? s : s.substr(1);
    }
    std::string piece(int32_t id) const override { return pieces_[size_t(id)]; }
    int  n_vocab() const override { return int(pieces_.size()); }
    bool is_control(int32_t) const override { return false; }

private:
    std::vector<std::string> pieces_;
};

} // namespace

// NeMo's _refine_timestamps_tdt tests offset['char'][0], which holds the token's whole decoded text: a
// piece that only starts with a mark keeps its own frames (a check that looked at the first character
// moved "'s" and "--" onto the previous end, 160 ms off on a real clip).
TEST(SubwordTimestamps, Only_a_token_that_is_a_mark_takes_the_previous_end) {
    const PieceVocab v({"\xE2\x96\x81he", "'s", "\xE2\x96\x81go", "--", "\xE2\x96\x81x", ".\"", ",", "\xE2\x96\x81."});
    const SubwordRules rules = {{"'", ",", ".", "-", "\""}, {".", "?", "!"}};
    std::vector<TimedToken> t = {{0, 1, 2}, {1, 4, 6}, {2, 8, 9}, {3, 11, 13}, {4, 15, 16}, {5, 18, 19}, {6, 21, 22},
                                 {7, 24, 25}};
    refine_punctuation_times(t, v, rules);
    EXPECT_EQ(std::make_pair(t[1].start, t[1].end), std::make_pair(int64_t(4), int64_t(6)));   // 's
    EXPECT_EQ(std::make_pair(t[3].start, t[3].end), std::make_pair(int64_t(11), int64_t(13))); // --
    EXPECT_EQ(std::make_pair(t[5].start, t[5].end), std::make_pair(int64_t(18), int64_t(19))); // ."
    EXPECT_EQ(std::make_pair(t[6].start, t[6].end), std::make_pair(int64_t(19), int64_t(19))); // , : the mark itself
    EXPECT_EQ(std::make_pair(t[7].start, t[7].end), std::make_pair(int64_t(19), int64_t(19))); // ▁. decodes to "."
    const std::vector<TimedText> w = word_offsets(t, v, rules);
    ASSERT_EQ(w.size(), 3u);
    // "'s", "--" and ".\"" are not marks to NeMo's word rule either: they continue the word before them;
    // "," and "▁." are, and join the word being built (the piece's space decoded with it).
    EXPECT_EQ(w[0].text, "he's");
    EXPECT_EQ(std::make_pair(w[0].start, w[0].end), std::make_pair(int64_t(1), int64_t(6)));
    EXPECT_EQ(w[1].text, "go--");
    EXPECT_EQ(std::make_pair(w[1].start, w[1].end), std::make_pair(int64_t(8), int64_t(13)));
    EXPECT_EQ(w[2].text, "x.\", .");
    EXPECT_EQ(std::make_pair(w[2].start, w[2].end), std::make_pair(int64_t(15), int64_t(19)));
}

// get_segment_offsets looks at word[-1], the last character (not byte) of the word.
TEST(SubwordTimestamps, A_multibyte_separator_ends_a_segment_as_the_last_character) {
    const SubwordRules rules = {{}, {"\xE3\x80\x82", "?"}}; // 。
    const std::vector<TimedText> words = {{"ni", 0, 1}, {"hao\xE3\x80\x82", 2, 3}, {"x", 5, 6}, {"\xE3\x80\x82", 7, 7}, {"y", 9, 9}};
    const std::vector<TimedText> s = segment_offsets(words, rules);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].text, "ni hao\xE3\x80\x82");
    EXPECT_EQ(std::make_pair(s[0].start, s[0].end), std::make_pair(int64_t(0), int64_t(3)));
    EXPECT_EQ(s[1].text, "x \xE3\x80\x82");
    EXPECT_EQ(s[2].text, "y");
    // A word ending in the separator's last byte only is not one.
    const std::vector<TimedText> other = {{"a\xE4\x80\x82", 0, 1}, {"b", 2, 3}};
    EXPECT_EQ(segment_offsets(other, rules).size(), 1u);
}

// With segment_gap_threshold NeMo cuts at gaps, and once a segment holds a word it does not look at
// separators (its elif): "q." ends the first segment (it comes to an empty one), "b." and "e." end none.
TEST(SubwordTimestamps, A_gap_threshold_cuts_at_gaps_and_separators_only_end_empty_segments) {
    SubwordRules rules = {{}, {".", "?", "!"}};
    rules.segment_gap_frames = 5;
    const std::vector<TimedText> words = {{"q.", 0, 1},  {"a", 2, 3},   {"b.", 4, 5}, {"c", 6, 7},
                                          {"d", 14, 15}, {"e.", 16, 17}, {"f", 18, 19}};
    const std::vector<TimedText> s = segment_offsets(words, rules);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].text, "q.");
    EXPECT_EQ(std::make_pair(s[0].start, s[0].end), std::make_pair(int64_t(0), int64_t(1)));
    EXPECT_EQ(s[1].text, "a b. c"); // the gap 14 - 7 = 7 >= 5 before d ends it
    EXPECT_EQ(std::make_pair(s[1].start, s[1].end), std::make_pair(int64_t(2), int64_t(7)));
    EXPECT_EQ(s[2].text, "d e. f");
    EXPECT_EQ(std::make_pair(s[2].start, s[2].end), std::make_pair(int64_t(14), int64_t(19)));
    EXPECT_EQ(std::make_pair(s[2].first, s[2].count), std::make_pair(size_t(4), size_t(3)));
    rules.segment_gap_frames = 8; // 7 frames is no longer a gap: one segment after q.
    EXPECT_EQ(segment_offsets(words, rules).size(), 2u);
}

// NeMo strips with re.sub(r'(\s)(marks)', r'\2', text): one whitespace character as Python's \s sees it,
// Unicode spaces and the separators 0x1C-0x1F included.
TEST(SubwordTimestamps, Any_whitespace_character_before_a_mark_is_stripped_once) {
    const SubwordRules rules = {{",", ".", "\xC2\xBF"}, {}}; // , . ¿
    EXPECT_EQ(strip_space_before_punctuation("a\xE3\x80\x80, b\x1c. c\xC2\xA0,  .", rules), "a, b. c, ."); // U+3000, U+00A0
    EXPECT_EQ(strip_space_before_punctuation("x \xC2\xBFy", rules), "x\xC2\xBFy");
    EXPECT_EQ(strip_space_before_punctuation("x\xE2\x80\x8B,", rules), "x\xE2\x80\x8B,"); // U+200B is not \s
}
