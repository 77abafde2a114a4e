#include "cache_aware_stream.h"

#include "core/npy.h"

#include <algorithm>
#include <string>

namespace transcribe {

CacheAwareStreamingConfig CacheAwareStreamingConfig::from(const FastConformerHParams & hp, const AttentionContext & c) {
    // NeMo streams any model, but only one trained with chunked_limited attention and causal convolutions
    // hears each frame once, as it was trained to: the others are offline models.
    if (!hp.chunked_limited || !hp.causal_subsampling || hp.conv_right != 0 || c.right < 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "this model was not trained for cache-aware streaming (it needs chunked_limited "
             "attention with a right context, causal subsampling and causal convolutions): transcribe it offline");
    }
    constexpr int factor = 8, max_context = 10000;
    CacheAwareStreamingConfig cfg;
    const int lookahead = c.right; // chunked_limited: no cache drop
    cfg.sampling_first   = 1;
    cfg.sampling         = factor;
    cfg.chunk_first      = cfg.sampling_first + factor * lookahead;
    cfg.chunk            = cfg.sampling + factor * lookahead;
    cfg.shift_first      = cfg.chunk_first;
    cfg.shift            = cfg.chunk;
    cfg.valid_out_len    = (cfg.shift - cfg.sampling) / factor + 1;
    cfg.cache_frames     = c.left >= 0 ? c.left : max_context;
    cfg.pre_encode_cache = factor + 1;
    cfg.drop             = 1 + (cfg.pre_encode_cache - 1) / factor;
    return cfg;
}

CacheAwareEncoderStream::CacheAwareEncoderStream(const SpeechEncoder & encoder, const AttentionContext & context,
                                                 SpeechEncoder::Head head, int head_rows)
    : enc_(encoder), context_(encoder.hparams().resolve(context)), head_(std::move(head)), head_rows_(head_rows),
      cfg_(CacheAwareStreamingConfig::from(encoder.hparams(), context_)) {
    keep_inputs_ = dump_enabled();
}

CacheAwareEncoderStream::~CacheAwareEncoderStream() {
    if (cache_buf_) {
        ggml_backend_buffer_free(cache_buf_);
    }
    if (cache_ctx_) {
        ggml_free(cache_ctx_);
    }
}

void CacheAwareEncoderStream::make_caches(Executor & exec) {
    const FastConformerHParams & hp = enc_.hparams();
    const size_t n = size_t(hp.n_layers);
    ggml_init_params params = {ggml_tensor_overhead() * n * 4 + 1024, nullptr, true};
    cache_ctx_ = ggml_init(params);
    if (!cache_ctx_) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate a stream's cache descriptors");
    }
    auto layer_tensors = [&](int64_t frames) {
        std::vector<ggml_tensor *> v(n);
        for (ggml_tensor *& t : v) {
            t = ggml_new_tensor_2d(cache_ctx_, GGML_TYPE_F32, hp.d_model, frames);
        }
        return v;
    };
    if (keep_inputs_) {
        caches_.inputs = layer_tensors(cfg_.cache_frames);
    }
    caches_.keys   = layer_tensors(cfg_.cache_frames);
    caches_.values = layer_tensors(cfg_.cache_frames);
    caches_.time   = layer_tensors(hp.conv_left);
    cache_buf_ = ggml_backend_alloc_ctx_tensors_from_buft(cache_ctx_, exec.buffer_type());
    if (!cache_buf_) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate a stream's caches");
    }
    ggml_backend_buffer_clear(cache_buf_, 0); // get_initial_cache_state: zeros
}

void CacheAwareEncoderStream::make_mel(int to, int n_threads) {
    if (to <= mel_frames_) {
        return;
    }
    const MelFrontend & mel = enc_.mel_frontend();
    const int n_mels = enc_.hparams().n_mels, count = to - mel_frames_;
    const std::vector<float> frames = mel.frames(samples_.data(), held_start_, samples_.size(), finished_ ? n_pushed_ : -1,
                                                 mel_frames_, count, n_threads); // channel-major
    const size_t at = mel_.size();
    mel_.resize(at + size_t(count) * size_t(n_mels));
    for (int t = 0; t < count; ++t) { // kept frame-major: whole frames come and go
        for (int m = 0; m < n_mels; ++m) {
            mel_[at + size_t(t) * size_t(n_mels) + size_t(m)] = frames[size_t(m) * size_t(count) + size_t(t)];
        }
    }
    mel_frames_ = to;
}

void CacheAwareEncoderStream::trim_held() {
    // Samples the next mel frame reads on; mel frames the next chunk's pre-encode cache takes on.
    const MelFrontend & mel = enc_.mel_frontend();
    const int64_t keep_sample = std::min(n_pushed_, std::max<int64_t>(0, mel.frame_first_sample(mel_frames_)));
    if (keep_sample > held_start_) {
        samples_.erase(samples_.begin(), samples_.begin() + (keep_sample - held_start_));
        held_start_ = keep_sample;
    }
    const int keep_frame = std::min(mel_frames_, std::max(0, buffer_idx_ - cfg_.pre_encode_cache));
    if (keep_frame > mel_start_) {
        const size_t n_mels = size_t(enc_.hparams().n_mels);
        mel_.erase(mel_.begin(), mel_.begin() + long(size_t(keep_frame - mel_start_) * n_mels));
        mel_start_ = keep_frame;
    }
}

