#include "bpe_tokenizer.h"

#include "error.h"
#include "model_file.h"

#include "unicode.h" // Unicode category tables of the fetched llama.cpp tree

#include <array>
#include <climits>
#include <stdexcept>

namespace transcribe {

namespace {

constexpr int32_t TOKEN_TYPE_CONTROL = 3; // llama.cpp / gguf-py TokenType.CONTROL

// GPT-2's reversible byte <-> printable-codepoint mapping.
struct ByteMap {
    std::array<std::string, 256>              byte_to_utf8;
    std::unordered_map<uint32_t, uint8_t>     cpt_to_byte;
    ByteMap() {
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const uint32_t cpt = printable ? uint32_t(b) : uint32_t(256 + n++);
            byte_to_utf8[size_t(b)] = unicode_cpt_to_utf8(cpt);
            cpt_to_byte[cpt]        = uint8_t(b);
        }
    }
};

const ByteMap & byte_map() {
    static const ByteMap m;
    return m;
}

constexpr uint32_t kRawByteBase = 0x110000; // + byte value: an invalid UTF-8 byte kept as is

bool is_letter(uint32_t c) { return c < kRawByteBase && unicode_cpt_flags_from_cpt(c).is_letter; }
bool is_number(uint32_t c) { return c < kRawByteBase && unicode_cpt_flags_from_cpt(c).is_number; }
bool is_space(uint32_t c) { return c < kRawByteBase && unicode_cpt_flags_from_cpt(c).is_whitespace; }
bool is_newline(uint32_t c) { return c == '\r' || c == '\n'; }
uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

} // namespace

// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
std::vector<std::string> BpeTokenizer::pre_tokenize(const std::string & text) {
    // Bytes that are not valid UTF-8 become "raw byte" code points past Unicode's range: they split
    // like punctuation and come back out as the very same byte, so byte-level BPE stays lossless.
    std::vector<uint32_t> cpts;
    for (size_t off = 0; off < text.size();) {
        const size_t start = off;
        uint32_t cpt = kRawByteBase;
        try {
            cpt = unicode_cpt_from_utf8(text, off);
        } catch (const std::invalid_argument &) {
            off = start;
        }
        // Overlong forms (C0 BD for '=') decode but would not re-encode to the same bytes.
        if (off == start || cpt > 0x10FFFF || unicode_cpt_to_utf8(cpt).size() != off - start) {
            for (size_t b = start; b < std::max(off, start + 1); ++b) {
                cpts.push_back(kRawByteBase + static_cast<unsigned char>(text[b]));
            }
            off = std::max(off, start + 1);
            continue;
        }
        cpts.push_back(cpt);
    }
    const size_t n = cpts.size();
    auto at = [&](size_t i) -> uint32_t { return i < n ? cpts[i] : UINT32_MAX; };
    auto valid = [&](size_t i) { return i < n; };

    std::vector<std::string> words;
    size_t pos = 0;
    while (pos < n) {
        const uint32_t c = cpts[pos];
        size_t len = 0;
        if (c == '\'' && valid(pos + 1)) { // contractions
            const uint32_t c1 = lower_ascii(at(pos + 1));
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                len = 2;
            } else if (valid(pos + 2)) {
                const uint32_t c2 = lower_ascii(at(pos + 2));
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    len = 3;
                }
            }
        }
        if (!len) { // [^\r\n\p{L}\p{N}]?\p{L}+
            size_t i = pos;
            if (!is_newline(c) && !is_letter(c) && !is_number(c) && valid(pos + 1) && is_letter(at(pos + 1))) {
                ++i;
            }
            if (valid(i) && is_letter(at(i))) {
                while (valid(i) && is_letter(at(i))) {
                    ++i;
                }
                len = i - pos;
            }
        }
        if (!len && is_number(c)) { // \p{N}
            len = 1;
        }
        if (!len) { //  ?[^\s\p{L}\p{N}]+[\r\n]*
            size_t i = pos + (c == ' ' ? 1 : 0);
            auto other = [&](size_t k) { return valid(k) && !is_space(at(k)) && !is_letter(at(k)) && !is_number(at(k)); };
            if (other(i)) {
                while (other(i)) {
                    ++i;
                }
                while (valid(i) && is_newline(at(i))) {
                    ++i;
                }
                len = i - pos;
            }
        }
        if (!len && is_space(c)) {
            size_t run = 0, last_newline = 0;
            while (valid(pos + run) && is_space(at(pos + run))) {
                if (is_newline(at(pos + run))) {
                    last_newline = run + 1;
                }
                ++run;
            }
            if (last_newline) { // \s*[\r\n]+
                len = last_newline;
            } else if (run > 1 && valid(pos + run)) { // \s+(?!\S): leave one space for the next word
                len = run - 1;
            } else { // \s+
                len = run;
            }
        }
        if (!len) {
            len = 1;
        }
        std::string w;
        for (size_t k = pos; k < pos + len; ++k) {
            if (cpts[k] >= kRawByteBase) {
                w += char(cpts[k] - kRawByteBase);
            } else {
                w += unicode_cpt_to_utf8(cpts[k]);
            }
        }
        words.push_back(std::move(w));
        pos += len;
    }
    return words;
}

