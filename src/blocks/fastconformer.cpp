#include "fastconformer.h"

#include "core/error.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/conv.h"
#include "ops/norms.h"
#include "ops/placement.h"

#include "ggml-alloc.h"

#include <cmath>

namespace transcribe {

namespace {

constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};

ggml_tensor * linear(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b) { return ops::matmul(ctx, w, x, b); }

// The subsampling's feature maps are kept channels-first in memory ([C, W, H]: each position's
// channels contiguous): the pointwise convolutions are then plain products, the bias adds and masks
// whole-row vector ops, and the depthwise convolutions read 16 channels a load (ops/conv.h).

// relu(a 1x1 convolution of x [C, W, H] (contiguous)): [C_out, W, H].
ggml_tensor * pointwise_conv2d_relu(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b) {
    const int64_t C = x->ne[0], W = x->ne[1], H = x->ne[2];
    ops::Epilogue relu;
    relu.relu = true;
    return ggml_reshape_3d(ctx, ops::matmul(ctx, w, ggml_reshape_2d(ctx, x, C, W * H), b, relu), w->ne[1], W, H);
}

int ceil_half(int n) { return (n + 1) / 2; }
// A stride-2 3x3 convolution's output length: padding 1 each side (ceil(n/2)), or causal (n/2 + 1).
int stage_length(int n, bool causal) { return causal ? n / 2 + 1 : ceil_half(n); }

// A module's last product adding SCALE times its result to the residual stream X.
ops::Epilogue residual_epilogue(ggml_tensor * x, float scale) {
    ops::Epilogue e;
    e.residual = x;
    e.scale    = scale;
    return e;
}

} // namespace

FastConformerHParams FastConformerHParams::from_file(const ModelFile & f, int n_mels) {
    FastConformerHParams hp;
    hp.n_layers     = int(f.get_u32("encoder.n_layers"));
    hp.d_model      = int(f.get_u32("encoder.d_model"));
    hp.n_heads      = int(f.get_u32("encoder.n_heads"));
    hp.ff_dim       = int(f.get_u32("encoder.ff_dim"));
    hp.conv_kernel  = int(f.get_u32("encoder.conv_kernel"));
    hp.sub_channels = int(f.get_u32("encoder.sub_channels"));
    hp.ln_eps       = f.get_f32("encoder.layer_norm_eps");
    hp.bn_eps       = f.get_f32("encoder.batch_norm_eps");
    hp.n_mels       = n_mels;
    hp.xscaling     = f.get_bool("encoder.xscaling", false);
    if (f.get_u32("encoder.subsampling_factor") != 8) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: only subsampling factor 8 is supported", f.path().c_str());
    }
    if (hp.n_layers <= 0 || hp.n_layers > 1024 || hp.d_model <= 0 || hp.n_heads <= 0 || hp.d_model % hp.n_heads ||
        hp.ff_dim <= 0 || hp.conv_kernel <= 0 || hp.conv_kernel > 1024 || hp.sub_channels <= 0 || n_mels <= 0 ||
        n_mels > 4096) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid encoder hyper-parameters", f.path().c_str());
    }
    hp.causal_subsampling = f.get_bool("encoder.causal_subsampling", false);
    hp.conv_left = hp.conv_right = (hp.conv_kernel - 1) / 2;
    if (f.has_key("encoder.conv_context")) {
        const std::vector<int32_t> cc = f.get_i32_array("encoder.conv_context");
        if (cc.size() != 2 || cc[0] < 0 || cc[1] < 0 || cc[0] >= hp.conv_kernel || cc[1] >= hp.conv_kernel ||
            cc[0] + cc[1] + 1 != hp.conv_kernel) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: encoder.conv_context must be two paddings summing to the kernel "
                 "size - 1", f.path().c_str());
        }
        hp.conv_left = cc[0], hp.conv_right = cc[1];
    } else if (hp.conv_kernel % 2 == 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: an even conv kernel needs encoder.conv_context", f.path().c_str());
    }
    const std::string conv_norm = f.get_str("encoder.conv_norm", "batch_norm");
    if (conv_norm != "batch_norm" && conv_norm != "layer_norm") {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: encoder.conv_norm %s is none of batch_norm, layer_norm",
             f.path().c_str(), conv_norm.c_str());
    }
    hp.conv_layer_norm = conv_norm == "layer_norm";
    if (f.has_key("encoder.att_context_sizes")) {
        const std::string style = f.get_str("encoder.att_context_style", "regular");
        const std::vector<int32_t> sizes = f.get_i32_array("encoder.att_context_sizes");
        if ((style != "regular" && style != "chunked_limited") || sizes.empty() || sizes.size() % 2) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid encoder.att_context_style / att_context_sizes",
                 f.path().c_str());
        }
        hp.chunked_limited = style == "chunked_limited";
        hp.att_contexts.clear();
        for (size_t i = 0; i < sizes.size(); i += 2) {
            const AttentionContext c {sizes[i], sizes[i + 1]};
            constexpr int kMaxContext = 1 << 20; // frames: far past any window, and no overflow in the masks
            if (c.left < -1 || c.right < -1 || c.left > kMaxContext || c.right > kMaxContext || (hp.chunked_limited && c.right < 0 && sizes.size() == 2) ||
                (hp.chunked_limited && c.left > 0 && c.right >= 0 && c.left % (c.right + 1))) {
                fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid attention context [%d, %d]", f.path().c_str(),
                     c.left, c.right);
            }
            hp.att_contexts.push_back(c);
        }
    }
    if (hp.subsampled_features() <= 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: too few mel bins", f.path().c_str());
    }
    return hp;
}

