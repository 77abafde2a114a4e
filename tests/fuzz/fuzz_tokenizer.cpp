// libFuzzer: the tokenizer. Property: for valid UTF-8, decode(encode(text)) == text; arbitrary id
// sequences (out-of-range ones included) decode without fault to valid UTF-8.
#include "core/model_file.h"
#include "core/bpe_tokenizer.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

const BpeTokenizer * g_tok = nullptr;

bool valid_utf8(const std::string & s) { return utf8_sanitize(s) == s; }

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const char * vocab = std::getenv("TRANSCRIBE_FUZZ_VOCAB");
    ModelFile f(vocab ? vocab : TRANSCRIBE_FUZZ_VOCAB_DEFAULT, {true});
    g_tok = new BpeTokenizer(BpeTokenizer::from_file(f));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    const std::vector<int32_t> ids = g_tok->encode(text);
    // Byte-level BPE is lossless: every input comes back, invalid UTF-8 included, as raw bytes.
    if (g_tok->decode_bytes(ids) != text || (valid_utf8(text) && g_tok->decode(ids) != text)) {
        __builtin_trap();
    }
    std::vector<int32_t> raw(size / 4);
    if (!raw.empty()) {
        std::memcpy(raw.data(), data, raw.size() * 4);
    }
    if (!valid_utf8(g_tok->decode(raw))) {
        __builtin_trap();
    }
    return 0;
}
