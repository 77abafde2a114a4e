// NeMo's aggregate CanaryTokenizer as Canary AED decodes it (AggregateTokenizer.ids_to_text): every
// sub-tokenizer's pieces at its offset, joined, U+2581 shown as a space; special tokens (<|en|>, <|7|>)
// appear literally and nothing is stripped. Its text is never encoded here: prompts are special tokens.
#pragma once

#include "tokenizer.h"

namespace transcribe {

class CanaryTokenizer final : public Tokenizer {
public:
    explicit CanaryTokenizer(const ModelFile & file);
    // UNSUPPORTED: the aggregate vocabulary needs a language to pick the sub-tokenizer that encodes.
    std::vector<int32_t> encode(const std::string & text) const override;
    std::string decode_bytes(const std::vector<int32_t> & ids) const override;
    std::string piece(int32_t id) const override { return id >= 0 && id < n_vocab() ? pieces_[size_t(id)] : ""; }
    int  n_vocab() const override { return int(pieces_.size()); }
    bool is_control(int32_t id) const override;

private:
    std::vector<std::string> pieces_;
    std::vector<int32_t>     types_;
};

} // namespace transcribe
