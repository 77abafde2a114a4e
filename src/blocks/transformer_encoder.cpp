#include "transformer_encoder.h"

#include "core/error.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/norms.h"

#include <cmath>

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};
} // namespace

TransformerEncoderHParams TransformerEncoderHParams::pre_norm_from_file(const ModelFile & f, const std::string & arch) {
    const std::string a = arch + ".";
    TransformerEncoderHParams hp;
    hp.n_layers = int(f.get_u32(a + "enc_layers"));
    hp.hidden   = int(f.get_u32(a + "enc_hidden"));
    hp.n_heads  = int(f.get_u32(a + "enc_heads"));
    hp.inner    = int(f.get_u32(a + "enc_inner"));
    hp.norm_eps = f.get_f32(a + "norm_eps");
    hp.pre_norm = true;
    if (hp.n_layers <= 0 || hp.n_layers > 256 || hp.hidden <= 0 || hp.n_heads <= 0 || hp.hidden % hp.n_heads || hp.inner <= 0 ||
        !(hp.norm_eps > 0)) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid audio encoder hyper-parameters", f.path().c_str());
    }
    return hp;
}

TransformerEncoder::TransformerEncoder(const ModelFile & f, const TransformerEncoderHParams & hp, const std::string & prefix)
    : hp_(hp) {
    const int64_t H = hp.hidden;
    auto linear = [&](const std::string & name, int64_t n_in, int64_t n_out, bool bias = true) {
        return Linear {f.matmul_weight(name + ".weight", {n_in, n_out}), bias ? f.tensor(name + ".bias", {n_out}, F32) : nullptr};
    };
    auto norm = [&](const std::string & name) {
        return Linear {f.tensor(name + ".weight", {H}, F32), f.tensor(name + ".bias", {H}, F32)};
    };
    layers_.resize(size_t(hp.n_layers));
    for (int i = 0; i < hp.n_layers; ++i) {
        const std::string b = prefix + ".blk." + std::to_string(i) + ".";
        Layer & l    = layers_[size_t(i)];
        l.q          = linear(b + "attn_q", H, H);
        l.k          = linear(b + "attn_k", H, H, f.find(b + "attn_k.bias") != nullptr);
        l.v          = linear(b + "attn_v", H, H);
        l.o          = linear(b + "attn_o", H, H);
        l.up         = linear(b + "ffn_up", H, hp.inner);
        l.down       = linear(b + "ffn_down", hp.inner, H);
        l.attn_norm  = norm(b + "attn_norm");
        l.ffn_norm   = norm(b + "ffn_norm");
    }
    if (hp.pre_norm) {
        post_norm_ = norm(prefix + ".post_norm");
    }
}

ggml_tensor * TransformerEncoder::build(ggml_context * ctx, ggml_tensor * x, Taps * taps, int64_t window) const {
    if (hp_.pre_norm) {
        return build_pre_norm(ctx, x, taps, window);
    }
    if (window > 0) {
        fail(TRANSCRIBE_ERR_INTERNAL, "TransformerEncoder: windowed attention is built for pre-norm blocks only");
    }
    const int64_t H = hp_.hidden, nh = hp_.n_heads, hd = H / nh, T = x->ne[1];
    // NeMo scales q and k each by 1/sqrt(sqrt(head_dim)): the scores by 1/sqrt(head_dim).
    const float scale = 1.0f / std::sqrt(float(hd));
    auto heads = [&](ggml_tensor * t) { return ggml_reshape_3d(ctx, t, hd, nh, T); }; // [H, T] -> [hd, nh, T]
    for (size_t il = 0; il < layers_.size(); ++il) {
        const Layer & l = layers_[il];
        const auto    qkv = ops::matmuls(ctx, {l.q.w, l.k.w, l.v.w}, x, {l.q.b, l.k.b, l.v.b});
        ggml_tensor * o   = ops::self_attention(ctx, heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), scale, l.o.w);
        // Post-norm: x = LN(x + attention), then LN(x + down(relu(up(x)))), each add the product's epilogue.
        ops::Epilogue add_to_x;
        add_to_x.residual = x;
        x = ops::layer_norm(ctx, ops::matmul(ctx, l.o.w, ggml_reshape_2d(ctx, o, H, T), l.o.b, add_to_x), l.attn_norm.w,
                            l.attn_norm.b, hp_.norm_eps);
        ops::Epilogue relu_for_down, add_to_ln;
        relu_for_down.relu  = true;
        relu_for_down.feeds = l.down.w;
        add_to_ln.residual  = x;
        ggml_tensor * x_ff  = ops::matmul(ctx, l.down.w, ops::matmul(ctx, l.up.w, x, l.up.b, relu_for_down), l.down.b, add_to_ln);
        x = ops::layer_norm(ctx, x_ff, l.ffn_norm.w, l.ffn_norm.b, hp_.norm_eps);
        if (il == 0 && taps) {
            taps->first = x;
        }
    }
    if (taps) {
        taps->last = x;
    }
    return x;
}

ggml_tensor * TransformerEncoder::build_pre_norm(ggml_context * ctx, ggml_tensor * x, Taps * taps, int64_t window) const {
    const int64_t H = hp_.hidden, nh = hp_.n_heads, hd = H / nh, T = x->ne[1];
    // Whisper scales q and k each by head_dim^-0.25: the scores by 1/sqrt(head_dim).
    const float scale = 1.0f / std::sqrt(float(hd));
    auto heads = [&](ggml_tensor * t) { return ggml_reshape_3d(ctx, t, hd, nh, T); };
    for (size_t il = 0; il < layers_.size(); ++il) {
        const Layer & l = layers_[il];
        ggml_tensor * h   = ops::layer_norm(ctx, x, l.attn_norm.w, l.attn_norm.b, hp_.norm_eps);
        const auto    qkv = ops::matmuls(ctx, {l.q.w, l.k.w, l.v.w}, h, {l.q.b, l.k.b, l.v.b});
        ggml_tensor * o = ops::windowed_self_attention(ctx, heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), window, scale, l.o.w);
        ops::Epilogue add_to_x;
        add_to_x.residual = x;
        x = ops::matmul(ctx, l.o.w, ggml_reshape_2d(ctx, o, H, T), l.o.b, add_to_x);
        h = ops::layer_norm(ctx, x, l.ffn_norm.w, l.ffn_norm.b, hp_.norm_eps);
        add_to_x.residual = x;
        x = ops::matmul(ctx, l.down.w, ops::gelu_erf(ctx, ops::matmul(ctx, l.up.w, h, l.up.b), l.up.w), l.down.b, add_to_x);
        if (il == 0 && taps) {
            taps->first = x;
        }
    }
    if (taps) {
        taps->last = x;
    }
    return ops::layer_norm(ctx, x, post_norm_.w, post_norm_.b, hp_.norm_eps);
}

} // namespace transcribe
