// NeMo's word and segment rules on hand-worked token sequences, and SentencePiece encoding against
// sentencepiece's own output, over the parakeet-tdt-tiny vocabulary.
#include "core/model_file.h"
#include "core/sentencepiece_tokenizer.h"
#include "core/subword_timestamps.h"
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
