// The bad-input table: every malformed model or audio input yields its status and a message that
// names the cause; nothing crashes.
#include "transcribe.h"

#include "support.h"

#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <functional>

namespace {

const std::string kModel = test::model("canary-qwen-tiny-bf16.gguf");

// Rewrites the test model through ggml's own GGUF writer, letting `edit` change metadata and tensors.
std::string rewrite_model(const std::string & name,
                          const std::function<ggml_tensor *(ggml_context *, ggml_tensor *)> & edit_tensor,
                          const std::function<void(gguf_context *)> & edit_kv) {
    ggml_context * data_ctx = nullptr;
    gguf_init_params params = {false, &data_ctx};
    gguf_context * src = gguf_init_from_file(kModel.c_str(), params);
    EXPECT_NE(src, nullptr);
    gguf_context * dst = gguf_init_empty();
    gguf_set_kv(dst, src);
    edit_kv(dst);
    ggml_init_params p = {ggml_tensor_overhead() * 1024, nullptr, true};
    ggml_context * extra = ggml_init(p);
    for (ggml_tensor * t = ggml_get_first_tensor(data_ctx); t; t = ggml_get_next_tensor(data_ctx, t)) {
        if (ggml_tensor * out = edit_tensor(extra, t)) {
            gguf_add_tensor(dst, out);
        }
    }
    const std::string path = ::testing::TempDir() + name;
    EXPECT_TRUE(gguf_write_to_file(dst, path.c_str(), false));
    gguf_free(dst);
    gguf_free(src);
    ggml_free(extra);
    ggml_free(data_ctx);
    return path;
}

ggml_tensor * keep(ggml_context *, ggml_tensor * t) { return t; }
void no_kv_change(gguf_context *) {}

std::string write_file(const std::string & name, const std::string & bytes) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

struct LoadOutcome {
    transcribe_status status;
    std::string       message;
};

LoadOutcome load(const std::string & path) {
    transcribe_model * m = nullptr;
    const transcribe_status st = transcribe_model_load(path.c_str(), nullptr, &m);
    LoadOutcome o {st, transcribe_last_error()};
    transcribe_model_free(m);
    if (st != TRANSCRIBE_OK) {
        EXPECT_EQ(m, nullptr);
    }
    return o;
}

void quiet(transcribe_log_level, const char *, void *) {}

class BadModel : public ::testing::Test {
protected:
    void SetUp() override { transcribe_log_set(quiet, nullptr); }
    void TearDown() override { transcribe_log_set(nullptr, nullptr); }
};

} // namespace

TEST_F(BadModel, Missing_file) {
    const auto o = load("/nonexistent/model.gguf");
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_FILE_NOT_FOUND);
    EXPECT_NE(o.message.find("/nonexistent/model.gguf"), std::string::npos) << o.message;
}

TEST_F(BadModel, Empty_file) {
    const auto o = load(write_file("empty.gguf", ""));
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF);
    EXPECT_NE(o.message.find("empty"), std::string::npos) << o.message;
}

TEST_F(BadModel, Not_a_gguf) {
    const auto o = load(write_file("text.gguf", "hello, I am a text file pretending to be a model\n"));
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF);
    EXPECT_NE(o.message.find("not a GGUF"), std::string::npos) << o.message;
}

TEST_F(BadModel, Truncated_gguf) {
    std::ifstream in(kModel, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (double frac : {0.5, 0.999}) {
        const auto o = load(write_file("truncated.gguf", bytes.substr(0, size_t(double(bytes.size()) * frac))));
        EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF) << frac;
        EXPECT_NE(o.message.find("truncated"), std::string::npos) << o.message;
    }
    // Cut inside the header: the metadata itself is incomplete.
    const auto o = load(write_file("truncated_header.gguf", bytes.substr(0, 4096)));
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF) << o.message;
}

TEST_F(BadModel, Unknown_architecture) {
    const auto path = rewrite_model("arch.gguf", keep, [](gguf_context * kv) {
        gguf_set_val_str(kv, "general.architecture", "mystery_model");
    });
    const auto o = load(path);
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_UNSUPPORTED_ARCH);
    EXPECT_NE(o.message.find("mystery_model"), std::string::npos) << o.message;
}