int FastConformerHParams::subsampled_features() const {
    int f = n_mels;
    for (int i = 0; i < 3; ++i) {
        f = causal_subsampling ? f / 2 + 1 : (f + 1) / 2; // calc_length over the bins (padding 2 + 1, or 1 + 1, kernel 3)
    }
    return f;
}

AttentionContext FastConformerHParams::resolve(const AttentionContext & asked) const {
    for (const AttentionContext & c : att_contexts) {
        if (c == asked) {
            return c;
        }
    }
    std::string list;
    for (const AttentionContext & c : att_contexts) {
        list += (list.empty() ? "" : ", ") + std::to_string(c.left) + "," + std::to_string(c.right);
    }
    fail(TRANSCRIBE_ERR_INVALID_ARG, "attention context %d,%d is not one this model was trained for (it has: %s)",
         asked.left, asked.right, list.c_str());
}

FastConformer::FastConformer(const ModelFile & f, const FastConformerHParams & hp, const std::string & p)
    : hp_(hp), positions_(hp.d_model, hp.n_heads) {
    const int64_t C = hp.sub_channels, d = hp.d_model, ff = hp.ff_dim, H = hp.n_heads, K = hp.conv_kernel;
    auto lin = [&](const std::string & name, int64_t in, int64_t out) {
        return Linear {f.matmul_weight(name + ".weight", {in, out}), f.optional_tensor(name + ".bias", {out}, F32)};
    };
    auto norm = [&](const std::string & name) {
        return Norm {f.tensor(name + ".weight", {d}, F32), f.tensor(name + ".bias", {d}, F32)};
    };
    sub_conv0 = {f.tensor(p + ".sub.conv0.weight", {3, 3, 1, C}, F32), f.tensor(p + ".sub.conv0.bias", {C}, F32)};
    sub_dw1   = {f.tensor(p + ".sub.dw1.weight", {3, 3, 1, C}, F32), f.tensor(p + ".sub.dw1.bias", {C}, F32)};
    sub_dw2   = {f.tensor(p + ".sub.dw2.weight", {3, 3, 1, C}, F32), f.tensor(p + ".sub.dw2.bias", {C}, F32)};
    sub_pw1   = lin(p + ".sub.pw1", C, C);
    sub_pw2   = lin(p + ".sub.pw2", C, C);
    sub_out   = lin(p + ".sub.out", C * hp.subsampled_features(), d);
    layers_.resize(size_t(hp.n_layers));
    for (int i = 0; i < hp.n_layers; ++i) {
        const std::string b = p + ".blk." + std::to_string(i) + ".";
        Layer & l = layers_[size_t(i)];
        l.norm_ff1  = norm(b + "norm_feed_forward1");
        l.norm_att  = norm(b + "norm_self_att");
        l.norm_conv = norm(b + "norm_conv");
        l.norm_ff2  = norm(b + "norm_feed_forward2");
        l.norm_out  = norm(b + "norm_out");
        l.ff1_up    = lin(b + "feed_forward1.up", d, ff);
        l.ff1_down  = lin(b + "feed_forward1.down", ff, d);
        l.ff2_up    = lin(b + "feed_forward2.up", d, ff);
        l.ff2_down  = lin(b + "feed_forward2.down", ff, d);
        l.q   = lin(b + "attn.q", d, d);
        l.k   = lin(b + "attn.k", d, d);
        l.v   = lin(b + "attn.v", d, d);
        l.out = lin(b + "attn.out", d, d);
        l.pos_w      = f.matmul_weight(b + "attn.pos.weight", {d, d});
        l.pos_bias_u = f.tensor(b + "attn.pos_bias_u", {d / H, H}, F32);
        l.pos_bias_v = f.tensor(b + "attn.pos_bias_v", {d / H, H}, F32);
        l.pw1  = lin(b + "conv.pw1", d, 2 * d);
        l.pw2  = lin(b + "conv.pw2", d, d);
        l.dw_w = f.tensor(b + "conv.dw.weight", {K, d}, F32);
        l.dw_b = f.optional_tensor(b + "conv.dw.bias", {d}, F32);
        if (hp.conv_layer_norm) {
            l.norm_dw = norm(b + "conv.norm");
            continue;
        }
        l.bn_w    = f.tensor(b + "conv.bn.weight", {d}, F32);
        l.bn_b    = f.tensor(b + "conv.bn.bias", {d}, F32);
        l.bn_mean = f.tensor(b + "conv.bn.running_mean", {d}, F32);
        l.bn_var  = f.tensor(b + "conv.bn.running_var", {d}, F32);
    }
}

