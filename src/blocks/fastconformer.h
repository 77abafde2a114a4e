// NeMo FastConformer encoder: dw_striding x8 subsampling with per-stage length masks, then conformer
// layers (macaron FF, relative-position MHSA with untied u/v biases, conv module with BatchNorm folded
// at load). Shared by every family built on this encoder (Canary-Qwen, Canary AED, Parakeet).
#pragma once

#include "core/backend.h"
#include "core/model_file.h"
#include "position_table.h"

#include <memory>
#include <string>
#include <vector>

namespace transcribe {

// How far a frame's self-attention reaches (NeMo's att_context_size [left, right]; -1: unlimited).
struct AttentionContext {
    int left  = -1;
    int right = -1;
    bool operator==(const AttentionContext & o) const { return left == o.left && right == o.right; }
};

struct FastConformerHParams {
    int   n_layers     = 0;
    int   d_model      = 0;
    int   n_heads      = 0;
    int   ff_dim       = 0;
    int   conv_kernel  = 0;
    int   sub_channels = 0;
    int   n_mels       = 0;
    float ln_eps       = 1e-5f;
    float bn_eps       = 1e-5f;
    bool  xscaling     = false; // the subsampled input times sqrt(d_model) before the layers
    // Cache-aware streaming models (NeMo's causal_downsampling, conv_context_size, conv_norm_type,
    // att_context_style / att_context_size); the defaults are the offline FastConformer's.
    bool causal_subsampling = false; // CausalConv2D: pad 2 before, 1 after; n -> n / 2 + 1
    int  conv_left = 0, conv_right = 0; // the conv module's depthwise padding
    bool conv_layer_norm = false;    // a LayerNorm after the depthwise conv instead of BatchNorm
    bool chunked_limited = false;    // att_context_style chunked_limited (else regular)
    std::vector<AttentionContext> att_contexts {AttentionContext {}}; // the first is the default

    static FastConformerHParams from_file(const ModelFile & file, int n_mels);
    // Whether the layers need an attention mask (any limited context) and ggml's ops for the
    // convolutions and attention our fused kernels do not cover.
    bool cache_aware() const {
        return causal_subsampling || conv_layer_norm || conv_left != conv_right || att_contexts.size() != 1 ||
               !(att_contexts[0] == AttentionContext {});
    }
    // The frequency bins the subsampling leaves of n_mels.
    int subsampled_features() const;
    // CONTEXT if it is one of the model's (an empty one: the default), else INVALID_ARG listing them.
    AttentionContext resolve(const AttentionContext & context) const;
};

// NeMo's _create_masks (ConformerEncoder) over CACHE earlier frames, the first CACHE - CACHE_VALID of them
// empty slots, then a window of T: for query i (frame CACHE + i) and key j, 0 where the attention style
// (chunked_limited, else regular) and CONTEXT let i see j, -INFINITY elsewhere; [T][CACHE + T].
std::vector<float> attention_mask(bool chunked_limited, const AttentionContext & context, int T, int cache, int cache_valid);

class FastConformer {
public:
    // Looks up every tensor under `prefix` with its expected shape (before the weights are loaded).
    FastConformer(const ModelFile & file, const FastConformerHParams & hp, const std::string & prefix);
    ~FastConformer();
    FastConformer(const FastConformer &) = delete;
    FastConformer & operator=(const FastConformer &) = delete;

    // After the weights are on the device: folds BatchNorm and the depthwise bias into the depthwise kernel.
    void prepare(const ModelFile & file, ggml_backend_dev_t device);

    // Valid lengths after each stride-2 stage: ceil(L/2) three times (causal subsampling: L/2 + 1).
    int subsampled_length(int n_valid_frames) const;

    struct Taps {
        ggml_tensor * pre_encode = nullptr; // [d_model, T]
        ggml_tensor * layer0     = nullptr;
        ggml_tensor * last       = nullptr;
    };
    // Graph input "mel" is [n_mels, n_frames] (frequency fastest). Returns [d_model, L3]. The graph is
    // for this n_valid as well as n_frames (its output rows and masking follow it): set its inputs with
    // the same.
    // N_THREADS: what the position projections are made with where the graph takes them from the
    // model's table (PositionTable), the first time a window this long is asked.
    ggml_tensor * build(Graph & g, int n_frames, int n_valid, int n_threads, Taps * taps) const;
    // Sets the inputs build() declared, from channel-major mel features; CONTEXT: the attention's reach
    // (models with limited contexts; resolved: one of hparams().att_contexts).
    void set_inputs(Graph & g, const std::vector<float> & mel_channel_major, int n_frames, int n_valid,
                    const AttentionContext & context = {}) const;

    // build() in its two halves, for callers that keep pre-encoded frames (NeMo's bypass_pre_encode,
    // Sortformer's speaker cache): the subsampling alone (input "mel", [d_model, valid frames]) ...
    ggml_tensor * build_subsampling(Graph & g, int n_frames, int n_valid) const;
    void          set_subsampling_inputs(Graph & g, const std::vector<float> & mel_channel_major, int n_frames,
                                         int n_valid) const;
    // ... and the layers over pre-encoded frames x [d_model, T] (every frame valid; input "pos_emb" where
    // the attention does not take its positions from the model's table).
    ggml_tensor * build_layers(Graph & g, ggml_tensor * x, int n_threads, Taps * taps) const;
    void          set_position_inputs(Graph & g, int64_t T) const;

