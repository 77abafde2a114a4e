// SentencePiece BPE (NeMo's ASR tokenizers) from GGUF tokenizer.ggml.{tokens,scores,token_type}:
// pieces with U+2581 for a space, <unk> shown as " \u2047 ", byte pieces <0xNN>, control pieces silent.
#pragma once

#include "tokenizer.h"

#include <unordered_map>

namespace transcribe {

class SentencePieceTokenizer final : public Tokenizer {
public:
    explicit SentencePieceTokenizer(const ModelFile & file);
    // SentencePiece's BPE encoding: whitespace runs collapsed (where the model's normalizer removes extra
    // whitespace), a dummy prefix space (where it adds one), user-defined symbols split off whole (the
    // longest at each place; never merged), then the adjacent pair whose merged piece scores highest
    // merged until none is in the vocabulary.
    std::vector<int32_t> encode(const std::string & text) const override;
    std::string decode_bytes(const std::vector<int32_t> & ids) const override;
    // As sentencepiece decodes: the first piece's word-initial space dropped.
    std::string decode(const std::vector<int32_t> & ids) const override;
    int  n_vocab() const override { return int(pieces_.size()); }
    bool is_control(int32_t id) const override;
    int32_t unknown_id() const override { return unk_id_; }
    std::string piece(int32_t id) const override { return id >= 0 && id < n_vocab() ? pieces_[size_t(id)] : ""; }

private:
    std::string piece_text(int32_t id) const; // '▁' as ' ', "" for control and unused pieces

    std::vector<std::string>                 pieces_;
    std::vector<float>                       scores_;
    std::vector<int32_t>                     types_;
    std::unordered_map<std::string, int32_t> piece_to_id_;
    std::vector<std::string>                 user_defined_; // longest first
    int32_t                                  unk_id_ = 0;
    bool                                     add_space_prefix_ = true, remove_extra_whitespaces_ = true;
};

} // namespace transcribe