FastConformer::~FastConformer() {
    if (folded_buf_) {
        ggml_backend_buffer_free(folded_buf_);
    }
    if (folded_ctx_) {
        ggml_free(folded_ctx_);
    }
}

void FastConformer::prepare(const ModelFile & f, ggml_backend_dev_t device) {
    const int64_t d = hp_.d_model, K = hp_.conv_kernel;
    ggml_init_params params = {ggml_tensor_overhead() * layers_.size() * 2 + 1024, nullptr, true};
    folded_ctx_ = ggml_init(params);
    for (Layer & l : layers_) {
        l.dw_folded.w = ggml_new_tensor_2d(folded_ctx_, GGML_TYPE_F32, K, d);
        l.dw_folded.b = ggml_new_tensor_1d(folded_ctx_, GGML_TYPE_F32, d);
    }
    folded_buf_ = ggml_backend_alloc_ctx_tensors_from_buft(folded_ctx_, ggml_backend_dev_buffer_type(device));
    if (!folded_buf_) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate folded BatchNorm tensors");
    }
    ggml_backend_buffer_set_usage(folded_buf_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (Layer & l : layers_) {
        std::vector<float> w = f.read_f32(l.dw_w), b = l.dw_b ? f.read_f32(l.dw_b) : std::vector<float>(size_t(d), 0.0f);
        if (hp_.conv_layer_norm) { // nothing to fold: the LayerNorm normalizes after the convolution
            tensor_set(l.dw_folded.w, w);
            tensor_set(l.dw_folded.b, b);
            continue;
        }
        const std::vector<float> g = f.read_f32(l.bn_w), beta = f.read_f32(l.bn_b), mean = f.read_f32(l.bn_mean),
                                 var = f.read_f32(l.bn_var);
        for (int64_t c = 0; c < d; ++c) {
            const double scale = double(g[size_t(c)]) / std::sqrt(double(var[size_t(c)]) + double(hp_.bn_eps));
            for (int64_t k = 0; k < K; ++k) {
                w[size_t(c * K + k)] = float(double(w[size_t(c * K + k)]) * scale);
            }
            b[size_t(c)] = float((double(b[size_t(c)]) - double(mean[size_t(c)])) * scale + double(beta[size_t(c)]));
        }
        tensor_set(l.dw_folded.w, w);
        tensor_set(l.dw_folded.b, b);
    }
}

