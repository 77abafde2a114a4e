#include "canary_tokenizer.h"

#include "error.h"
#include "model_file.h"

namespace transcribe {

namespace {
constexpr int32_t kControl = 3; // gguf-py TokenType.CONTROL
const std::string kSpace   = "\xE2\x96\x81"; // U+2581
} // namespace

CanaryTokenizer::CanaryTokenizer(const ModelFile & file) {
    pieces_ = file.get_str_array("tokenizer.ggml.tokens");
    types_  = file.get_i32_array("tokenizer.ggml.token_type");
    if (pieces_.empty() || types_.size() != pieces_.size()) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: Canary tokenizer needs as many token types as pieces", file.path().c_str());
    }
}

std::vector<int32_t> CanaryTokenizer::encode(const std::string &) const {
    fail(TRANSCRIBE_ERR_INVALID_ARG, "the Canary aggregate tokenizer does not encode text here (its prompts are special tokens)");
}

std::string CanaryTokenizer::decode_bytes(const std::vector<int32_t> & ids) const {
    std::string text;
    for (int32_t id : ids) {
        text += piece(id);
    }
    for (size_t at = text.find(kSpace); at != std::string::npos; at = text.find(kSpace, at + 1)) {
        text.replace(at, kSpace.size(), " ");
    }
    return text;
}

bool CanaryTokenizer::is_control(int32_t id) const {
    return id >= 0 && size_t(id) < types_.size() && types_[size_t(id)] == kControl;
}

} // namespace transcribe
