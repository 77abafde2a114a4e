#include "sortformer.h"

#include "core/error.h"
#include "core/npy.h"
#include "model/session_base.h"
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
    const std::string st = a + "streaming.";
    SpeakerCacheParams & sp = streaming_;
    streaming_trained_         = f.get_bool(st + "trained", false);
    sp.spkcache_len            = int(f.get_u32(st + "spkcache_len", uint32_t(sp.spkcache_len)));
    sp.fifo_len                = int(f.get_u32(st + "fifo_len", uint32_t(sp.fifo_len)));
    sp.spkcache_update_period  = int(f.get_u32(st + "spkcache_update_period", uint32_t(sp.spkcache_update_period)));
    sp.chunk_len               = int(f.get_u32(st + "chunk_len", uint32_t(sp.chunk_len)));
    sp.chunk_left_context      = int(f.get_u32(st + "chunk_left_context", uint32_t(sp.chunk_left_context)));
    sp.chunk_right_context     = int(f.get_u32(st + "chunk_right_context", uint32_t(sp.chunk_right_context)));
    sp.sil_frames_per_spk      = int(f.get_u32(st + "spkcache_sil_frames_per_spk", uint32_t(sp.sil_frames_per_spk)));
    sp.pred_score_threshold    = f.get_f32(st + "pred_score_threshold", sp.pred_score_threshold);
    sp.scores_boost_latest     = f.get_f32(st + "scores_boost_latest", sp.scores_boost_latest);
    sp.sil_threshold           = f.get_f32(st + "sil_threshold", sp.sil_threshold);
    sp.strong_boost_rate       = f.get_f32(st + "strong_boost_rate", sp.strong_boost_rate);
    sp.weak_boost_rate         = f.get_f32(st + "weak_boost_rate", sp.weak_boost_rate);
    sp.min_pos_scores_rate     = f.get_f32(st + "min_pos_scores_rate", sp.min_pos_scores_rate);
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
    if (encoder_->hparams().cache_aware()) { // its chunks run the layers over full attention alone
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: a Sortformer with a cache-aware (limited-context) encoder is not "
             "supported", path.c_str());
    }
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

void Sortformer::build_head(Graph & g, ggml_tensor * x) const {
    ggml_context * ctx = g.ctx();
    if (proj_w_) {
        x = ops::matmul(ctx, proj_w_, x, proj_b_);
    }
    g.output(x, "encoder_proj");
    TransformerEncoder::Taps taps;
    ggml_tensor * h = transformer_->build(ctx, x, &taps);
    g.output(taps.first, "tf_layer_0");
    g.output(h, "tf_layer_last");
    ggml_tensor * hidden = ops::matmul(ctx, hidden_w_, ggml_relu(ctx, h), hidden_b_);
    g.output(hidden, "head_hidden");
    ggml_tensor * logits = ops::matmul(ctx, spks_w_, ggml_relu(ctx, hidden), spks_b_);
    g.output(logits, "head_logits");
    g.output(ggml_sigmoid(ctx, logits), "preds");
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
        model_.build_head(*graph, graph->input("enc", GGML_TYPE_F32, D, T));
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

SpeakerCacheParams long_form_streaming(const SpeakerCacheParams & model_defaults) {
    SpeakerCacheParams p     = model_defaults;
    p.spkcache_len           = 188;
    p.fifo_len               = 40;
    p.spkcache_update_period = 300;
    p.chunk_len              = 340;
    p.chunk_left_context     = 1;
    p.chunk_right_context    = 40;
    return p;
}

SpeakerActivity SortformerSession::run(const float * pcm, size_t n, const DiarizeOptions & o) {
    const bool long_audio = 1000.0 * double(n) / model_.sample_rate() > model_.max_audio_ms();
    if (o.mode == DiarizeMode::Offline || (o.mode == DiarizeMode::Auto && !long_audio)) {
        return run(pcm, n);
    }
    if (o.mode == DiarizeMode::Auto && !model_.streaming_trained()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG,
             "audio of %.1f s exceeds the diarizer's %.1f s (%s is an offline model: the streaming path, which "
             "has no limit, needs a streaming-trained one such as diar_streaming_sortformer_4spk-v2, or must be "
             "asked for)",
             double(n) / model_.sample_rate(), model_.max_audio_ms() / 1000.0, model_.name().c_str());
    }
    SpeakerCacheParams p = o.mode == DiarizeMode::Auto ? long_form_streaming(model_.streaming_defaults())
                                                       : model_.streaming_defaults();
    for (const auto & [given, field] :
         {std::pair {o.spkcache_len, &p.spkcache_len}, std::pair {o.fifo_len, &p.fifo_len},
          std::pair {o.spkcache_update_period, &p.spkcache_update_period}, std::pair {o.chunk_len, &p.chunk_len},
          std::pair {o.chunk_left_context, &p.chunk_left_context}, std::pair {o.chunk_right_context, &p.chunk_right_context}}) {
        if (given >= 0) {
            *field = given;
        }
    }
    return run_streaming(pcm, n, p);
}