int FastConformer::subsampled_length(int n_valid_frames) const {
    const bool c = hp_.causal_subsampling;
    return stage_length(stage_length(stage_length(n_valid_frames, c), c), c);
}

ggml_tensor * FastConformer::layer_norm(ggml_context * ctx, ggml_tensor * x, const Norm & n,
                                        const std::vector<ggml_tensor *> & feeds) const {
    return ops::layer_norm(ctx, x, n.w, n.b, hp_.ln_eps, feeds);
}

// The Conformer's half-step feed-forward: x + 0.5 * down(silu(up(LN(x)))).
ggml_tensor * FastConformer::feed_forward(ggml_context * ctx, ggml_tensor * x, const Norm & n, const Linear & up,
                                          const Linear & down) const {
    ops::Epilogue silu_for_down;
    silu_for_down.silu  = true;
    silu_for_down.feeds = down.w;
    ggml_tensor * h = ops::matmul(ctx, up.w, layer_norm(ctx, x, n, {up.w}), up.b, silu_for_down);
    return ops::matmul(ctx, down.w, h, down.b, residual_epilogue(x, 0.5f));
}

// x [d, T], p [hd, H, R >= 2T-1] (relative positions T-1 ... -(T-1), then unused rows).
ggml_tensor * FastConformer::self_attention(ggml_context * ctx, ggml_tensor * x, ggml_tensor * p, const Layer & l) const {
    const int64_t d = hp_.d_model, H = hp_.n_heads, hd = d / H, T = x->ne[1];
    const std::vector<ggml_tensor *> qkv_w = {l.q.w, l.k.w, l.v.w};
    const auto qkv = ops::matmuls(ctx, qkv_w, layer_norm(ctx, x, l.norm_att, qkv_w), {l.q.b, l.k.b, l.v.b});
    ggml_tensor * q = ggml_reshape_3d(ctx, qkv[0], hd, H, T);
    ggml_tensor * k = ggml_reshape_3d(ctx, qkv[1], hd, H, T);
    ggml_tensor * v = ggml_reshape_3d(ctx, qkv[2], hd, H, T);
    ggml_tensor * o = ops::rel_pos_attention(ctx, q, k, v, p, l.pos_bias_u, l.pos_bias_v, 1.0f / std::sqrt(float(hd)),
                                             scores_in_bf16(l));
    return ops::matmul(ctx, l.out.w, ggml_reshape_2d(ctx, o, d, T), l.out.b, residual_epilogue(x, 1.0f));
}

ggml_tensor * FastConformer::conv_module(ggml_context * ctx, ggml_tensor * x, const Layer & l) const {
    ggml_tensor * y = linear(ctx, layer_norm(ctx, x, l.norm_conv, {l.pw1.w}), l.pw1.w, l.pw1.b); // [2d, T]: GLU's two halves
    // BatchNorm is folded into the depthwise kernel and bias (prepare).
    ggml_tensor * h = ops::glu_conv(ctx, y, l.dw_folded.w, l.dw_folded.b);
    return ops::matmul(ctx, l.pw2.w, h, l.pw2.b, residual_epilogue(x, 1.0f));
}

