#include "sentencepiece_tokenizer.h"

#include "error.h"
#include "model_file.h"

#include <algorithm>
#include <cstdio>

namespace transcribe {

namespace {

// gguf-py TokenType
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
const std::string kSpace     = "\xE2\x96\x81";         // U+2581, SentencePiece's visible space
const std::string kUnkShown  = " \xE2\x81\x87 ";       // sentencepiece's default unk_surface

size_t utf8_len(unsigned char lead) {
    return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

std::string replace_all(std::string s, const std::string & from, const std::string & to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
        s.replace(at, from.size(), to);
    }
    return s;
}

} // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const ModelFile & file) {
    pieces_ = file.get_str_array("tokenizer.ggml.tokens");
    types_  = file.get_i32_array("tokenizer.ggml.token_type");
    const gguf_context * g = file.gguf();
    const int64_t k = gguf_find_key(g, "tokenizer.ggml.scores");
    if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, k) != GGUF_TYPE_FLOAT32 ||
        gguf_get_arr_n(g, k) != pieces_.size() || types_.size() != pieces_.size() || pieces_.empty()) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: SentencePiece tokenizer needs as many scores and types as pieces",
             file.path().c_str());
    }
    const float * scores = static_cast<const float *>(gguf_get_arr_data(g, k));
    scores_.assign(scores, scores + pieces_.size());
    unk_id_ = int32_t(file.get_u32("tokenizer.ggml.unknown_token_id", 0));
    if (unk_id_ < 0 || size_t(unk_id_) >= pieces_.size()) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unknown-token id %d outside the vocabulary", file.path().c_str(), unk_id_);
    }
    for (size_t i = 0; i < pieces_.size(); ++i) {
        if (types_[i] == kNormal || types_[i] == kUserDefined || types_[i] == kByte) {
            piece_to_id_.emplace(pieces_[i], int32_t(i));
        }
        if (types_[i] == kUserDefined && !pieces_[i].empty()) {
            user_defined_.push_back(pieces_[i]);
        }
    }
    std::stable_sort(user_defined_.begin(), user_defined_.end(),
                     [](const std::string & a, const std::string & b) { return a.size() > b.size(); });
    add_space_prefix_         = file.get_bool("tokenizer.ggml.add_space_prefix", true);
    remove_extra_whitespaces_ = file.get_bool("tokenizer.ggml.remove_extra_whitespaces", true);
}

bool SentencePieceTokenizer::is_control(int32_t id) const {
    return id >= 0 && size_t(id) < types_.size() && types_[size_t(id)] == kControl;
}

std::string SentencePieceTokenizer::piece_text(int32_t id) const {
    if (id < 0 || size_t(id) >= pieces_.size()) {
        return "";
    }
    const std::string & p = pieces_[size_t(id)];
    switch (types_[size_t(id)]) {
    case kControl:
    case kUnused:
        return "";
    case kUnknown:
        return kUnkShown;
    case kByte: {
        unsigned v = 0;
        return std::sscanf(p.c_str(), "<0x%2X>", &v) == 1 ? std::string(1, char(v)) : "";
    }
    default:
        return replace_all(p, kSpace, " ");
    }
}

std::string SentencePieceTokenizer::decode_bytes(const std::vector<int32_t> & ids) const {
    std::string out;
    for (int32_t id : ids) {
        out += piece_text(id);
    }
    return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t> & ids) const {
    std::string out;
    bool first = true;
    for (int32_t id : ids) {
        std::string t = piece_text(id);
        if (t.empty()) {
            continue;
        }
        if (first && types_[size_t(id)] != kUnknown && t[0] == ' ') {
            t.erase(0, 1);
        }
        first = false;
        out += t;
    }
    return utf8_sanitize(out);
}

std::vector<int32_t> SentencePieceTokenizer::encode(const std::string & text) const {
    // Whitespace: runs collapsed to one and ends trimmed (remove_extra_whitespaces), a dummy prefix
    // (add_space_prefix); each space becomes U+2581.
    std::string norm;
    for (char c : text) {
        const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        if (space && remove_extra_whitespaces_) {
            if (!norm.empty() && norm.back() != ' ') {
                norm += ' ';
            }
        } else {
            norm += space ? ' ' : c;
        }
    }
    while (remove_extra_whitespaces_ && !norm.empty() && norm.back() == ' ') {
        norm.pop_back();
    }
    if (norm.empty()) {
        return {};
    }
    norm = replace_all(add_space_prefix_ ? " " + norm : norm, " ", kSpace);
    // Characters, or a user-defined symbol whole (frozen: never merged).
    std::vector<std::string> sym;
    std::vector<bool>        frozen;
    for (size_t i = 0; i < norm.size();) {
        size_t n = 0;
        for (const std::string & u : user_defined_) {
            if (norm.compare(i, u.size(), u) == 0) {
                n = u.size();
                break;
            }
        }
        frozen.push_back(n > 0);
        if (n == 0) {
            n = std::min(utf8_len(static_cast<unsigned char>(norm[i])), norm.size() - i);
        }
        sym.push_back(norm.substr(i, n));
        i += n;
    }
    for (;;) {
        float  best_score = 0;
        size_t best       = SIZE_MAX;
        for (size_t i = 0; i + 1 < sym.size(); ++i) {
            if (frozen[i] || frozen[i + 1]) {
                continue;
            }
            auto it = piece_to_id_.find(sym[i] + sym[i + 1]);
            if (it != piece_to_id_.end() && types_[size_t(it->second)] != kByte &&
                (best == SIZE_MAX || scores_[size_t(it->second)] > best_score)) {
                best_score = scores_[size_t(it->second)];
                best       = i;
            }
        }
        if (best == SIZE_MAX) {
            break;
        }
        sym[best] += sym[best + 1];
        sym.erase(sym.begin() + long(best) + 1);
        frozen.erase(frozen.begin() + long(best) + 1);
    }
    std::vector<int32_t> ids;
    for (const std::string & s : sym) {
        auto it = piece_to_id_.find(s);
        if (it != piece_to_id_.end()) {
            ids.push_back(it->second);
            continue;
        }
        // Byte fallback where the vocabulary has byte pieces, else <unk> (one per unknown character).
        bool all_bytes = true;
        std::vector<int32_t> bytes;
        for (unsigned char b : s) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            auto bt = piece_to_id_.find(name);
            all_bytes = all_bytes && bt != piece_to_id_.end();
            if (all_bytes) {
                bytes.push_back(bt->second);
            }
        }
        if (all_bytes) {
            ids.insert(ids.end(), bytes.begin(), bytes.end());
        } else if (ids.empty() || ids.back() != unk_id_) {
            ids.push_back(unk_id_);
        }
    }
    return ids;
}

} // namespace transcribe
