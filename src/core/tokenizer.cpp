#include "tokenizer.h"

#include "bpe_tokenizer.h"
#include "canary_tokenizer.h"
#include "error.h"
#include "model_file.h"
#include "sentencepiece_tokenizer.h"

#include <utf8proc.h>

#include <cstdlib>

namespace transcribe {

std::unique_ptr<Tokenizer> Tokenizer::from_file(const ModelFile & file) {
    const std::string model = file.get_str("tokenizer.ggml.model");
    if (model == "gpt2") {
        return std::make_unique<BpeTokenizer>(BpeTokenizer::from_file(file));
    }
    if (model == "llama") {
        return std::make_unique<SentencePieceTokenizer>(file);
    }
    if (model == "canary") {
        return std::make_unique<CanaryTokenizer>(file);
    }
    fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unsupported tokenizer model %s (gpt2 byte-level BPE, llama SentencePiece or canary)",
         file.path().c_str(), model.c_str());
}

std::string Tokenizer::decode(const std::vector<int32_t> & ids) const { return utf8_sanitize(decode_bytes(ids)); }

std::string utf8_nfc(const std::string & s, const char * what) {
    utf8proc_uint8_t * mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(s.data()), utf8proc_ssize_t(s.size()),
                                            &mapped, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "%s is not UTF-8 (%s)", what, utf8proc_errmsg(n));
    }
    std::string out(reinterpret_cast<const char *>(mapped), size_t(n));
    std::free(mapped);
    return out;
}

std::string strip_whitespace(const std::string & s) {
    const char * ws = " \t\n\r\f\v";
    const size_t a = s.find_first_not_of(ws);
    return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(ws) - a + 1);
}

std::string utf8_sanitize(const std::string & s) {
    static const char replacement[] = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(s.size());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            out += char(b);
            ++i;
            continue;
        }
        int len = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) {
            len = 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            len = 3;
            lo = b == 0xE0 ? 0xA0 : 0x80;
            hi = b == 0xED ? 0x9F : 0xBF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            len = 4;
            lo = b == 0xF0 ? 0x90 : 0x80;
            hi = b == 0xF4 ? 0x8F : 0xBF;
        }
        if (!len) {
            out += replacement;
            ++i;
            continue;
        }
        int j = 1;
        for (; j < len && i + size_t(j) < n; ++j) {
            const unsigned char c = static_cast<unsigned char>(s[i + size_t(j)]);
            const unsigned char clo = j == 1 ? lo : 0x80, chi = j == 1 ? hi : 0xBF;
            if (c < clo || c > chi) {
                break;
            }
        }
        if (j == len) {
            out.append(s, i, size_t(len));
        } else {
            out += replacement;
        }
        i += size_t(j);
    }
    return out;
}

} // namespace transcribe