ggml_tensor * FastConformer::subsample(Graph & g, int n_frames, int n_valid) const {
    ggml_context * ctx = g.ctx();
    const bool causal = hp_.causal_subsampling;
    const int T1 = stage_length(n_frames, causal), T2 = stage_length(T1, causal), T3 = stage_length(T2, causal);
    ggml_tensor * mel = g.input("mel", GGML_TYPE_F32, hp_.n_mels, n_frames);
    // Masks zero the frames past the valid length, per channel: [C, 1, T] (a whole-row multiply).
    const int64_t C = hp_.sub_channels;
    ggml_tensor * m1 = g.input("mask1", GGML_TYPE_F32, C, 1, T1);
    ggml_tensor * m2 = g.input("mask2", GGML_TYPE_F32, C, 1, T2);
    ggml_tensor * m3 = g.input("mask3", GGML_TYPE_F32, C, 1, T3);

    // The pointwise convolutions' outputs are masked only where the stage has padded rows (a multiply
    // by ones is exact, and over a long window's maps it is a pass through memory worth skipping).
    const int V2 = stage_length(stage_length(n_valid, causal), causal), V3 = stage_length(V2, causal);
    auto masked = [&](ggml_tensor * y, ggml_tensor * mask, bool padded) { return padded ? ggml_mul(ctx, y, mask) : y; };

    ggml_tensor * x = ops::conv_then_depthwise(ctx, mel, sub_conv0.w, sub_conv0.b, m1, sub_dw1.w, sub_dw1.b, m2, causal); // [C, F/4, T2]
    x = masked(pointwise_conv2d_relu(ctx, x, sub_pw1.w, sub_pw1.b), m2, V2 < T2);
    x = ops::depthwise_conv(ctx, x, sub_dw2.w, sub_dw2.b, m3, causal);
    x = masked(pointwise_conv2d_relu(ctx, x, sub_pw2.w, sub_pw2.b), m3, V3 < T3); // [C, F/8, T3]
    // Flatten each time row channel-major (c * F/8 + f), then the output linear.
    const int64_t F8 = x->ne[1];
    x = ggml_cont(ctx, ggml_permute(ctx, x, 1, 0, 2, 3)); // [F/8, C, T3]
    return linear(ctx, ggml_reshape_2d(ctx, x, F8 * C, T3), sub_out.w, sub_out.b);
}

ggml_tensor * FastConformer::build_subsampling(Graph & g, int n_frames, int n_valid) const {
    ggml_context * ctx = g.ctx();
    ggml_tensor * x = subsample(g, n_frames, n_valid);
    // Keep only the valid rows: later layers mask everything past them, so dropping them is exact.
    return ggml_cont(ctx, ggml_view_2d(ctx, x, hp_.d_model, subsampled_length(n_valid), x->nb[1], 0));
}

ggml_type FastConformer::positions_type(int64_t T) const {
    if (layers_.empty() || hp_.cache_aware()) {
        return GGML_TYPE_COUNT;
    }
    const Layer & first = layers_[0];
    for (const Layer & l : layers_) {
        if (scores_in_bf16(l) != scores_in_bf16(first) || !in_host_memory(l.pos_w)) {
            return GGML_TYPE_COUNT;
        }
    }
    return ops::rel_pos_position_type(hp_.d_model / hp_.n_heads, hp_.n_heads, T, first.pos_bias_u, first.pos_bias_v,
                                      scores_in_bf16(first));
}

ggml_tensor * FastConformer::build_layers(Graph & g, ggml_tensor * x, int n_threads, Taps * taps) const {
    if (hp_.cache_aware()) {
        return build_masked_layers(g, x, x->ne[1], nullptr, n_threads, taps);
    }
    ggml_context * ctx = g.ctx();
    const int64_t T = x->ne[1], H = hp_.n_heads, hd = hp_.d_model / H;
    if (hp_.xscaling) {
        x = ggml_scale(ctx, x, std::sqrt(float(hp_.d_model)));
    }
    // Every layer projects the same position embeddings (with weights of its own): the projections
    // come from the model's table where the attention's kernel takes them, else from this graph.
    std::vector<ggml_tensor *> pos_ws;
    for (const Layer & l : layers_) {
        pos_ws.push_back(l.pos_w);
    }
    const ggml_type table_type = positions_type(T);
    std::shared_ptr<const PositionTable::Projections> table;
    ggml_tensor * pos = nullptr;
    if (table_type != GGML_TYPE_COUNT) {
        table = positions_.projections(pos_ws, T, table_type, n_threads);
        g.keep(table);
    } else {
        pos = ops::activations_for(ctx, pos_ws, g.input("pos_emb", GGML_TYPE_F32, hp_.d_model, PositionTable::rows(T)));
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
        const Layer & l = layers_[i];
        ggml_tensor * p = table ? PositionTable::window(ctx, *table, i, T)
                                : ggml_reshape_3d(ctx, ops::matmul(ctx, l.pos_w, pos), hd, H, PositionTable::rows(T));
        x = feed_forward(ctx, x, l.norm_ff1, l.ff1_up, l.ff1_down);
        x = self_attention(ctx, x, p, l);
        x = conv_module(ctx, x, l);
        x = feed_forward(ctx, x, l.norm_ff2, l.ff2_up, l.ff2_down);
        x = layer_norm(ctx, x, l.norm_out);
        if (taps && i == 0) {
            taps->layer0 = x;
        }
    }
    if (taps) {
        taps->last = x;
    }
    return x;
}

