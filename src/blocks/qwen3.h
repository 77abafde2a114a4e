// Qwen3 causal LM: GQA with per-head Q/K RMSNorm, NeoX RoPE, SwiGLU, tied output head, KV cache.
// Prefill takes a prompt spliced from token ids and external embedding rows (audio, ...); decoding
// then runs one token per step on a graph built once per padded KV length; argmax stays on the device.
#pragma once

#include "core/backend.h"
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
    int   n_ctx_train = 0;
    float rms_eps     = 1e-6f;
    float rope_theta  = 1e6f;

    static Qwen3HParams from_file(const ModelFile & file);
};

class Qwen3 {
public:
    Qwen3(const ModelFile & file, const Qwen3HParams & hp, const std::string & prefix, const std::string & embd_name);
    const Qwen3HParams & hparams() const { return hp_; }

    // x [hidden, T] at positions pos [T]; K/V of the T tokens written at rows kv_idx of the caches and
    // attention over the first n_kv rows under mask [n_kv, T]. Returns the final-normed hidden states of
    // the last n_out positions (0: all T).
    ggml_tensor * build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, ggml_tensor * pos, ggml_tensor * kv_idx,
                        ggml_tensor * mask, const std::vector<ggml_tensor *> & k_cache,
                        const std::vector<ggml_tensor *> & v_cache, int64_t n_kv, int64_t n_out = 0) const;
    ggml_tensor * embed(ggml_context * ctx, ggml_tensor * ids) const { return ggml_get_rows(ctx, tok_embd_, ids); }
    ggml_tensor * logits(ggml_context * ctx, ggml_tensor * h) const { return ops::matmul(ctx, tok_embd_, h); }

private:
    // A projection W x, plus B (A x) where the file keeps a LoRA adapter beside W (B pre-scaled).
    struct Projection {
        ggml_tensor * w = nullptr, * lora_a = nullptr, * lora_b = nullptr;
    };
    Projection    projection(const ModelFile & f, const std::string & name, int64_t n_in, int64_t n_out) const;
    ggml_tensor * apply(ggml_context * ctx, const Projection & p, ggml_tensor * x) const;
    struct Layer {
        Projection    q, v;
        ggml_tensor * attn_norm, * k, * o, * q_norm, * k_norm, * ffn_norm, * gate, * up, * down;
    };
    Qwen3HParams       hp_;
    ggml_tensor *      tok_embd_   = nullptr;
    ggml_tensor *      out_norm_   = nullptr;
    std::vector<Layer> layers_;
};

// Per-session decoding state: the KV cache and the graphs built for it.
class Qwen3Decoder {
public:
    Qwen3Decoder(const Qwen3 & lm, Executor & exec, ggml_type kv_type, int n_ctx);
    ~Qwen3Decoder();
    Qwen3Decoder(const Qwen3Decoder &) = delete;
    Qwen3Decoder & operator=(const Qwen3Decoder &) = delete;

    // One run of prompt input: token ids, or rows of external embeddings [n_rows][hidden].
    struct Piece {
        std::vector<int32_t> ids;
        const float *        rows   = nullptr;
        int                  n_rows = 0;
        int length() const { return rows ? n_rows : int(ids.size()); }
    };

    // Clears the cache and runs the prompt from position 0; returns the greedy next token. Optionally
    // copies out the logits at the last position and the spliced input embeddings [T][hidden].
    int32_t prefill(const std::vector<Piece> & prompt, std::vector<float> * logits, std::vector<float> * input_embd);
    // Feeds one token at the next position; returns the greedy next token.
    int32_t step(int32_t token, std::vector<float> * logits);

    int n_past() const { return n_past_; }
    int n_ctx() const { return n_ctx_; }

private:
    Graph & decode_graph(int n_kv);

    const Qwen3 &              lm_;
    Executor &                 exec_;
    int                        n_ctx_;
    int                        n_past_ = 0;
    ggml_context *             cache_ctx_ = nullptr;
    ggml_backend_buffer_t      cache_buf_ = nullptr;
    std::vector<ggml_tensor *> k_cache_, v_cache_;
    std::map<std::string, std::unique_ptr<Graph>> prefill_graphs_;
    std::map<int, std::unique_ptr<Graph>>         decode_graphs_;
    std::vector<ggml_fp16_t>                      step_mask_;
};

} // namespace transcribe