void CacheAwareEncoderStream::push(Executor & exec, const float * pcm, size_t n, int n_threads, std::vector<Step> & steps) {
    if (finished_) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio pushed to a stream after its end");
    }
    samples_.insert(samples_.end(), pcm, pcm + n);
    n_pushed_ += int64_t(n);
    // Frames whose window lies within the samples pushed are final (the end's padding does not reach them).
    const MelConfig & mc = enc_.mel_frontend().config();
    const int64_t ready = n_pushed_ < mc.n_fft / 2 ? 0 : (n_pushed_ - mc.n_fft / 2) / mc.hop_length + 1;
    make_mel(int(ready), n_threads);
    while (run_step(exec, n_threads, steps)) {
    }
    trim_held();
}

void CacheAwareEncoderStream::finish(Executor & exec, int n_threads, std::vector<Step> & steps) {
    if (finished_) {
        return;
    }
    finished_ = true;
    const MelConfig & mc = enc_.mel_frontend().config();
    make_mel(int(n_pushed_ / mc.hop_length) + 1, n_threads); // NeMo's buffer holds the padded frame too
    while (run_step(exec, n_threads, steps)) {
    }
    trim_held();
    if (dump_enabled() && keep_inputs_) {
        dump_f32("stream_enc", dumped_enc_, {frames_out_, enc_.hparams().d_model});
    }
}

bool CacheAwareEncoderStream::run_step(Executor & exec, int n_threads, std::vector<Step> & steps) {
    const bool first = step_ == 0;
    const int chunk = first ? cfg_.chunk_first : cfg_.chunk;
    if (buffer_idx_ >= mel_frames_ && finished_) {
        return false;
    }
    const int n_new = std::min(chunk, mel_frames_ - buffer_idx_);
    if (n_new < chunk && !finished_) {
        return false; // wait for the rest of the chunk
    }
    if (n_new < (first ? cfg_.sampling_first : cfg_.sampling)) {
        buffer_idx_ = mel_frames_; // too short to give a frame: NeMo's buffer stops here
        return false;
    }
    // The pre-encode cache: the mel frames before the chunk, zeros in front where there are fewer.
    const int n_cache = first ? 0 : cfg_.pre_encode_cache, F = n_cache + n_new, drop = first ? 0 : cfg_.drop;
    const FastConformerHParams & hp = enc_.hparams();
    const int n_mels = hp.n_mels, d = hp.d_model, L = cfg_.cache_frames;
    std::vector<float> chunk_mel(size_t(n_mels) * size_t(F), 0.0f); // channel-major
    for (int i = 0; i < F; ++i) {
        const int t = buffer_idx_ - n_cache + i;
        if (t < 0) {
            continue;
        }
        const float * frame = &mel_[size_t(t - mel_start_) * size_t(n_mels)];
        for (int m = 0; m < n_mels; ++m) {
            chunk_mel[size_t(m) * size_t(F) + size_t(i)] = frame[m];
        }
    }

    const FastConformer & conformer = enc_.conformer();
    if (!cache_buf_) {
        make_caches(exec);
    }
    Graph & g = graphs_.get(int64_t(F) * 2 + (drop > 0), [&] {
        auto graph = std::make_unique<Graph>(16384, "stream step");
        ggml_tensor * enc = conformer.build_stream_step(*graph, F, drop, caches_, n_threads, nullptr);
        graph->output(enc, "enc");
        graph->output(head_(graph->ctx(), enc), "head");
        return graph;
    });
    exec.compute(g, [&] { conformer.set_stream_inputs(g, chunk_mel, F, drop, L, cache_valid_, context_); });
    Step step;
    step.index       = step_;
    step.frames      = int(g.get("enc")->ne[1]);
    step.first_frame = frames_out_;
    step.mel_end     = buffer_idx_ + n_new;
    step.head_out    = tensor_get_f32(g.get("head"));
    cache_valid_ = std::min(cache_valid_ + step.frames, L);
    if (dump_enabled() && keep_inputs_) { // the golden layouts: [layers, 1, L, d] and [layers, 1, d, K-1]
        const std::string k = std::to_string(step_);
        const std::vector<float> enc = tensor_get_f32(g.get("enc"));
        dump_f32(("stream_enc_step" + k).c_str(), enc, {step.frames, d});
        dumped_enc_.insert(dumped_enc_.end(), enc.begin(), enc.end()); // every step's, stacked at the end: stream_enc
        std::vector<float> channel, time;
        for (int l = 0; l < hp.n_layers; ++l) {
            const std::vector<float> in = tensor_get_f32(caches_.inputs[size_t(l)]), t = tensor_get_f32(caches_.time[size_t(l)]);
            channel.insert(channel.end(), in.begin(), in.end());
            for (int c = 0; c < d; ++c) {
                for (int j = 0; j < hp.conv_left; ++j) {
                    time.push_back(t[size_t(j) * size_t(d) + size_t(c)]);
                }
            }
        }
        dump_f32(("stream_cache_last_channel_step" + k).c_str(), channel, {hp.n_layers, 1, L, d});
        dump_f32(("stream_cache_last_time_step" + k).c_str(), time, {hp.n_layers, 1, d, hp.conv_left});
    }
    frames_out_ += step.frames;
    buffer_idx_ += first ? cfg_.shift_first : cfg_.shift;
    ++step_;
    steps.push_back(std::move(step));
    return true;
}

} // namespace transcribe