ggml_tensor * FastConformer::build(Graph & g, int n_frames, int n_valid, int n_threads, Taps * taps) const {
    ggml_tensor * x = build_subsampling(g, n_frames, n_valid);
    if (taps) {
        taps->pre_encode = x;
    }
    return build_layers(g, x, n_threads, taps);
}

void FastConformer::set_subsampling_inputs(Graph & g, const std::vector<float> & mel, int n_frames, int n_valid) const {
    const int n_mels = hp_.n_mels;
    std::vector<float> mel_t(size_t(n_mels) * size_t(n_frames));
    for (int m = 0; m < n_mels; ++m) {
        for (int t = 0; t < n_frames; ++t) {
            mel_t[size_t(t) * size_t(n_mels) + size_t(m)] = mel[size_t(m) * size_t(n_frames) + size_t(t)];
        }
    }
    tensor_set(g.get("mel"), mel_t);
    int len = n_valid;
    const char * names[] = {"mask1", "mask2", "mask3"};
    for (const char * name : names) {
        len = stage_length(len, hp_.causal_subsampling);
        ggml_tensor * m = g.get(name); // [C, 1, T]
        std::vector<float> v(size_t(ggml_nelements(m)));
        for (size_t i = 0; i < v.size(); ++i) {
            v[i] = int64_t(i) / m->ne[0] < len ? 1.0f : 0.0f;
        }
        tensor_set(m, v);
    }
}

void FastConformer::set_position_inputs(Graph & g, int64_t T) const {
    if (ggml_tensor * pos = g.find("pos_emb")) {
        positions_.set_embeddings(pos, T);
    }
}

void FastConformer::set_inputs(Graph & g, const std::vector<float> & mel, int n_frames, int n_valid,
                               const AttentionContext & context) const {
    set_subsampling_inputs(g, mel, n_frames, n_valid);
    const int T = subsampled_length(n_valid);
    set_position_inputs(g, T);
    if (hp_.cache_aware()) {
        set_attention_mask(g, T, 0, 0, context);
    }
}

// ---- cache-aware models: limited attention contexts, padded (causal) convolutions, streaming steps

std::vector<float> attention_mask(bool chunked_limited, const AttentionContext & c, int T, int cache, int cache_valid) {
    const int n_keys = cache + T, offset = cache - cache_valid;
    std::vector<float> v(size_t(n_keys) * size_t(T), -INFINITY);
    const int chunk = c.right + 1, left_chunks = c.left >= 0 && chunk > 0 ? c.left / chunk : 10000;
    for (int i = 0; i < T; ++i) {
        const int q = cache + i;
        for (int j = offset; j < n_keys; ++j) {
            bool seen = true;
            if (!chunked_limited) { // regular: triu(-left) and tril(right)
                seen = (c.left < 0 || j >= q - c.left) && (c.right < 0 || j <= q + c.right);
            } else if (c.right < 0) { // chunked_limited with an unlimited right: the left limit alone
                seen = c.left < 0 || j >= q - c.left;
            } else {
                const int diff = q / chunk - j / chunk;
                seen = diff >= 0 && diff <= left_chunks;
            }
            if (seen) {
                v[size_t(i) * size_t(n_keys) + size_t(j)] = 0.0f;
            }
        }
    }
    return v;
}

void FastConformer::set_attention_mask(Graph & g, int T, int cache, int cache_valid, const AttentionContext & c) const {
    tensor_set(g.get("att_mask"), attention_mask(hp_.chunked_limited, c, T, cache, cache_valid));
}

