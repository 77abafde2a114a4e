// The tokenizer interface every family's text goes through; the GGUF's tokenizer.ggml.model picks
// the implementation (gpt2: byte-level BPE, bpe_tokenizer.h; llama: SentencePiece, sentencepiece_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace transcribe {

class ModelFile;

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    static std::unique_ptr<Tokenizer> from_file(const ModelFile & file);

    virtual std::vector<int32_t> encode(const std::string & text) const = 0;
    // The text of ids as they join: a piece that starts a word starts with ' ' (so the text of a single
    // id says whether it begins a word); bytes as stored, possibly not valid UTF-8.
    virtual std::string decode_bytes(const std::vector<int32_t> & ids) const = 0;
    // The transcript text, as the reference decodes it; valid UTF-8 (invalid sequences become U+FFFD).
    virtual std::string decode(const std::vector<int32_t> & ids) const;
    // The vocabulary entry of id as stored (SentencePiece: with U+2581; BPE: GPT-2 byte symbols).
    virtual std::string piece(int32_t id) const = 0;
    virtual int  n_vocab() const = 0;
    virtual bool is_control(int32_t id) const = 0;
    // The id text the vocabulary cannot spell becomes (0 where the tokenizer names none, as NeMo takes it).
    virtual int32_t unknown_id() const { return 0; }
};

// Replaces invalid UTF-8 sequences by U+FFFD (one per maximal invalid subpart, as Python does).
std::string utf8_sanitize(const std::string & s);

// S in Unicode Normalization Form C (what the Qwen tokenizer does to text before it splits it);
// INVALID_ARG (naming WHAT) where S is not UTF-8.
std::string utf8_nfc(const std::string & s, const char * what);

// S without leading and trailing ASCII whitespace (Python's str.strip() on the texts NeMo strips).
std::string strip_whitespace(const std::string & s);

} // namespace transcribe
