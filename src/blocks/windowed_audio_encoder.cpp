#include "windowed_audio_encoder.h"

#include "core/error.h"
#include "core/npy.h"
#include "ops/activations.h"
#include "ops/conv.h"
#include "ops/matmul.h"

#include <algorithm>

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};
constexpr int64_t CONV_GROUP = 4; // chunks convolved together
} // namespace

WindowedAudioEncoderHParams WindowedAudioEncoderHParams::from_file(const ModelFile & f, const std::string & arch) {
    const std::string a = arch + ".";
    WindowedAudioEncoderHParams hp;
    hp.n_mels          = int(f.get_u32("mel.n_mels"));
    hp.channels        = int(f.get_u32(a + "enc_conv_channels"));
    hp.n_window        = int(f.get_u32(a + "n_window"));
    hp.n_window_infer  = int(f.get_u32(a + "n_window_infer"));
    hp.out_dim         = int(f.get_u32(a + "enc_out_dim"));
    hp.blocks          = TransformerEncoderHParams::pre_norm_from_file(f, arch);
    if (hp.n_mels <= 0 || hp.channels <= 0 || hp.n_window <= 0 || hp.n_window_infer <= 0 ||
        hp.n_window_infer % (2 * hp.n_window) || hp.out_dim <= 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid audio encoder hyper-parameters", f.path().c_str());
    }
    return hp;
}

int WindowedAudioEncoderHParams::conv_length(int frames) {
    for (int i = 0; i < 3; ++i) {
        frames = frames > 0 ? (frames - 1) / 2 + 1 : 0;
    }
    return frames;
}

int WindowedAudioEncoderHParams::tokens(int frames) const {
    const int chunk = 2 * n_window;
    return (frames / chunk) * conv_length(chunk) + conv_length(frames % chunk);
}

WindowedAudioEncoder::WindowedAudioEncoder(const ModelFile & f, const std::string & arch)
    : hp_(WindowedAudioEncoderHParams::from_file(f, arch)), blocks_(f, hp_.blocks, "enc") {
    const int64_t H = hp_.blocks.hidden, C = hp_.channels;
    int64_t freq = hp_.n_mels;
    for (int i = 0; i < 3; ++i) {
        const std::string c = "enc.down" + std::to_string(i + 1);
        conv_w_[i] = i == 0 ? f.tensor(c + ".weight", {3, 3, 1, C}, F32) : f.matmul_weight(c + ".weight", {9 * C, C});
        conv_b_[i] = f.tensor(c + ".bias", {C}, F32);
        freq       = (freq - 1) / 2 + 1;
    }
    conv_out_ = f.matmul_weight("enc.conv_out.weight", {C * freq, H});
    pos_      = f.tensor("enc.pos_enc", {H, WindowedAudioEncoderHParams::conv_length(2 * hp_.n_window)}, F32);
    proj1_w_  = f.matmul_weight("enc.proj1.weight", {H, H});
    proj1_b_  = f.tensor("enc.proj1.bias", {H}, F32);
    proj2_w_  = f.matmul_weight("enc.proj2.weight", {H, hp_.out_dim});
    proj2_b_  = f.tensor("enc.proj2.bias", {hp_.out_dim}, F32);
}

void WindowedAudioEncoder::prepare(const ModelFile & f) {
    MelConfig mc = mel_config_from_file(f);
    if (mc.n_mels != hp_.n_mels) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: mel bins %d != encoder input %d", f.path().c_str(), mc.n_mels, hp_.n_mels);
    }
    mel_ = std::make_unique<MelFrontend>(std::move(mc));
}

ggml_tensor * WindowedAudioEncoder::convolve(ggml_context * ctx, ggml_tensor * chunks) const {
    const int64_t n_chunks = chunks->ne[2];
    // Three 3x3 stride-2 convolutions (padding 1) with GELU, channels first ([C, f, t, n_chunks]): the
    // first direct, the others an im2col times their [9 C, C] matrix.
    ggml_tensor * x = ops::gelu_erf(ctx, ops::conv3x3_s2_single_channel(ctx, chunks, conv_w_[0], conv_b_[0]), conv_w_[0]);
    for (int i = 1; i < 3; ++i) {
        ggml_tensor * cols = ops::im2col3x3_s2(ctx, x, conv_w_[i]); // [9 C, f', t', n]
        const int64_t f = cols->ne[1], t = cols->ne[2];
        x = ops::matmul(ctx, conv_w_[i], ggml_reshape_2d(ctx, cols, cols->ne[0], f * t * n_chunks), conv_b_[i]);
        x = ggml_reshape_4d(ctx, ops::gelu_erf(ctx, x, conv_w_[i]), hp_.channels, f, t, n_chunks);
    }
    // A token's features: its [C, f] block (the converter ordered conv_out's columns so).
    const int64_t C = x->ne[0], freq = x->ne[1], t = x->ne[2];
    return ops::matmul(ctx, conv_out_, ggml_reshape_2d(ctx, x, freq * C, t * n_chunks)); // [H, t * n_chunks]
}

