// Canary-Qwen's text prompt (transcribe_run_params.prompt, OpenAI's `prompt`): the context goes into the
// chat prompt's user turn ahead of the instruction, joined with a space as NeMo's SALM joins a
// conversation's consecutive user turns, and the turn is tokenized as one text (the qwen template's
// user turn: "<|im_start|>user\n" + message + "<|im_end|>\n"). Read from the TRANSCRIBE_DUMP_DIR's
// prompt_ids.json, which without a prompt must be the fixture's NeMo prompt.
#include "c_api_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

constexpr int32_t kImStart = 151644, kImEnd = 151645, kAudio = 151669, kNewline = 198, kAssistant = 77091;

class CanaryQwenPrompt : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        model_ = test::load_cpu("canary-qwen-tiny-f32.gguf");
        ASSERT_NE(model_, nullptr);
        jfk_ = test::read_wav_16k("jfk_0p7s");
    }
    static void TearDownTestSuite() { transcribe_model_free(model_); }

    // The prompt ids a run with PROMPT (NULL: none) decoded after; STATUS: the run's.
    static std::vector<int32_t> prompt_ids(const char * prompt, transcribe_status * status = nullptr,
                                           size_t max_new = 2) {
        // A folder of this process's own: ctest runs each test as a process, several at once.
        const std::string dir = ::testing::TempDir() + "canary_qwen_prompt_" + std::to_string(getpid());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        setenv("TRANSCRIBE_DUMP_DIR", dir.c_str(), 1);
        transcribe_session_params sp = transcribe_session_params_init();
        sp.n_threads = 2;
        transcribe_session * s = nullptr;
        EXPECT_EQ(transcribe_session_create(model_, &sp, &s), TRANSCRIBE_OK);
        transcribe_run_params rp = transcribe_run_params_init();
        rp.max_new_tokens = int(max_new);
        rp.prompt         = prompt;
        transcribe_result * r = nullptr;
        const transcribe_status st = transcribe_run(s, jfk_.data(), jfk_.size(), &rp, &r);
        if (status) {
            *status = st;
        }
        transcribe_result_free(r);
        transcribe_session_free(s);
        unsetenv("TRANSCRIBE_DUMP_DIR");
        std::vector<int32_t> ids;
        if (std::ifstream f(dir + "/prompt_ids.json"); f) {
            ids = nlohmann::json::parse(f).get<std::vector<int32_t>>();
        }
        std::filesystem::remove_all(dir);
        return ids;
    }
    static std::vector<int32_t> tokenize(const std::string & text) {
        std::vector<int32_t> ids(256);
        int n = 0;
        EXPECT_EQ(transcribe_tokenize(model_, text.c_str(), ids.data(), int(ids.size()), &n), TRANSCRIBE_OK);
        ids.resize(size_t(n));
        return ids;
    }
    // <|im_start|> + the user turn's text tokenized whole + the audio + the rest of the template.
    static std::vector<int32_t> template_with(const std::string & user_text) {
        std::vector<int32_t> want {kImStart};
        for (int32_t id : tokenize(user_text)) {
            want.push_back(id);
        }
        for (int32_t id : {kAudio, kImEnd, kNewline, kImStart, kAssistant, kNewline}) {
            want.push_back(id);
        }
        return want;
    }

    static transcribe_model * model_;
    static std::vector<float> jfk_;
};
transcribe_model * CanaryQwenPrompt::model_ = nullptr;
std::vector<float> CanaryQwenPrompt::jfk_;

} // namespace

TEST_F(CanaryQwenPrompt, Without_one_the_prompt_is_nemos) {
    std::ifstream f(test::fixture("golden/jfk/prompt_ids.json"));
    const auto nemo = nlohmann::json::parse(f).get<std::vector<int32_t>>();
    EXPECT_EQ(prompt_ids(nullptr), nemo);
    EXPECT_EQ(prompt_ids(""), nemo) << "an empty prompt is none";
}

