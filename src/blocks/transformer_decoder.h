// A Transformer decoder over encoder states, as NeMo's (Canary AED: token embedding plus NeMo's fixed
// sinusoid table, a LayerNorm, ReLU FFNs, an output bias) and Whisper's (learned positions, no embedding
// LayerNorm, GELU FFNs, keys without bias) are built: the embedding plus a position table row, then
// pre-LN layers of causal self-attention, cross-attention over the encoder states and an FFN, a final
// LayerNorm and the output layer (the token embedding, tied, unless the file has its own). Every pass is
// one graph over columns: a prompt's positions, or one or more tokens per sequence, several sequences
// together; the cross-attention keys and values are computed once per recording.
#pragma once

#include "blocks/sequence_cache.h"
#include "blocks/step_decoder.h"
#include "core/backend.h"
#include "core/model_file.h"

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace transcribe {

struct TransformerDecoderHParams {
    int   n_layers   = 0;
    int   hidden     = 0;
    int   n_heads    = 0;
    int   inner      = 0;
    int   vocab_rows = 0; // embedding / output rows (the vocabulary padded)
    int   n_positions = 0; // rows of the position table: the decoder's max_sequence_length
    int   enc_width  = 0;  // width of the encoder states the cross-attention reads (before enc_dec_proj)
    float norm_eps   = 1e-5f;
    bool  gelu       = false; // the FFN's activation: exact-erf GELU (ARCH.dec_activation "gelu"), else ReLU

    static TransformerDecoderHParams from_file(const ModelFile & f, const std::string & arch, int enc_width);
};

class TransformerDecoder {
public:
    TransformerDecoder(const ModelFile & f, const TransformerDecoderHParams & hp);
    const TransformerDecoderHParams & hparams() const { return hp_; }

    // The encoder states [enc_width, T] as the decoder attends to them (enc_dec_proj where the widths differ).
    ggml_tensor * project_encoder(ggml_context * ctx, ggml_tensor * enc) const;
    bool          projects_encoder() const { return enc_proj_.w != nullptr; }

    // What a pass reads: per column its token, its row of the position table, where its self-attention
    // K/V go and what it sees (pos / rows / mask as ops::decode_attention takes them), and the
    // cross-attention rows it reads.
    struct Columns {
        ggml_tensor * tokens = nullptr, * positions = nullptr;
        ggml_tensor * self_pos = nullptr, * self_rows = nullptr, * self_mask = nullptr;
        ggml_tensor * cross_pos = nullptr, * cross_rows = nullptr, * cross_mask = nullptr;
        int64_t n_self_kv = 0, n_cross_kv = 0;
    };
    // The final-normed hidden states [hidden, columns]; EMBEDDED and FIRST_LAYER (when given) get the
    // embedding output and the first layer's output, CROSS_QUERIES (when given) each layer's
    // cross-attention queries [hidden, columns].
    ggml_tensor * build(ggml_context * ctx, ggml_cgraph * gf, const Columns & c, const SequenceCache & self,
                        const SequenceCache & cross, ggml_tensor ** embedded = nullptr, ggml_tensor ** first_layer = nullptr,
                        std::vector<ggml_tensor *> * cross_queries = nullptr) const;
    ggml_tensor * logits(ggml_context * ctx, ggml_tensor * h) const;
    // Cross-attention K (or V) of layer IL for the decoder's view of the encoder states [hidden, T].
    ggml_tensor * cross_k(ggml_context * ctx, int il, ggml_tensor * mem) const;
    ggml_tensor * cross_v(ggml_context * ctx, int il, ggml_tensor * mem) const;

private:
    struct Linear {
        ggml_tensor * w = nullptr, * b = nullptr;
    };
    struct Norm {
        ggml_tensor * w = nullptr, * b = nullptr;
    };
    struct Layer {
        Norm   attn_norm, xattn_norm, ffn_norm;
        Linear q, k, v, o, xq, xk, xv, xo, up, down;
    };
    Linear linear(const ModelFile & f, const std::string & name, int64_t n_in, int64_t n_out) const;
    Norm   norm(const ModelFile & f, const std::string & name) const;
    ggml_tensor * apply(ggml_context * ctx, const Linear & l, ggml_tensor * x) const;
    ggml_tensor * apply(ggml_context * ctx, const Norm & n, ggml_tensor * x) const;

    TransformerDecoderHParams hp_;
    ggml_tensor *      tok_embd_ = nullptr, * pos_table_ = nullptr, * out_w_ = nullptr, * out_b_ = nullptr;
    Norm               embd_norm_, out_norm_;
    Linear             enc_proj_;
    std::vector<Layer> layers_;
};

// Per-session decoding state: the self-attention cache of up to n_seq sequences, each sequence's
// cross-attention keys and values, and the graphs built for them. cross_type: the cross-attention cache's
// type (each step reads all of it: a decoder over a long encoder output, Whisper's 1500 frames, reads
// more bytes of it than of its own cache).
class TransformerDecoderState final : public StepDecoder {
public:
    TransformerDecoderState(const TransformerDecoder & dec, Executor & exec, ggml_type kv_type, int n_ctx, int n_seq,
                            int max_enc_frames, ggml_type cross_type = GGML_TYPE_F32);

    // What a prompt pass can hand back besides the next token (parity dumps, inspection).
    struct PromptOutputs {
        std::vector<float> logits;      // of the last position
        std::vector<float> embedded;    // [T][hidden]
        std::vector<float> first_layer; // [T][hidden]
        std::vector<float> final_norm;  // [T][hidden]
        std::vector<float> enc_proj;    // [n_enc][hidden], where the encoder states are projected
        std::vector<float> row_logits;  // of the prompt position asked for (prefill's LOGITS_ROW)
    };
    // Restarts sequence SEQ: the cross-attention K/V of the encoder states ENC [n_enc][enc_width], then
    // PROMPT at positions 0..P-1; returns the greedy next token. Later tokens read row
    // (cache position - POSITION_SHIFT) of the position table (NeMo's greedy decoder: P - 1).
    // LOGITS_ROW >= 0: out->row_logits gets that prompt position's logits too (Whisper's no-speech
    // probability at the start-of-transcript token).
    int32_t prefill(int seq, const float * enc, int n_enc, const std::vector<int32_t> & prompt, int position_shift,
                    PromptOutputs * out, int logits_row = -1);
    void step(const std::vector<int> & seqs, const std::vector<int32_t> & tokens, std::vector<int32_t> & next,
              std::vector<std::vector<float>> * logits) override;
    // What Whisper's word alignment reads of one pass over TOKENS (sequence SEQ restarted, its encoder
    // rows kept): every position's logits [T][vocab], each layer's cross-attention queries [T][hidden] and
    // keys [n_enc][hidden].
    struct CrossAttention {
        std::vector<float>              logits;
        std::vector<std::vector<float>> queries, keys;
        int                             n_enc = 0;
    };
    CrossAttention cross_attention(int seq, const std::vector<int32_t> & tokens);
    void rewind(int seq, int n_past) override { self_.rewind(seq, n_past); }
    void reorder(const std::vector<int> & seqs, const std::vector<int> & sources) override;
    int  n_past(int seq) const override { return self_.n_past(seq); }
    int  n_ctx() const override { return self_.n_ctx(); }
    int  n_seq() const override { return self_.n_seq(); }

private:
    // One pass over columns already placed in self_ (self_.pos()/rows()) reading CROSS_SEQS' encoder rows.
    enum class Pass { Step, Prompt, PromptWithRow, Alignment };
    Graph & pass_graph(int n_cols, int n_self_kv, int n_cross_kv, Pass pass);
    void    run_pass(Graph & g, const std::vector<int32_t> & tokens, const std::vector<int> & seqs, int n_self_kv,
                     int n_cross_kv);

    const TransformerDecoder & dec_;
    Executor &                 exec_;
    SequenceCache              self_, cross_;
    std::vector<int>           position_shift_, cross_of_; // per sequence: table row offset, whose encoder rows it reads
    std::map<std::tuple<int, int, int, Pass>, std::unique_ptr<Graph>> graphs_;
    std::map<int, std::unique_ptr<Graph>> cross_graphs_;
    bool                       reads_masks_ = true; // until the first graph says otherwise
    int                        logits_row_  = -1;   // the prompt position whose logits a PromptWithRow pass hands back
    std::vector<int32_t>       positions_;
    std::vector<int64_t>       self_rows_;
    std::vector<int32_t>       self_pos_;
    std::vector<int>           cross_seqs_;
};

} // namespace transcribe
