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

    static FastConformerHParams from_file(const ModelFile & file, int n_mels);
};

class FastConformer {
public:
    // Looks up every tensor under `prefix` with its expected shape (before the weights are loaded).
    FastConformer(const ModelFile & file, const FastConformerHParams & hp, const std::string & prefix);
    ~FastConformer();
    FastConformer(const FastConformer &) = delete;
    FastConformer & operator=(const FastConformer &) = delete;

    // After the weights are on the device: folds BatchNorm and the depthwise bias into the depthwise kernel.
    void prepare(const ModelFile & file, ggml_backend_dev_t device);

    // Valid lengths after each stride-2 stage: ceil(L/2) three times.
    static int subsampled_length(int n_valid_frames);

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
    // Sets the inputs build() declared, from channel-major mel features.
    void set_inputs(Graph & g, const std::vector<float> & mel_channel_major, int n_frames, int n_valid) const;

    // build() in its two halves, for callers that keep pre-encoded frames (NeMo's bypass_pre_encode,
    // Sortformer's speaker cache): the subsampling alone (input "mel", [d_model, valid frames]) ...
    ggml_tensor * build_subsampling(Graph & g, int n_frames, int n_valid) const;
    void          set_subsampling_inputs(Graph & g, const std::vector<float> & mel_channel_major, int n_frames,
                                         int n_valid) const;
    // ... and the layers over pre-encoded frames x [d_model, T] (every frame valid; input "pos_emb" where
    // the attention does not take its positions from the model's table).
    ggml_tensor * build_layers(Graph & g, ggml_tensor * x, int n_threads, Taps * taps) const;
    void          set_position_inputs(Graph & g, int64_t T) const;

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
    ggml_tensor * subsample(Graph & g, int n_frames, int n_valid) const;

    FastConformerHParams hp_;
    PositionTable positions_;
    Linear sub_conv0, sub_dw1, sub_pw1, sub_dw2, sub_pw2, sub_out;
    std::vector<Layer> layers_;
    ggml_context * folded_ctx_ = nullptr;
    ggml_backend_buffer_t folded_buf_ = nullptr;
};

} // namespace transcribe
