// Byte-level BPE (GPT-2 byte mapping, merges by rank) with the Qwen2 pre-tokenizer split, loaded from
// GGUF tokenizer.ggml.* metadata. Special tokens are inserted by id only: text is never searched for them.
#pragma once

#include "tokenizer.h"

#include <unordered_map>
#include <unordered_set>

namespace transcribe {

class BpeTokenizer final : public Tokenizer {
public:
    static BpeTokenizer from_file(const ModelFile & file);
    std::vector<int32_t> encode(const std::string & text) const override;
    // Byte-level decode; ids in drop_ids() are skipped, other added tokens are literal text (decode():
    // invalid UTF-8 becomes U+FFFD, as NeMo / HF decode it). decode_bytes(encode(s)) == s for any bytes s.
    std::string decode_bytes(const std::vector<int32_t> & ids) const override;
    std::string piece(int32_t id) const override { return id >= 0 && id < n_vocab() ? tokens_[size_t(id)] : ""; }
    int  n_vocab() const override { return int(tokens_.size()); }
    bool is_control(int32_t id) const override;
    const std::unordered_set<int32_t> & drop_ids() const { return drop_ids_; }
    // The Qwen2 pre-tokenizer split (exposed for tests).
    static std::vector<std::string> pre_tokenize(const std::string & text);

private:
    void bpe_word(const std::string & word, std::vector<int32_t> & out) const;

    std::vector<std::string>                 tokens_;
    std::vector<int32_t>                     types_;
    std::unordered_map<std::string, int32_t> token_to_id_;
    std::unordered_map<std::string, int32_t> merge_rank_; // "left right" -> rank
    std::unordered_set<int32_t>              drop_ids_;
};

} // namespace transcribe
