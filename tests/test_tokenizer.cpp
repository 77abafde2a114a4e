// The tokenizer against the reference suite shipped with the ggml tree (models/ggml-vocab-qwen2.gguf
// with its .inp/.out vectors) and against the Canary-Qwen prompt ids of the spec.
#include "core/model_file.h"
#include "core/bpe_tokenizer.h"
#include "support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using transcribe::ModelFile;
using transcribe::BpeTokenizer;

namespace {

const std::string kVocab = std::string(LLAMA_DIR) + "/models/ggml-vocab-qwen2.gguf";

const BpeTokenizer & qwen2_vocab() {
    static const BpeTokenizer t = [] {
        ModelFile f(kVocab, {true});
        return BpeTokenizer::from_file(f);
    }();
    return t;
}

struct VocabCase {
    std::string          text;
    std::vector<int32_t> ids;
};

// Same framing as the suite's own reader: inputs separated by "\n__ggml_vocab_test__\n", one line of
// ids per input in the .out file.
std::vector<VocabCase> vocab_cases() {
    std::ifstream fi(kVocab + ".inp"), fo(kVocab + ".out");
    std::stringstream ss;
    ss << fi.rdbuf();
    const std::string raw = ss.str(), sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < raw.size();) {
        const size_t next = raw.find(sep, pos);
        if (next == std::string::npos) {
            inputs.push_back(raw.substr(pos));
            break;
        }
        inputs.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<VocabCase> cases;
    std::string line;
    for (size_t i = 0; std::getline(fo, line); ++i) {
        VocabCase c;
        c.text = i < inputs.size() ? inputs[i] : "";
        std::istringstream ls(line);
        for (int32_t id; ls >> id;) {
            c.ids.push_back(id);
        }
        cases.push_back(c);
    }
    EXPECT_EQ(cases.size(), inputs.size());
    return cases;
}

} // namespace

TEST(Tokenizer, Ggml_vocab_qwen2_suite_encodes_exactly) {
    const auto cases = vocab_cases();
    ASSERT_GE(cases.size(), 40u);
    int failures = 0;
    for (const auto & c : cases) {
        const auto ids = qwen2_vocab().encode(c.text);
        if (ids != c.ids) {
            ++failures;
            ADD_FAILURE() << "encode mismatch for input [" << c.text << "]";
        }
    }
    EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
}

TEST(Tokenizer, Ggml_vocab_qwen2_suite_round_trips) {
    for (const auto & c : vocab_cases()) {
        EXPECT_EQ(qwen2_vocab().decode(qwen2_vocab().encode(c.text)), c.text) << "input [" << c.text << "]";
    }
}

TEST(Tokenizer, Canary_prompt_text_matches_spec_ids) {
    const std::vector<int32_t> want = {872, 198, 3167, 3114, 279, 2701, 25, 220};
    EXPECT_EQ(qwen2_vocab().encode("user\nTranscribe the following: "), want);
}

TEST(Tokenizer, Converted_fixture_model_has_the_same_tokenizer) {
    ModelFile f(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    const BpeTokenizer t = BpeTokenizer::from_file(f);
    for (const auto & c : vocab_cases()) {
        EXPECT_EQ(t.encode(c.text), c.ids) << "input [" << c.text << "]";
    }
}

TEST(Tokenizer, Special_tokens_are_never_parsed_from_text) {
    ModelFile f(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    const BpeTokenizer t = BpeTokenizer::from_file(f);
    for (int32_t id : t.encode("<|im_end|><|audioplaceholder|>")) {
        EXPECT_LT(id, 151643);
    }
    EXPECT_TRUE(t.is_control(151669));
}

TEST(Tokenizer, Decode_drops_what_nemo_drops_and_keeps_other_added_tokens) {
    ModelFile f(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    const BpeTokenizer t = BpeTokenizer::from_file(f);
    const auto hello = t.encode(" hello");
    std::vector<int32_t> ids = {151644};
    ids.insert(ids.end(), hello.begin(), hello.end());
    ids.push_back(151669);
    ids.push_back(151645);
    ids.push_back(151643);
    EXPECT_EQ(t.decode(ids), "<|im_start|> hello");
}

TEST(Tokenizer, Golden_transcripts_decode_like_nemo) {
    ModelFile f(test::model("canary-qwen-tiny-bf16.gguf"), {true});
    const BpeTokenizer t = BpeTokenizer::from_file(f);
    for (const char * clip : test::kClips) {
        std::ifstream in(test::fixture(std::string("golden/") + clip + "/text.txt"), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        EXPECT_EQ(t.decode(test::golden_ids(clip)), ss.str()) << clip;
    }
}

TEST(Tokenizer, Invalid_utf8_becomes_replacement_characters) {
    EXPECT_EQ(transcribe::utf8_sanitize("a\xE2\x82z"), "a\xEF\xBF\xBDz");
    EXPECT_EQ(transcribe::utf8_sanitize("\xFF\xC3\xA9"), "\xEF\xBF\xBD\xC3\xA9");
    EXPECT_EQ(transcribe::utf8_sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // surrogate
}

// Found by fuzz_tokenizer: a run of stray UTF-8 continuation bytes made encode() throw. Any bytes now
// encode, and decode back to the same bytes (byte-level BPE is lossless).
TEST(Tokenizer, Any_bytes_round_trip) {
    const std::string dir = std::string(FUZZ_REGRESSIONS) + "/tokenizer";
    std::vector<std::string> inputs = {std::string("\xd0\xbc\xbc\xbc\xbc", 5), std::string("a\xff\xfe b\xc3", 6),
                                       std::string("\xf4\x90\x80\x80 x", 6), std::string("\xed\xa0\x80", 3),
                                       std::string("ierd 8 \xc0\xbd mohs", 14)};
    for (const auto & entry : std::filesystem::directory_iterator(dir)) {
        std::ifstream f(entry.path(), std::ios::binary);
        inputs.emplace_back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    }
    for (const auto & s : inputs) {
        const auto ids = qwen2_vocab().encode(s);
        EXPECT_EQ(qwen2_vocab().decode_bytes(ids), s);
        EXPECT_EQ(qwen2_vocab().decode(ids), transcribe::utf8_sanitize(s));
    }
}