ggml_tensor * WindowedAudioEncoder::build(ggml_context * ctx, ggml_tensor * chunks, int n_tokens, Taps * taps) const {
    const int64_t H = hp_.blocks.hidden, n_chunks = chunks->ne[2];
    const int64_t t = WindowedAudioEncoderHParams::conv_length(int(chunks->ne[0])); // tokens per chunk
    // The convolutions a group of chunks at a time: a group's im2col is the encoder's largest activation,
    // and the groups run one after another in the same memory, their outputs written into one tensor.
    ggml_tensor * x = nullptr;
    for (int64_t g0 = 0; g0 < n_chunks; g0 += CONV_GROUP) {
        const int64_t n = std::min<int64_t>(CONV_GROUP, n_chunks - g0);
        ggml_tensor * y = convolve(ctx, ggml_view_3d(ctx, chunks, chunks->ne[0], chunks->ne[1], n, chunks->nb[1], chunks->nb[2],
                                                     size_t(g0) * chunks->nb[2]));
        if (n == n_chunks) {
            x = y;
            break;
        }
        x = x ? x : ggml_new_tensor_2d(ctx, GGML_TYPE_F32, H, t * n_chunks);
        x = ggml_set_2d_inplace(ctx, x, y, x->nb[1], size_t(g0 * t) * x->nb[1]);
    }
    // Every chunk's positions start at 0; only the last chunk can be short, so the valid tokens are the
    // first N_TOKENS columns.
    ggml_tensor * pos = ggml_view_2d(ctx, pos_, H, t, pos_->nb[1], 0);
    x = ggml_add(ctx, ggml_reshape_3d(ctx, x, H, t, n_chunks), pos);
    x = ggml_view_2d(ctx, ggml_reshape_2d(ctx, x, H, t * n_chunks), H, n_tokens, x->nb[1], 0);
    if (taps) {
        taps->input = x;
    }
    // A window spans n_window_infer / (2 n_window) chunks' tokens (the longest chunk's).
    const int64_t window = t * (hp_.n_window_infer / (2 * hp_.n_window));
    TransformerEncoder::Taps blocks;
    x = blocks_.build(ctx, x, &blocks, window);
    if (taps) {
        taps->layer0 = blocks.first;
        taps->last   = blocks.last;
    }
    x = ops::gelu_erf(ctx, ops::matmul(ctx, proj1_w_, x, proj1_b_), proj1_w_);
    return ops::matmul(ctx, proj2_w_, x, proj2_b_);
}

std::vector<float> WindowedAudioEncoder::Run::operator()(Executor & exec, const float * pcm, size_t n, int n_threads,
                                                         Timings & timings) {
    StageTimer mel_timer;
    const MelFeatures mel = enc_.mel_->compute(pcm, n, n_threads);
    timings.mel_ms = mel_timer.ms();
    dump_f32("mel", mel.data, {mel.n_mels, mel.n_frames});
    return encode(exec, mel.data, mel.n_frames, timings);
}

std::vector<float> WindowedAudioEncoder::Run::encode(Executor & exec, const std::vector<float> & mel, int frames,
                                                     Timings & timings) {
    const auto & hp = enc_.hp_;
    const int n_tokens = hp.tokens(frames);
    if (n_tokens <= 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio of %d mel frames: too short for the audio encoder", frames);
    }
    StageTimer enc_timer;
    // torch's pad_sequence pads every chunk to the longest: a whole one where there are several.
    const int chunk = 2 * hp.n_window, n_chunks = (frames + chunk - 1) / chunk, width = n_chunks > 1 ? chunk : frames;
    chunked_.assign(size_t(width) * size_t(hp.n_mels) * size_t(n_chunks), 0.0f);
    for (int c = 0; c < n_chunks; ++c) {
        const int first = c * chunk, len = std::min(chunk, frames - first);
        for (int m = 0; m < hp.n_mels; ++m) {
            std::copy_n(mel.begin() + long(m) * frames + first, len,
                        chunked_.begin() + (long(c) * hp.n_mels + m) * width);
        }
    }
    Graph & g = graphs_.get(frames, [&] {
        auto graph = std::make_unique<Graph>(8192, "audio_encoder");
        ggml_context * ctx = graph->ctx();
        Taps taps;
        ggml_tensor * out = enc_.build(ctx, graph->input("chunks", GGML_TYPE_F32, width, hp.n_mels, n_chunks), n_tokens, &taps);
        if (dump_enabled()) {
            graph->output(ggml_cont(ctx, taps.input), "enc_input");
            graph->output(taps.layer0, "enc_layer_0");
            graph->output(taps.last, "enc_layer_last");
        }
        graph->output(out, "enc_out");
        return graph;
    });
    exec.compute(g, [&] { tensor_set(g.get("chunks"), chunked_); });
    std::vector<float> out = tensor_get_f32(g.get("enc_out"));
    timings.encode_ms = enc_timer.ms();
    if (dump_enabled()) {
        const int64_t H = hp.blocks.hidden;
        dump_f32("enc_input", tensor_get_f32(g.get("enc_input")), {n_tokens, H});
        dump_f32("enc_layer_0", tensor_get_f32(g.get("enc_layer_0")), {n_tokens, H});
        dump_f32("enc_layer_last", tensor_get_f32(g.get("enc_layer_last")), {n_tokens, H});
        dump_f32("enc_out", out, {n_tokens, hp.out_dim});
    }
    return out;
}

} // namespace transcribe