TEST_F(BadModel, Tensor_with_wrong_shape) {
    const auto path = rewrite_model("shape.gguf", [](ggml_context * ctx, ggml_tensor * t) {
        if (std::string(ggml_get_name(t)) != "llm.blk.1.ffn_up.weight") {
            return t;
        }
        ggml_tensor * r = ggml_new_tensor_2d(ctx, t->type, t->ne[1], t->ne[0]); // transposed shape, same bytes
        ggml_set_name(r, ggml_get_name(t));
        r->data = t->data;
        return r;
    }, no_kv_change);
    const auto o = load(path);
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_SHAPE);
    EXPECT_NE(o.message.find("llm.blk.1.ffn_up.weight"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("[192, 64]"), std::string::npos) << o.message;
}

TEST_F(BadModel, Missing_tensor) {
    const auto path = rewrite_model("missing.gguf", [](ggml_context *, ggml_tensor * t) {
        return std::string(ggml_get_name(t)) == "enc.blk.1.conv.dw.weight" ? nullptr : t;
    }, no_kv_change);
    const auto o = load(path);
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_MISSING_TENSOR);
    EXPECT_NE(o.message.find("enc.blk.1.conv.dw.weight"), std::string::npos) << o.message;
}

TEST_F(BadModel, Missing_metadata_key) {
    const auto path = rewrite_model("nokey.gguf", keep, [](gguf_context * kv) { gguf_remove_key(kv, "llm.n_heads"); });
    const auto o = load(path);
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF);
    EXPECT_NE(o.message.find("llm.n_heads"), std::string::npos) << o.message;
}

class BadAudio : public BadModel {
protected:
    static void SetUpTestSuite() {
        transcribe_log_set(quiet, nullptr);
        ASSERT_EQ(transcribe_model_load(kModel.c_str(), nullptr, &model_), TRANSCRIBE_OK);
        ASSERT_EQ(transcribe_session_create(model_, nullptr, &session_), TRANSCRIBE_OK);
    }
    static void TearDownTestSuite() {
        transcribe_session_free(session_);
        transcribe_model_free(model_);
    }
    static transcribe_model *   model_;
    static transcribe_session * session_;
};
transcribe_model *   BadAudio::model_   = nullptr;
transcribe_session * BadAudio::session_ = nullptr;

TEST_F(BadAudio, Audio_that_is_not_audio) {
    transcribe_audio a {};
    EXPECT_EQ(transcribe_audio_load(write_file("noise.mp3", std::string(4096, 'x')).c_str(), 16000, &a),
              TRANSCRIBE_ERR_AUDIO_DECODE);
    EXPECT_NE(std::string(transcribe_last_error()).find("noise.mp3"), std::string::npos);
    EXPECT_EQ(a.samples, nullptr);
}

TEST_F(BadAudio, Zero_length_wav) {
    // A valid RIFF/WAVE header announcing 0 data bytes.
    const unsigned char hdr[44] = {'R', 'I', 'F', 'F', 36, 0, 0, 0, 'W', 'A', 'V', 'E', 'f', 'm', 't', ' ', 16, 0, 0, 0, 1, 0, 1, 0,
                                   0x80, 0x3e, 0, 0, 0, 0x7d, 0, 0, 2, 0, 16, 0, 'd', 'a', 't', 'a', 0, 0, 0, 0};
    transcribe_audio a {};
    const auto path = write_file("zero.wav", std::string(reinterpret_cast<const char *>(hdr), 44));
    EXPECT_EQ(transcribe_audio_load(path.c_str(), 16000, &a), TRANSCRIBE_ERR_AUDIO_DECODE);
    EXPECT_NE(std::string(transcribe_last_error()).find("no audio samples"), std::string::npos) << transcribe_last_error();
}