BpeTokenizer BpeTokenizer::from_file(const ModelFile & file) {
    BpeTokenizer t;
    const std::string model = file.get_str("tokenizer.ggml.model");
    if (model != "gpt2") {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unsupported tokenizer model %s (need gpt2 byte-level BPE)",
             file.path().c_str(), model.c_str());
    }
    t.tokens_ = file.get_str_array("tokenizer.ggml.tokens");
    t.types_  = file.get_i32_array("tokenizer.ggml.token_type");
    if (t.types_.size() != t.tokens_.size()) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: %zu token types for %zu tokens", file.path().c_str(),
             t.types_.size(), t.tokens_.size());
    }
    t.token_to_id_.reserve(t.tokens_.size());
    for (size_t i = 0; i < t.tokens_.size(); ++i) {
        if (t.types_[i] != TOKEN_TYPE_CONTROL) {
            t.token_to_id_.emplace(t.tokens_[i], int32_t(i));
        }
    }
    const auto merges = file.get_str_array("tokenizer.ggml.merges");
    t.merge_rank_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        t.merge_rank_.emplace(merges[i], int32_t(i));
    }
    for (const char * key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"}) {
        if (file.has_key(key)) {
            t.drop_ids_.insert(int32_t(file.get_u32(key)));
        }
    }
    if (file.has_key("tokenizer.drop_ids")) {
        for (int32_t id : file.get_i32_array("tokenizer.drop_ids")) {
            t.drop_ids_.insert(id);
        }
    }
    return t;
}

bool BpeTokenizer::is_control(int32_t id) const {
    return id >= 0 && size_t(id) < types_.size() && types_[size_t(id)] == TOKEN_TYPE_CONTROL;
}

void BpeTokenizer::bpe_word(const std::string & word, std::vector<int32_t> & out) const {
    const ByteMap & bm = byte_map();
    std::vector<std::string> symbols;
    for (unsigned char b : word) {
        symbols.push_back(bm.byte_to_utf8[b]);
    }
    // Merge the lowest-ranked adjacent pair until none is in the merge table.
    for (;;) {
        int32_t best_rank = INT32_MAX;
        size_t  best      = 0;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
            auto it = merge_rank_.find(symbols[i] + " " + symbols[i + 1]);
            if (it != merge_rank_.end() && it->second < best_rank) {
                best_rank = it->second;
                best      = i;
            }
        }
        if (best_rank == INT32_MAX) {
            break;
        }
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + long(best) + 1);
    }
    for (const auto & s : symbols) {
        auto it = token_to_id_.find(s);
        if (it != token_to_id_.end()) {
            out.push_back(it->second);
            continue;
        }
        // Not in the vocabulary (cannot happen with a complete byte-level vocab): fall back to byte tokens.
        const auto cpts = unicode_cpts_from_utf8(s);
        for (uint32_t cp : cpts) {
            auto b = token_to_id_.find(unicode_cpt_to_utf8(cp));
            if (b != token_to_id_.end()) {
                out.push_back(b->second);
            }
        }
    }
}

std::vector<int32_t> BpeTokenizer::encode(const std::string & text) const {
    std::vector<int32_t> ids;
    for (const auto & word : pre_tokenize(text)) {
        bpe_word(word, ids);
    }
    return ids;
}



std::string BpeTokenizer::decode_bytes(const std::vector<int32_t> & ids) const {
    const ByteMap & bm = byte_map();
    std::string bytes;
    for (int32_t id : ids) {
        if (id < 0 || size_t(id) >= tokens_.size() || drop_ids_.count(id)) {
            continue;
        }
        const std::string & tok = tokens_[size_t(id)];
        if (types_[size_t(id)] == TOKEN_TYPE_CONTROL) {
            bytes += tok; // added tokens are literal text
            continue;
        }
        for (size_t off = 0; off < tok.size();) {
            uint32_t cp = 0;
            try {
                cp = unicode_cpt_from_utf8(tok, off);
            } catch (const std::invalid_argument &) { // a malformed vocabulary entry: keep its raw byte
                bytes += tok[off++];
                continue;
            }
            auto it = bm.cpt_to_byte.find(cp);
            if (it != bm.cpt_to_byte.end()) {
                bytes += char(it->second);
            } else if (cp <= 0x10FFFF) {
                bytes += unicode_cpt_to_utf8(cp);
            }
        }
    }
    return bytes;
}

} // namespace transcribe