namespace {
// The last KEEP frames of concat(CACHE, X) along time ([d, keep]): what a cache holds after this step.
ggml_tensor * cache_tail(ggml_context * ctx, ggml_tensor * joined, int64_t keep) {
    return ggml_cont(ctx, ggml_view_2d(ctx, joined, joined->ne[0], keep, joined->nb[1],
                                       size_t(joined->ne[1] - keep) * joined->nb[1]));
}
} // namespace

ggml_tensor * FastConformer::masked_self_attention(ggml_context * ctx, ggml_tensor * x, ggml_tensor * p, ggml_tensor * mask,
                                                   const Layer & l, const LayerCache * cache, LayerCache * next) const {
    const int64_t d = hp_.d_model, H = hp_.n_heads, hd = d / H, T = x->ne[1];
    ggml_tensor * xn = layer_norm(ctx, x, l.norm_att);
    const std::vector<ggml_tensor *> qkv_w = {l.q.w, l.k.w, l.v.w};
    const auto qkv = ops::matmuls(ctx, qkv_w, xn, {l.q.b, l.k.b, l.v.b});
    ggml_tensor * k = qkv[1], * v = qkv[2];
    if (cache) {
        // NeMo's MultiHeadAttention.update_cache keeps the layer's inputs and projects them again every step;
        // the projections of the frames before are kept instead (each frame's key and value are its own
        // products either way), and the inputs too, as NeMo's cache_last_channel.
        const int64_t keep = cache->keys->ne[1];
        if (cache->inputs) {
            next->inputs = cache_tail(ctx, ggml_concat(ctx, cache->inputs, xn, 1), keep);
        }
        k = ggml_concat(ctx, cache->keys, k, 1);
        v = ggml_concat(ctx, cache->values, v, 1);
        next->keys   = cache_tail(ctx, k, keep);
        next->values = cache_tail(ctx, v, keep);
    }
    const int64_t Tk = k->ne[1];
    ggml_tensor * q = ggml_reshape_3d(ctx, qkv[0], hd, H, T);
    k = ggml_reshape_3d(ctx, k, hd, H, Tk);
    v = ggml_reshape_3d(ctx, v, hd, H, Tk);
    ggml_tensor * o = ops::rel_pos_attention_masked(ctx, q, k, v, p, l.pos_bias_u, l.pos_bias_v,
                                                    1.0f / std::sqrt(float(hd)), mask);
    return ops::matmul(ctx, l.out.w, ggml_reshape_2d(ctx, o, d, T), l.out.b, residual_epilogue(x, 1.0f));
}

ggml_tensor * FastConformer::padded_conv_module(ggml_context * ctx, ggml_tensor * x, const Layer & l, ggml_tensor * cache,
                                                ggml_tensor ** next_cache) const {
    ggml_tensor * y   = linear(ctx, layer_norm(ctx, x, l.norm_conv, {l.pw1.w}), l.pw1.w, l.pw1.b); // [2d, T]
    ggml_tensor * glu = ops::glu(ctx, y);                                                          // [d, T]
    // CausalConv1D: the cached inputs (or zeros) in front, the right padding behind; the next cache is
    // the last frames of that, right padding included.
    ggml_tensor * ext = cache ? ggml_pad_ext(ctx, ggml_concat(ctx, cache, glu, 1), 0, 0, 0, hp_.conv_right, 0, 0, 0, 0)
                              : ggml_pad_ext(ctx, glu, 0, 0, hp_.conv_left, hp_.conv_right, 0, 0, 0, 0);
    if (cache) {
        *next_cache = cache_tail(ctx, ext, cache->ne[1]);
    }
    ggml_tensor * h = ggml_add(ctx, ops::depthwise_conv_time(ctx, ext, l.dw_folded.w), l.dw_folded.b);
    if (hp_.conv_layer_norm) {
        h = layer_norm(ctx, h, l.norm_dw);
    }
    return ops::matmul(ctx, l.pw2.w, ggml_silu(ctx, h), l.pw2.b, residual_epilogue(x, 1.0f));
}