TEST_F(BadAudio, Nan_samples) {
    std::vector<float> pcm(16000, 0.01f);
    pcm[1234] = NAN;
    transcribe_result * r = nullptr;
    EXPECT_EQ(transcribe_run(session_, pcm.data(), pcm.size(), nullptr, &r), TRANSCRIBE_ERR_AUDIO_DECODE);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(transcribe_last_error()).find("1234"), std::string::npos) << transcribe_last_error();
    transcribe_audio a {};
    EXPECT_EQ(transcribe_audio_from_pcm(pcm.data(), pcm.size(), 16000, 1, 16000, &a), TRANSCRIBE_ERR_AUDIO_DECODE);
}

TEST_F(BadAudio, Empty_and_too_short_audio) {
    transcribe_result * r = nullptr;
    EXPECT_EQ(transcribe_run(session_, nullptr, 0, nullptr, &r), TRANSCRIBE_ERR_INVALID_ARG);
    std::vector<float> pcm(50, 0.0f);
    EXPECT_EQ(transcribe_run(session_, pcm.data(), pcm.size(), nullptr, &r), TRANSCRIBE_ERR_INVALID_ARG);
    EXPECT_EQ(r, nullptr);
}

TEST_F(BadAudio, Piece_longer_than_the_model_takes) {
    // Long audio is cut into pieces of the requested length; a window past the model's 40 s is refused.
    std::vector<float> pcm(size_t(16000) * 45, 0.0f);
    transcribe_run_params rp = transcribe_run_params_init();
    rp.chunk_ms = 50000;
    transcribe_result * r = nullptr;
    EXPECT_EQ(transcribe_run(session_, pcm.data(), pcm.size(), &rp, &r), TRANSCRIBE_ERR_INPUT_TOO_LONG);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(std::string(transcribe_last_error()).find("45.0 s"), std::string::npos) << transcribe_last_error();
    rp.chunk_ms = 500;
    EXPECT_EQ(transcribe_run(session_, pcm.data(), pcm.size(), &rp, &r), TRANSCRIBE_ERR_INVALID_ARG);
}

// Inputs the fuzzers found (tests/fuzz/regressions/model_load): each is refused with a named error.
TEST_F(BadModel, Fuzz_regressions_are_refused) {
    const std::string dir = std::string(FUZZ_REGRESSIONS) + "/model_load";
    int n = 0;
    for (const auto & entry : std::filesystem::directory_iterator(dir)) {
        const auto o = load(entry.path().string());
        EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF) << entry.path() << ": " << o.message;
        ++n;
    }
    EXPECT_GE(n, 2);
}

TEST_F(BadModel, Header_sizes_are_bounded_before_parsing) {
    // A tensor whose dimensions multiply past int64: refused by our header check, never parsed.
    std::string h("GGUF", 4);
    auto put = [&](const void * p, size_t n) { h.append(static_cast<const char *>(p), n); };
    const uint32_t version = 3, n_dims = 4;
    const uint64_t n_tensors = 1, n_kv = 0, name_len = 1;
    const int64_t ne[4] = {int64_t(1) << 40, int64_t(1) << 40, 2, 2};
    const int32_t type = 0;
    const uint64_t offset = 0;
    put(&version, 4); put(&n_tensors, 8); put(&n_kv, 8); put(&name_len, 8); h += "t"; put(&n_dims, 4);
    put(ne, sizeof ne); put(&type, 4); put(&offset, 8);
    h.resize(h.size() + 64, '\0');
    auto o = load(write_file("huge_dims.gguf", h));
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF);
    EXPECT_NE(o.message.find("impossible dimension"), std::string::npos) << o.message;
    // A metadata string claiming more bytes than the file has.
    std::string k("GGUF", 4);
    const uint64_t one = 1, none = 0, huge_len = uint64_t(1) << 60;
    const int32_t t_str = 8;
    auto put2 = [&](const void * p, size_t n) { k.append(static_cast<const char *>(p), n); };
    put2(&version, 4); put2(&none, 8); put2(&one, 8); put2(&one, 8); k += "k"; put2(&t_str, 4); put2(&huge_len, 8);
    o = load(write_file("huge_string.gguf", k));
    EXPECT_EQ(o.status, TRANSCRIBE_ERR_BAD_GGUF);
    EXPECT_NE(o.message.find("metadata string of length 1152921504606846976"), std::string::npos) << o.message;
}
