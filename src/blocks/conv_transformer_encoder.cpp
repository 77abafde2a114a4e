#include "conv_transformer_encoder.h"

#include "core/error.h"
#include "ops/activations.h"

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};

// conv1d(x, w) + b, kernel 3, padding 1, for x [L, C_in] (time fastest) and w [3, C_in, C_out], through an
// F32 im2col (ggml's conv_1d gathers in F16, which would round the mel) and one product: [C_out, L'] where
// CHANNELS_FIRST, else [L', C_out].
ggml_tensor * conv3(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, int stride, bool channels_first) {
    ggml_tensor * cols = ggml_im2col(ctx, w, x, stride, 0, 1, 0, 1, 0, false, GGML_TYPE_F32); // [3 C_in, L']
    cols = ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1]);
    ggml_tensor * w2 = ggml_reshape_2d(ctx, w, w->ne[0] * w->ne[1], w->ne[2]);
    if (channels_first) {
        return ggml_add(ctx, ggml_mul_mat(ctx, w2, cols), b);
    }
    return ggml_add(ctx, ggml_mul_mat(ctx, cols, w2), ggml_reshape_2d(ctx, b, 1, b->ne[0]));
}
} // namespace

ConvTransformerEncoderHParams ConvTransformerEncoderHParams::from_file(const ModelFile & f, const std::string & arch) {
    const std::string a = arch + ".";
    ConvTransformerEncoderHParams hp;
    hp.n_mels = int(f.get_u32("mel.n_mels"));
    hp.n_ctx  = int(f.get_u32(a + "n_audio_ctx"));
    hp.blocks = TransformerEncoderHParams::pre_norm_from_file(f, arch);
    if (hp.n_mels <= 0 || hp.n_ctx <= 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid audio encoder hyper-parameters", f.path().c_str());
    }
    return hp;
}

ConvTransformerEncoder::ConvTransformerEncoder(const ModelFile & f, const ConvTransformerEncoderHParams & hp)
    : hp_(hp), blocks_(f, hp.blocks, "enc") {
    const int64_t H = hp.blocks.hidden;
    conv1_w_ = f.tensor("enc.conv1.weight", {3, hp.n_mels, H}, F32);
    conv1_b_ = f.tensor("enc.conv1.bias", {H}, F32);
    conv2_w_ = f.tensor("enc.conv2.weight", {3, H, H}, F32);
    conv2_b_ = f.tensor("enc.conv2.bias", {H}, F32);
    pos_     = f.tensor("enc.pos_enc", {H, hp.n_ctx}, F32);
}

ggml_tensor * ConvTransformerEncoder::build(ggml_context * ctx, ggml_tensor * mel, Taps * taps) const {
    ggml_tensor * x = ops::gelu_erf(ctx, conv3(ctx, mel, conv1_w_, conv1_b_, 1, false), conv1_w_); // [L, H]
    x = ops::gelu_erf(ctx, conv3(ctx, x, conv2_w_, conv2_b_, 2, true), conv2_w_);                 // [H, L / 2]
    if (x->ne[1] != pos_->ne[1]) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio encoder input of %lld frames: the model takes %d", (long long) mel->ne[0],
             2 * hp_.n_ctx);
    }
    x = ggml_add(ctx, x, pos_);
    if (taps) {
        taps->conv = x;
    }
    TransformerEncoder::Taps blocks;
    ggml_tensor * out = blocks_.build(ctx, x, &blocks);
    if (taps) {
        taps->layer0 = blocks.first;
    }
    return out;
}

} // namespace transcribe
