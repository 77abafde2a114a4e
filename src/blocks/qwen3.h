// Qwen3 causal LM: GQA with per-head Q/K RMSNorm, NeoX RoPE, SwiGLU, a tied or own output head, KV cache.
// Prefill takes a prompt spliced from token ids and external embedding rows (audio, ...); decoding
// then runs one token per sequence per step, several sequences in one step (their weights read once),
// on a graph built once per batch size and padded KV length; argmax stays on the device.
#pragma once

#include "blocks/sequence_cache.h"
#include "blocks/step_decoder.h"
#include "core/backend.h"
#include "ops/embed.h"
#include "ops/matmul.h"
#include "core/model_file.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace transcribe {

struct Qwen3HParams {
    int   n_layers    = 0;
    int   hidden      = 0;
    int   n_heads     = 0;
    int   n_kv_heads  = 0;
    int   head_dim    = 0;
    int   ff_dim      = 0;
    int   vocab       = 0;
    int   head_rows   = 0; // the output head's rows: the vocabulary's, or a classifier's classes
    int   n_ctx_train = 0;
    float rms_eps     = 1e-6f;
    float rope_theta  = 1e6f;

    static Qwen3HParams from_file(const ModelFile & file);
};

class Qwen3 {
public:
    Qwen3(const ModelFile & file, const Qwen3HParams & hp, const std::string & prefix, const std::string & embd_name);
    const Qwen3HParams & hparams() const { return hp_; }

    // What one graph attends with: x's K/V written at cache rows kv_idx [T] (I64) and, for a prompt
    // (decode false), x [hidden, T] is positions 0..T-1 of one sequence attending over cache rows
    // 0..T-1; for a decode step, column b of x is one token of its own sequence at position pos[b],
    // attending over the pos[b] + 1 rows ending at kv_idx[b]. mask [n_kv, T]: the same as an additive
    // mask over the first n_kv rows, for where our attention kernels do not apply.
    struct Attend {
        ggml_tensor * pos = nullptr, * kv_idx = nullptr, * mask = nullptr;
        const std::vector<ggml_tensor *> * k_cache = nullptr, * v_cache = nullptr; // null: no cache (one pass)
        int64_t n_kv   = 0;
        bool    decode = false;
    };
    // Returns the final-normed hidden states of the last n_out columns (0: all T).
    ggml_tensor * build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, const Attend & at, int64_t n_out = 0) const;
    ggml_tensor * embed(ggml_context * ctx, ggml_tensor * ids) const { return ops::embed(ctx, tok_embd_, ids); }
    ggml_tensor * logits(ggml_context * ctx, ggml_tensor * h) const { return ops::matmul(ctx, output_, h); }

private:
    // A projection W x, plus B (A x) where the file keeps a LoRA adapter beside W (B pre-scaled).
    struct Projection {
        ggml_tensor * w = nullptr, * lora_a = nullptr, * lora_b = nullptr;
    };
    Projection    projection(const ModelFile & f, const std::string & name, int64_t n_in, int64_t n_out) const;
    // Y = P's weights times X, plus P's LoRA update of X where it has one.
    ggml_tensor * with_lora(ggml_context * ctx, const Projection & p, ggml_tensor * y, ggml_tensor * x) const;
    struct Layer {
        Projection    q, v;
        ggml_tensor * attn_norm, * k, * o, * q_norm, * k_norm, * ffn_norm, * gate, * up, * down;
    };
    Qwen3HParams       hp_;
    ggml_tensor *      tok_embd_   = nullptr;
    ggml_tensor *      out_norm_   = nullptr;
    ggml_tensor *      output_     = nullptr; // PREFIX.output.weight, or the token table where the head is tied
    std::vector<Layer> layers_;
};

// Per-session decoding state: the KV cache of up to n_seq sequences (each its own stretch of n_ctx
// rows) and the graphs built for it.
class Qwen3Decoder final : public StepDecoder {
public:
    // A sequence's stretch of the cache is cleared when it is first prefilled, so stretches never used
    // cost no memory on a CPU.
    Qwen3Decoder(const Qwen3 & lm, Executor & exec, ggml_type kv_type, int n_ctx, int n_seq = 1);
    Qwen3Decoder(const Qwen3Decoder &) = delete;
    Qwen3Decoder & operator=(const Qwen3Decoder &) = delete;

    // One run of prompt input: token ids, or rows of external embeddings [n_rows][hidden].
    struct Piece {
        std::vector<int32_t> ids;
        const float *        rows   = nullptr;
        int                  n_rows = 0;
        int length() const { return rows ? n_rows : int(ids.size()); }
    };

    // Restarts sequence SEQ with the prompt from position 0; returns the greedy next token. Optionally
    // copies out the logits at the last position and the spliced input embeddings [T][hidden].
    int32_t prefill(int seq, const std::vector<Piece> & prompt, std::vector<float> * logits, std::vector<float> * input_embd);
    // The prompt's logits at POSITIONS, [positions][head rows] (a classifier over chosen slots: the forced
    // aligner's timestamps), from one causal pass that keeps nothing: its K/V stay in the graph (F32), the
    // cache untouched.
    std::vector<float> logits_at(const std::vector<Piece> & prompt, const std::vector<int32_t> & positions);
    // StepDecoder: one graph a step (built once per column count, and per padded cache length where an
    // op reads the mask); rewound rows are rewritten by the next tokens fed.
    void step(const std::vector<int> & seqs, const std::vector<int32_t> & tokens, std::vector<int32_t> & next,
              std::vector<std::vector<float>> * logits) override;
    void rewind(int seq, int n_past) override;
    void reorder(const std::vector<int> & seqs, const std::vector<int> & sources) override { cache_.gather(seqs, sources); }
    int  n_past(int seq) const override { return cache_.n_past(seq); }
    int  n_ctx() const override { return cache_.n_ctx(); }
    int  n_seq() const override { return cache_.n_seq(); }
    // Bytes of cache one sequence's stretch takes.
    static size_t bytes_per_sequence(const Qwen3HParams & hp, ggml_type kv_type, int n_ctx);

private:
    // The graph of a prompt of these pieces' shape, with the logits of its last position (N_SELECT 0) or of
    // N_SELECT positions given as the "select" input; restarts SEQ's rows (SEQ < 0: no cache).
    Graph & prompt_graph(int seq, const std::vector<Piece> & prompt, int n_select);
    void    run_prompt(Graph & g, int seq, const std::vector<Piece> & prompt, const std::vector<int32_t> & select);
    Graph & decode_graph(int n_batch, int n_kv);

    const Qwen3 &              lm_;
    Executor &                 exec_;
    SequenceCache              cache_;
    std::map<std::string, std::unique_ptr<Graph>>           prefill_graphs_;
    std::map<std::pair<int, int>, std::unique_ptr<Graph>>   decode_graphs_;
    bool                       decode_reads_mask_ = true; // until the first decode graph says otherwise
};

} // namespace transcribe