SpeakerActivity SortformerSession::run_streaming(const float * pcm, size_t n, const SpeakerCacheParams & params) {
    if (!pcm || n == 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "diarize: no audio samples");
    }
    const SpeechEncoder & encoder = *model_.encoder_;
    const FastConformer & conformer = encoder.conformer();
    const int64_t D = encoder.hparams().d_model, K = model_.n_speakers_;
    constexpr int kSubsampling = 8; // mel frames per encoder frame
    SpeakerCache cache(params, int(D), int(K));

    // Streaming does not scale the audio; the mel (and its per-feature statistics) is the whole clip's.
    const MelFeatures mel = encoder.mel(pcm, n, n_threads_, /*valid_only=*/true);
    dump_f32("mel", mel.data, {mel.n_mels, mel.n_frames});
    const int total = mel.n_frames, n_mels = mel.n_mels;

    SpeakerActivity out;
    out.n_speakers = int(K);
    out.frame_ms   = encoder.frame_ms();
    const bool dump = dump_enabled();
    std::vector<float> preds_in, cache_after, cache_preds_after, fifo_after, mean_sil;
    // NeMo's streaming_feat_loader: chunk [start, end) with up to lc / rc chunks' worth of context.
    for (int start = 0, end = 0; end < total; start = end) {
        const int left  = std::min(params.chunk_left_context * kSubsampling, start);
        end             = std::min(start + params.chunk_len * kSubsampling, total);
        const int right = std::min(params.chunk_right_context * kSubsampling, total - end);
        const int width = left + (end - start) + right;
        std::vector<float> chunk_mel(size_t(n_mels) * size_t(width));
        for (int m = 0; m < n_mels; ++m) {
            std::copy_n(mel.data.begin() + long(m) * total + (start - left), width, chunk_mel.begin() + long(m) * width);
        }
        Graph & pg = pre_encode_graphs_.get(width, [&] {
            auto graph = std::make_unique<Graph>(1024, "sortformer_pre_encode");
            graph->output(conformer.build_subsampling(*graph, width, width), "chunk");
            return graph;
        });
        exec_.compute(pg, [&] { conformer.set_subsampling_inputs(pg, chunk_mel, width, width); });
        const std::vector<float> chunk = tensor_get_f32(pg.get("chunk"));

        std::vector<float> input = cache.prefix();
        input.insert(input.end(), chunk.begin(), chunk.end());
        const int64_t rows = int64_t(input.size()) / D;
        Graph & g = step_graphs_.get(rows, [&] {
            auto graph = std::make_unique<Graph>(16384, "sortformer_step");
            ggml_tensor * x = graph->input("embs", GGML_TYPE_F32, D, rows);
            model_.build_head(*graph, conformer.build_layers(*graph, x, n_threads_, nullptr));
            return graph;
        });
        exec_.compute(g, [&] {
            tensor_set(g.get("embs"), input);
            conformer.set_position_inputs(g, rows);
        });
        const std::vector<float> preds = tensor_get_f32(g.get("preds"));
        // lc = round(left / 8), rc = ceil(right / 8), as forward_streaming_step passes them.
        const int lc = (left + kSubsampling / 2) / kSubsampling, rc = (right + kSubsampling - 1) / kSubsampling;
        const std::vector<float> chunk_preds = cache.update(chunk, preds, lc, rc);
        out.probs.insert(out.probs.end(), chunk_preds.begin(), chunk_preds.end());
        if (dump) {
            preds_in.insert(preds_in.end(), preds.begin(), preds.end());
            cache_after.insert(cache_after.end(), cache.cache().begin(), cache.cache().end());
            cache_preds_after.insert(cache_preds_after.end(), cache.cache_preds().begin(), cache.cache_preds().end());
            fifo_after.insert(fifo_after.end(), cache.fifo().begin(), cache.fifo().end());
            mean_sil.insert(mean_sil.end(), cache.mean_silence().begin(), cache.mean_silence().end());
        }
    }
    out.n_frames = int(out.probs.size() / size_t(K));
    if (dump) {
        const auto rows = [](const std::vector<float> & v, int64_t width) { return int64_t(v.size()) / width; };
        dump_f32("stream_preds", out.probs, {out.n_frames, K});
        dump_f32("stream_chunk_preds", out.probs, {out.n_frames, K});
        dump_f32("stream_preds_in", preds_in, {rows(preds_in, K), K});
        dump_f32("stream_spkcache_after", cache_after, {rows(cache_after, D), D});
        dump_f32("stream_spkcache_preds_after", cache_preds_after, {rows(cache_preds_after, K), K});
        dump_f32("stream_fifo_after", fifo_after, {rows(fifo_after, D), D});
        dump_f32("stream_mean_sil_emb", mean_sil, {rows(mean_sil, D), D});
    }
    return out;
}

} // namespace transcribe
