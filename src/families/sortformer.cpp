#include "sortformer.h"

#include "core/error.h"
#include "core/npy.h"
#include "engine/session_base.h"
#include "ops/matmul.h"

#include <algorithm>

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};
} // namespace

Sortformer::Sortformer(const std::string & path, ggml_backend_dev_t device)
    : file_(std::make_unique<ModelFile>(path, WeightOptions {})), device_(device) {
    ModelFile & f = *file_;
    f.set_weight_relayout(matmul_weight_relayout());
    if (!f.has_key("general.architecture") || f.architecture() != "sortformer") {
        fail(TRANSCRIBE_ERR_UNSUPPORTED_ARCH, "model file %s: not a Sortformer diarizer (architecture '%s')", path.c_str(),
             f.has_key("general.architecture") ? f.architecture().c_str() : "");
    }
    const std::string a = "sortformer.";
    name_       = f.get_str("general.name", "sortformer");
    n_speakers_ = int(f.get_u32(a + "n_speakers"));
    max_audio_ms_ = int(f.get_u32(a + "max_audio_ms", 90000));
    TransformerEncoderHParams hp;
    hp.n_layers = int(f.get_u32(a + "tf_layers"));
    hp.hidden   = int(f.get_u32(a + "tf_hidden"));
    hp.n_heads  = int(f.get_u32(a + "tf_heads"));
    hp.inner    = int(f.get_u32(a + "tf_inner"));
    hp.norm_eps = f.get_f32(a + "norm_eps");
    if (n_speakers_ < 1 || n_speakers_ > 64 || hp.n_layers < 1 || hp.hidden < 1 || hp.n_heads < 1 || hp.hidden % hp.n_heads ||
        hp.inner < 1) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid Sortformer hyper-parameters", path.c_str());
    }
    encoder_ = std::make_unique<SpeechEncoder>(f);
    const int64_t D = encoder_->hparams().d_model, H = hp.hidden;
    if (f.find("sf.enc_proj.weight") || D != H) {
        proj_w_ = f.matmul_weight("sf.enc_proj.weight", {D, H});
        proj_b_ = f.tensor("sf.enc_proj.bias", {H}, F32);
    }
    transformer_ = std::make_unique<TransformerEncoder>(f, hp, "sf");
    hidden_w_ = f.matmul_weight("sf.head.hidden.weight", {H, H});
    hidden_b_ = f.tensor("sf.head.hidden.bias", {H}, F32);
    spks_w_   = f.matmul_weight("sf.head.spks.weight", {H, n_speakers_});
    spks_b_   = f.tensor("sf.head.spks.bias", {n_speakers_}, F32);
    f.load_weights(device_);
    encoder_->prepare(f, device_);
}

SortformerSession::SortformerSession(const Sortformer & model, int n_threads)
    : model_(model),
      n_threads_(n_threads),
      exec_(model.device_, n_threads),
      encode_(*model.encoder_, [](ggml_context *, ggml_tensor * enc) { return enc; }, /*valid_only=*/true) {}

SpeakerActivity SortformerSession::run(const float * pcm, size_t n) {
    if (!pcm || n == 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "diarize: no audio samples");
    }
    const double audio_ms = 1000.0 * double(n) / model_.sample_rate();
    if (audio_ms > model_.max_audio_ms()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "audio of %.1f s exceeds the diarizer's %.1f s", audio_ms / 1000.0,
             model_.max_audio_ms() / 1000.0);
    }
    // NeMo's process_signal: the batch scaled by 1 / (its signed maximum + 1e-3).
    const float top = *std::max_element(pcm, pcm + n);
    const float gain = 1.0f / (top + 1e-3f);
    std::vector<float> scaled(pcm, pcm + n);
    for (float & x : scaled) {
        x *= gain;
    }
    Timings timings;
    const std::vector<float> enc = encode_(exec_, scaled.data(), n, n_threads_, timings);
    const int64_t D = model_.encoder_->hparams().d_model, T = int64_t(enc.size()) / D, S = model_.n_speakers_;
    const int64_t H = model_.transformer_->hparams().hidden;
    dump_f32("fc_encoder_out", enc, {T, D});

    Graph & g = graphs_.get(T, [&] {
        auto graph = std::make_unique<Graph>(4096, "sortformer");
        ggml_context * ctx = graph->ctx();
        ggml_tensor * x = graph->input("enc", GGML_TYPE_F32, D, T);
        if (model_.proj_w_) {
            x = ops::matmul(ctx, model_.proj_w_, x, model_.proj_b_);
        }
        graph->output(x, "encoder_proj");
        ggml_tensor * first = nullptr;
        ggml_tensor * h = model_.transformer_->build(ctx, x, &first);
        graph->output(first, "tf_layer_0");
        graph->output(h, "tf_layer_last");
        ggml_tensor * hidden = ops::matmul(ctx, model_.hidden_w_, ggml_relu(ctx, h), model_.hidden_b_);
        graph->output(hidden, "head_hidden");
        ggml_tensor * logits = ops::matmul(ctx, model_.spks_w_, ggml_relu(ctx, hidden), model_.spks_b_);
        graph->output(logits, "head_logits");
        graph->output(ggml_sigmoid(ctx, logits), "preds");
        return graph;
    });
    exec_.compute(g, [&] { tensor_set(g.get("enc"), enc); });
    SpeakerActivity out;
    out.n_frames   = int(T);
    out.n_speakers = int(S);
    out.frame_ms   = model_.encoder_->frame_ms();
    out.probs      = tensor_get_f32(g.get("preds"));
    if (dump_enabled()) {
        dump_f32("encoder_proj", tensor_get_f32(g.get("encoder_proj")), {T, H});
        dump_f32("tf_layer_0", tensor_get_f32(g.get("tf_layer_0")), {T, H});
        dump_f32("tf_layer_last", tensor_get_f32(g.get("tf_layer_last")), {T, H});
        dump_f32("head_hidden", tensor_get_f32(g.get("head_hidden")), {T, H});
        dump_f32("head_logits", tensor_get_f32(g.get("head_logits")), {T, S});
        dump_f32("preds", out.probs, {T, S});
    }
    return out;
}

} // namespace transcribe