ggml_tensor * FastConformer::build_masked_layers(Graph & g, ggml_tensor * x, int64_t n_keys, const StreamCaches * caches,
                                                 int n_threads, Taps * taps) const {
    ggml_context * ctx = g.ctx();
    const int64_t T = x->ne[1], d = hp_.d_model, H = hp_.n_heads, hd = d / H, rows = PositionTable::rows(n_keys);
    if (hp_.xscaling) {
        x = ggml_scale(ctx, x, std::sqrt(float(d)));
    }
    // The layers' projected positions depend on the window alone: from the model's table (made once, F32,
    // by the ops the graph would use) where the weights are in host memory, else projected here.
    std::vector<ggml_tensor *> pos_ws;
    bool host = true;
    for (const Layer & l : layers_) {
        pos_ws.push_back(l.pos_w);
        host = host && in_host_memory(l.pos_w);
    }
    std::shared_ptr<const PositionTable::Projections> table;
    ggml_tensor * pos = nullptr;
    if (host && !layers_.empty()) {
        table = positions_.projections(pos_ws, n_keys, GGML_TYPE_F32, n_threads);
        g.keep(table);
    } else {
        pos = g.input("pos_emb", GGML_TYPE_F32, d, rows);
    }
    ggml_tensor * mask = g.input("att_mask", GGML_TYPE_F32, n_keys, T);
    for (size_t i = 0; i < layers_.size(); ++i) {
        const Layer & l = layers_[i];
        LayerCache cache, next;
        ggml_tensor * cache_time = nullptr, * next_time = nullptr;
        if (caches) {
            cache.inputs = caches->inputs.empty() ? nullptr : caches->inputs[i];
            cache.keys   = caches->keys[i];
            cache.values = caches->values[i];
            cache_time   = caches->time[i];
        }
        ggml_tensor * p = table ? PositionTable::window(ctx, *table, i, n_keys)
                                : ggml_reshape_3d(ctx, ops::matmul(ctx, l.pos_w, pos), hd, H, rows);
        x = feed_forward(ctx, x, l.norm_ff1, l.ff1_up, l.ff1_down);
        x = masked_self_attention(ctx, x, p, mask, l, caches ? &cache : nullptr, &next);
        x = padded_conv_module(ctx, x, l, cache_time, &next_time);
        x = feed_forward(ctx, x, l.norm_ff2, l.ff2_up, l.ff2_down);
        x = layer_norm(ctx, x, l.norm_out);
        if (caches) { // each next cache made of its cache (read before) overwrites it
            for (auto [from, to] : {std::pair {next.inputs, cache.inputs}, {next.keys, cache.keys},
                                    {next.values, cache.values}, {next_time, cache_time}}) {
                if (to) {
                    g.expand(ggml_cpy(ctx, from, to));
                }
            }
        }
        if (taps && i == 0) {
            taps->layer0 = x;
        }
    }
    if (taps) {
        taps->last = x;
    }
    return x;
}

ggml_tensor * FastConformer::build_stream_step(Graph & g, int n_frames, int drop, const StreamCaches & caches,
                                              int n_threads, Taps * taps) const {
    ggml_context * ctx = g.ctx();
    ggml_tensor * x = build_subsampling(g, n_frames, n_frames);
    if (drop > 0) {
        const int64_t T = x->ne[1] - drop;
        if (T <= 0) {
            fail(TRANSCRIBE_ERR_INTERNAL, "streaming step of %d mel frames leaves no encoder frame", n_frames);
        }
        x = ggml_cont(ctx, ggml_view_2d(ctx, x, hp_.d_model, T, x->nb[1], size_t(drop) * x->nb[1]));
    }
    if (taps) {
        taps->pre_encode = x;
    }
    return build_masked_layers(g, x, x->ne[1] + caches.keys.front()->ne[1], &caches, n_threads, taps);
}

void FastConformer::set_stream_inputs(Graph & g, const std::vector<float> & mel, int n_frames, int drop, int cache_frames,
                                      int cache_valid, const AttentionContext & context) const {
    set_subsampling_inputs(g, mel, n_frames, n_frames);
    const int T = subsampled_length(n_frames) - drop;
    if (ggml_tensor * pos = g.find("pos_emb")) {
        positions_.set_embeddings(pos, T + cache_frames);
    }
    set_attention_mask(g, T, cache_frames, cache_valid, context);
}

} // namespace transcribe
