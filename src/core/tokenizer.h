// Byte-level BPE (GPT-2 byte mapping, merges by rank) with the Qwen2 pre-tokenizer split, loaded from
// GGUF tokenizer.ggml.* metadata. Special tokens are inserted by id only: text is never searched for them.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace transcribe {

class ModelFile;

class Tokenizer {
public:
    static Tokenizer from_file(const ModelFile & file);

    std::vector<int32_t> encode(const std::string & text) const;
    // Byte-level decode; ids in drop_ids() are skipped, other added tokens are literal text, invalid
    // UTF-8 becomes U+FFFD (as NeMo / HF decode it).
    std::string decode(const std::vector<int32_t> & ids) const;
    // The raw bytes before U+FFFD replacement: decode_bytes(encode(s)) == s for any bytes s.
    std::string decode_bytes(const std::vector<int32_t> & ids) const;

    int  n_vocab() const { return int(tokens_.size()); }
    bool is_control(int32_t id) const;
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

// Replaces invalid UTF-8 sequences by U+FFFD (one per maximal invalid subpart, as Python does).
std::string utf8_sanitize(const std::string & s);

} // namespace transcribe