    // A stream's caches, each layer's tensors outside the graph (the stream's own memory), which a step
    // reads and then overwrites with the next step's: the self-attention's inputs of the frames before
    // [d_model, cache_frames] (NeMo's cache_last_channel; optional: only dumps read it), their key and
    // value projections (what the attention reads instead of projecting them again), and the depthwise
    // conv's inputs before [d_model, conv_left] (NeMo's cache_last_time).
    struct StreamCaches {
        std::vector<ggml_tensor *> inputs, keys, values, time;
    };
    // One step of NeMo's cache-aware streaming (ConformerEncoder.forward with caches): inputs "mel"
    // [n_mels, n_frames] (the pre-encode cache frames, then the new ones), "pos_emb" and "att_mask"
    // (set_stream_inputs); CACHES read and updated; DROP subsampled frames dropped in front
    // (drop_extra_pre_encoded). Returns [d_model, T].
    // N_THREADS: as for build().
    ggml_tensor * build_stream_step(Graph & g, int n_frames, int drop, const StreamCaches & caches, int n_threads,
                                    Taps * taps) const;
    // Sets build_stream_step's inputs but the caches: mel as in set_inputs, the positions of cache + chunk,
    // and the mask of CONTEXT over them where the cache's first CACHE_FRAMES - CACHE_VALID slots are empty.
    void set_stream_inputs(Graph & g, const std::vector<float> & mel_channel_major, int n_frames, int drop,
                           int cache_frames, int cache_valid, const AttentionContext & context) const;

    const FastConformerHParams & hparams() const { return hp_; }

private:
    struct Norm {
        ggml_tensor * w = nullptr;
        ggml_tensor * b = nullptr;
    };
    struct Linear {
        ggml_tensor * w = nullptr;
        ggml_tensor * b = nullptr; // absent in use_bias=false models (Parakeet)
    };
    struct Layer {
        Norm   norm_ff1, norm_att, norm_conv, norm_ff2, norm_out;
        Linear ff1_up, ff1_down, ff2_up, ff2_down;
        Linear q, k, v, out;
        ggml_tensor * pos_w = nullptr;
        ggml_tensor * pos_bias_u = nullptr;
        ggml_tensor * pos_bias_v = nullptr;
        Linear pw1, pw2;
        ggml_tensor * dw_w = nullptr; // raw kernel [K, d]
        ggml_tensor * dw_b = nullptr; // optional
        ggml_tensor * bn_w = nullptr, * bn_b = nullptr, * bn_mean = nullptr, * bn_var = nullptr;
        Norm norm_dw; // conv_norm_type layer_norm: after the depthwise conv
        Linear dw_folded; // kernel * bn_scale, (bias - mean) * bn_scale + bn_shift
    };

    // FEEDS: the weights the result is multiplied by, and nothing else reads it (ops::layer_norm).
    ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, const Norm & n, const std::vector<ggml_tensor *> & feeds = {}) const;
    // Each module adds its output to the residual stream X it reads (through its own LayerNorm): the
    // addition is the last product's epilogue.
    ggml_tensor * feed_forward(ggml_context * ctx, ggml_tensor * x, const Norm & n, const Linear & up, const Linear & down) const;
    // Models stored in BF16 or quantized score in BF16 (their drift bounds hold it); F32 models in F32.
    static bool scores_in_bf16(const Layer & l) { return l.q.w->type != GGML_TYPE_F32; }
    // The type the layers' attention takes its projected positions in from the model's table for a window
    // of T frames, or GGML_TYPE_COUNT where the graph projects them itself (ggml's attention, weights
    // off the host, layers scoring in different types).
    ggml_type positions_type(int64_t T) const;
    // P: the layer's projected positions [head_dim, heads, >= 2T-1].
    ggml_tensor * self_attention(ggml_context * ctx, ggml_tensor * x, ggml_tensor * p, const Layer & l) const;
    ggml_tensor * conv_module(ggml_context * ctx, ggml_tensor * x, const Layer & l) const;
    // Cache-aware models' modules: the attention over CACHE (its frames' inputs before this window's, or
    // null) and this window under MASK, the conv module with its padding or the cached frames in front;
    // *NEXT_CACHE: what the next step's cache is (with a cache).
    struct LayerCache {
        ggml_tensor * inputs = nullptr; // [d_model, cache frames]: the attention's inputs (NeMo's cache_last_channel), or none
        ggml_tensor * keys   = nullptr; // their key and value projections
        ggml_tensor * values = nullptr;
    };
    ggml_tensor * masked_self_attention(ggml_context * ctx, ggml_tensor * x, ggml_tensor * p, ggml_tensor * mask,
                                        const Layer & l, const LayerCache * cache, LayerCache * next) const;
    ggml_tensor * padded_conv_module(ggml_context * ctx, ggml_tensor * x, const Layer & l, ggml_tensor * cache,
                                     ggml_tensor ** next_cache) const;
    ggml_tensor * subsample(Graph & g, int n_frames, int n_valid) const;
    // The "att_mask" input: attention_mask() of the model's style over CACHE slots (the last CACHE_VALID
    // filled) and a window of T.
    void set_attention_mask(Graph & g, int T, int cache, int cache_valid, const AttentionContext & context) const;
    // The layers of a cache-aware model over x [d_model, T] with NKEYS attention keys (cache + window).
    ggml_tensor * build_masked_layers(Graph & g, ggml_tensor * x, int64_t n_keys, const StreamCaches * caches, int n_threads,
                                      Taps * taps) const;

    FastConformerHParams hp_;
    PositionTable positions_;
    Linear sub_conv0, sub_dw1, sub_pw1, sub_dw2, sub_pw2, sub_out;
    std::vector<Layer> layers_;
    ggml_context * folded_ctx_ = nullptr;
    ggml_backend_buffer_t folded_buf_ = nullptr;
};

} // namespace transcribe
