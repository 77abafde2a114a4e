// parse_asr_output and detect_and_fix_repetitions (qwen_asr/inference/utils.py at QwenLM/Qwen3-ASR
// 7c6daf7) branch by branch: the tiny fixture's random weights never write "language X<asr_text>", so
// each branch has its case here. Expected values: the reference's own functions run on these inputs.
#include "families/qwen3_asr_output.h"

#include <gtest/gtest.h>

using namespace transcribe::qwen3_asr;
using Parsed = std::pair<std::string, std::string>;

TEST(Qwen3AsrOutput, Parses_every_branch_of_parse_asr_output) {
    EXPECT_EQ(parse_output("  hello world  "), Parsed("", "hello world"));                       // no tag: all text
    EXPECT_EQ(parse_output("language English<asr_text> Hello there. "), Parsed("English", "Hello there."));
    EXPECT_EQ(parse_output("language None<asr_text>"), Parsed("", ""));                          // silence
    EXPECT_EQ(parse_output("language none<asr_text> hi"), Parsed("", "hi"));                     // "none", text kept
    EXPECT_EQ(parse_output("foo\nlanguage chinese\n<asr_text>x"), Parsed("Chinese", "x"));       // a later line
    EXPECT_EQ(parse_output("meta only<asr_text> text"), Parsed("", "text"));                     // no language line
    EXPECT_EQ(parse_output("language \n language french<asr_text>t"), Parsed("French", "t"));    // "language" alone skipped
    EXPECT_EQ(parse_output("a<asr_text>b<asr_text>c"), Parsed("", "b<asr_text>c"));              // split at the first tag
    EXPECT_EQ(parse_output("\u3000 \n"), Parsed("", ""));                                        // Python's whitespace
    EXPECT_EQ(parse_output("LANGUAGE   japanese  <asr_text>\u3000こんにちは\u3000"), Parsed("Japanese", "こんにちは"));
    // A forced language: the output is all text, the language the one given.
    EXPECT_EQ(parse_output("language English<asr_text>abc", "German"), Parsed("German", "language English<asr_text>abc"));
    EXPECT_EQ(parse_output("", "German"), Parsed("", ""));
}

TEST(Qwen3AsrOutput, Fixes_repetitions_as_the_reference_does) {
    EXPECT_EQ(fix_repetitions(std::string(25, 'a') + "b"), "ab");
    EXPECT_EQ(fix_repetitions(std::string(20, 'q')), std::string(20, 'q')); // 20 is not more than 20
    EXPECT_EQ(fix_repetitions(std::string(21, 'q')), "q");
    std::string ab19, ab20, ab21, ab25, han, abc20, cd30;
    for (int i = 0; i < 19; ++i) ab19 += "ab";
    ab20 = ab19 + "ab";
    ab21 = ab20 + "ab";
    for (int i = 0; i < 25; ++i) ab25 += "ab";
    for (int i = 0; i < 22; ++i) han += "一二";
    for (int i = 0; i < 20; ++i) abc20 += "abcabc";
    for (int i = 0; i < 30; ++i) cd30 += "cd";
    EXPECT_EQ(fix_repetitions("x" + ab20 + "c"), "xabc");
    EXPECT_EQ(fix_repetitions(ab19 + "c"), ab19 + "c"); // 19 repeats: below the threshold
    EXPECT_EQ(fix_repetitions("xyz" + ab21), "xyzab");
    EXPECT_EQ(fix_repetitions(ab20), "ab");
    EXPECT_EQ(fix_repetitions(han + "三"), "一二三"); // by code point, not byte
    EXPECT_EQ(fix_repetitions(abc20 + "tail" + std::string(50, 'z')), "abctailz");
    EXPECT_EQ(fix_repetitions(ab25 + cd30), "abcd"); // the rest after a pattern is fixed too
}

TEST(Qwen3AsrOutput, Language_names_and_codes) {
    const std::vector<std::string> langs = {"Chinese", "English", "Cantonese", "Filipino"};
    EXPECT_EQ(normalize_language("  eNGLISH "), "English");
    EXPECT_EQ(language_name("english", langs), "English");
    EXPECT_EQ(language_name("EN", langs), "English");
    EXPECT_EQ(language_name("zh", langs), "Chinese");
    EXPECT_EQ(language_name("yue", langs), "Cantonese");
    EXPECT_EQ(language_name("tl", langs), "Filipino");
    EXPECT_EQ(language_name("de", langs), ""); // German, but not among these
    EXPECT_EQ(language_name("Klingon", langs), "");
}