TEST_F(CanaryQwenPrompt, The_context_goes_before_the_instruction_in_one_user_turn) {
    transcribe_model_info info;
    ASSERT_EQ(transcribe_model_get_info(model_, &info), TRANSCRIBE_OK);
    EXPECT_TRUE(info.text_prompt);

    const std::vector<int32_t> got = prompt_ids("Names: Kennedy");
    EXPECT_EQ(got, template_with("user\nNames: Kennedy Transcribe the following: "));
    // One text, not pieces glued: after a space the instruction's first word is " Trans" + "cribe" (4058
    // 3114), where at the start of the message it is "Trans" + "cribe" (3167 3114).
    const std::vector<int32_t> glued = [] {
        std::vector<int32_t> v {kImStart, 872, kNewline};
        for (int32_t id : tokenize("Names: Kennedy ")) {
            v.push_back(id);
        }
        for (int32_t id : {3167, 3114, 279, 2701, 25, 220, kAudio, kImEnd, kNewline, kImStart, kAssistant, kNewline}) {
            v.push_back(id);
        }
        return v;
    }();
    EXPECT_NE(got, glued);
    EXPECT_NE(std::find(got.begin(), got.end(), 4058), got.end());
    EXPECT_EQ(std::find(got.begin(), got.end(), 3167), got.end());
}

TEST_F(CanaryQwenPrompt, Text_is_normalized_to_nfc_and_never_parsed_for_special_tokens) {
    // "é" as e + COMBINING ACUTE ACCENT becomes U+00E9, as the Qwen tokenizer normalizes.
    EXPECT_EQ(prompt_ids("Jose\xCC\x81"), prompt_ids("Jos\xC3\xA9"));
    EXPECT_NE(prompt_ids("Jose\xCC\x81"), template_with("user\nJose\xCC\x81 Transcribe the following: "));
    // A chat marker in the text stays text: the only <|im_end|> ends the turn.
    const std::vector<int32_t> got = prompt_ids("<|im_end|>");
    EXPECT_EQ(std::count(got.begin(), got.end(), kImEnd), 1);
    EXPECT_EQ(got, template_with("user\n<|im_end|> Transcribe the following: "));
}

TEST_F(CanaryQwenPrompt, Bad_prompts_are_refused_before_anything_runs) {
    transcribe_status st = TRANSCRIBE_OK;
    EXPECT_TRUE(prompt_ids("caf\xC3", &st).empty());
    EXPECT_EQ(st, TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_NE(std::string(transcribe_last_error()).find("prompt is not UTF-8"), std::string::npos) << transcribe_last_error();
    // The context counts against the decoder's context: 0.7 s is 9 audio rows + 15 prompt ids + 256 new.
    std::string long_prompt;
    for (int i = 0; i < 800; ++i) {
        long_prompt += " word";
    }
    EXPECT_TRUE(prompt_ids(long_prompt.c_str(), &st, 256).empty());
    EXPECT_EQ(st, TRANSCRIBE_ERR_INPUT_TOO_LONG);
}

TEST(CanaryQwenPromptOtherModels, A_model_without_a_text_prompt_refuses_one) {
    transcribe_model * m = test::load_cpu("parakeet-tdt-tiny-f32.gguf");
    ASSERT_NE(m, nullptr);
    transcribe_model_info info;
    ASSERT_EQ(transcribe_model_get_info(m, &info), TRANSCRIBE_OK);
    EXPECT_FALSE(info.text_prompt);
    transcribe_session_params sp = transcribe_session_params_init();
    transcribe_session * s = nullptr;
    ASSERT_EQ(transcribe_session_create(m, &sp, &s), TRANSCRIBE_OK);
    const std::vector<float> pcm = test::read_wav_16k("jfk_0p7s");
    transcribe_run_params rp = transcribe_run_params_init();
    rp.prompt = "Kennedy";
    transcribe_result * r = nullptr;
    EXPECT_EQ(transcribe_run(s, pcm.data(), pcm.size(), &rp, &r), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(transcribe_last_error()).find("takes no text prompt"), std::string::npos) << transcribe_last_error();
    transcribe_session_free(s);
    transcribe_model_free(m);
}
