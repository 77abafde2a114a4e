// Silero VAD in ggml. The convolutional front end of a chunk does not depend on the LSTM state, so a
// block of chunks shares one graph: the STFT (a product with the stored basis over im2col frames), the
// four conv blocks (F32 im2col + product: ggml_conv_1d's F16 im2col moves probabilities by 5e-3) and
// the LSTM's input projection run as products over the whole block; the recurrence follows step by
// step in the same graph, each step's h and c written to a column of the session's state tensors,
// which the head then reads as one matrix.
#include "silero_vad.h"

#include "core/error.h"
#include "ops/lstm.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <cstring>

namespace transcribe {

namespace {

constexpr int kMaxBlock = 256;  // chunks per graph (8 s at 16 kHz)
constexpr int kMinBlock = 8;
constexpr int kStride[4] = {1, 2, 2, 1};
constexpr int kChannels[4] = {128, 64, 64, 128};

int block_size(size_t remaining) {
    int b = kMinBlock;
    while (b < kMaxBlock && size_t(b) < remaining) {
        b *= 2;
    }
    return b;
}

} // namespace

SileroVad::SileroVad(const std::string & path)
    : file_(std::make_unique<ModelFile>(path, WeightOptions {})),
      device_(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) {
    ModelFile & f = *file_;
    if (!f.has_key("general.architecture") || f.architecture() != "silero_vad") {
        fail(TRANSCRIBE_ERR_UNSUPPORTED_ARCH, "model file %s: not a Silero VAD model (architecture '%s')", path.c_str(),
             f.get_str("general.architecture", "").c_str());
    }
    name_ = f.get_str("general.name", "silero-vad");
    if (f.get_u32("silero_vad.hidden") != kHidden) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: LSTM width %u, expected %d", path.c_str(),
             f.get_u32("silero_vad.hidden"), kHidden);
    }
    for (int32_t rate : f.get_i32_array("silero_vad.sample_rates")) {
        const std::string k = "silero_vad.sr" + std::to_string(rate) + ".";
        SileroVadBranch b;
        b.rate    = rate;
        b.n_fft   = int(f.get_u32(k + "n_fft"));
        b.hop     = int(f.get_u32(k + "hop"));
        b.context = int(f.get_u32(k + "context"));
        b.chunk   = int(f.get_u32(k + "chunk"));
        // The encoder must reduce the STFT frames of one chunk to one step for the LSTM.
        if (b.n_fft < 8 || b.n_fft > 4096 || b.hop != b.n_fft / 2 || b.context <= 1 || b.chunk < b.context ||
            (b.padded() - b.n_fft) / b.hop + 1 != 4) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: inconsistent %d Hz branch (n_fft %d, hop %d, context %d, chunk %d)",
                 path.c_str(), rate, b.n_fft, b.hop, b.context, b.chunk);
        }
        const std::string t = "sr" + std::to_string(rate) + ".";
        const int64_t nb = b.n_bins(), h = kHidden;
        b.basis = f.tensor(t + "stft.basis", {b.n_fft, 2 * nb}, {GGML_TYPE_F32});
        int64_t in = nb;
        for (int i = 0; i < 4; ++i) {
            const std::string e = t + "encoder." + std::to_string(i) + ".";
            b.enc_w[i] = f.tensor(e + "weight", {3, in, kChannels[i]}, {GGML_TYPE_F32});
            b.enc_b[i] = f.tensor(e + "bias", {kChannels[i]}, {GGML_TYPE_F32});
            in = kChannels[i];
        }
        b.w_ih   = f.tensor(t + "lstm.weight_ih", {h, 4 * h}, {GGML_TYPE_F32});
        b.w_hh   = f.tensor(t + "lstm.weight_hh", {h, 4 * h}, {GGML_TYPE_F32});
        b.b_ih   = f.tensor(t + "lstm.bias_ih", {4 * h}, {GGML_TYPE_F32});
        b.b_hh   = f.tensor(t + "lstm.bias_hh", {4 * h}, {GGML_TYPE_F32});
        b.head_w = f.tensor(t + "head.weight", {h}, {GGML_TYPE_F32});
        b.head_b = f.tensor(t + "head.bias", {1}, {GGML_TYPE_F32});
        branches_[rate] = b;
    }
    if (branches_.empty()) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: no sample-rate branch", path.c_str());
    }
    f.load_weights(device_);
}

const SileroVadBranch & SileroVad::branch(int sample_rate) const {
    auto it = branches_.find(sample_rate);
    if (it == branches_.end()) {
        std::string have;
        for (const auto & [r, b] : branches_) {
            have += (have.empty() ? "" : ", ") + std::to_string(r);
        }
        fail(TRANSCRIBE_ERR_INVALID_ARG, "Silero VAD runs at %s Hz, not %d", have.c_str(), sample_rate);
    }
    return it->second;
}

std::vector<int> SileroVad::sample_rates() const {
    std::vector<int> r;
    for (const auto & [rate, b] : branches_) {
        r.push_back(rate);
    }
    return r;
}

SileroVadSession::SileroVadSession(const SileroVad & model, int n_threads)
    : model_(model), exec_(model.device(), std::max(1, n_threads)), state_(2 * SileroVad::kHidden, 0.0f) {
    ggml_init_params p {2 * ggml_tensor_overhead(), nullptr, true};
    state_ctx_ = ggml_init(p);
    if (!state_ctx_) {
        fail(TRANSCRIBE_ERR_OOM, "cannot create the VAD state context");
    }
    h_all_ = ggml_new_tensor_2d(state_ctx_, GGML_TYPE_F32, SileroVad::kHidden, kMaxBlock + 1);
    c_all_ = ggml_new_tensor_2d(state_ctx_, GGML_TYPE_F32, SileroVad::kHidden, kMaxBlock + 1);
    state_buf_ = ggml_backend_alloc_ctx_tensors_from_buft(state_ctx_, exec_.buffer_type());
    if (!state_buf_) {
        ggml_free(state_ctx_);
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate the VAD state");
    }
}

SileroVadSession::~SileroVadSession() {
    ggml_backend_buffer_free(state_buf_);
    ggml_free(state_ctx_);
}

Graph & SileroVadSession::graph(const SileroVadBranch & b, int n_chunks, bool taps) {
    auto & slot = graphs_[{b.rate, n_chunks, taps}];
    if (slot) {
        return *slot;
    }
    const int64_t H = SileroVad::kHidden, T = n_chunks, nb = b.n_bins();
    auto g = std::make_unique<Graph>(size_t(24 * T + 256), "vad");
    ggml_context * ctx = g->ctx();

    // STFT: the padded chunks' overlapping frames times the stored basis, then |re + i im|.
    ggml_tensor * x = g->input("vad_input", GGML_TYPE_F32, b.padded(), 1, T);
    ggml_tensor * kernel = ggml_reshape_3d(ctx, b.basis, b.n_fft, 1, 2 * nb);
    ggml_tensor * frames = ggml_im2col(ctx, kernel, x, b.hop, 0, 0, 0, 1, 0, false, GGML_TYPE_F32);
    const int64_t n_frames = frames->ne[1];
    ggml_tensor * spec = ggml_mul_mat(ctx, b.basis, ggml_reshape_2d(ctx, frames, b.n_fft, n_frames * T));
    ggml_tensor * re = ggml_view_2d(ctx, spec, nb, n_frames * T, spec->nb[1], 0);
    ggml_tensor * im = ggml_view_2d(ctx, spec, nb, n_frames * T, spec->nb[1], size_t(nb) * sizeof(float));
    ggml_tensor * cur = ggml_sqrt(ctx, ggml_add(ctx, ggml_mul(ctx, re, re), ggml_mul(ctx, im, im)));
    if (taps) {
        g->output(cur, "magnitude");
    }

    // Encoder: [channels, length, chunk] in, each conv through an F32 im2col of [length, channels, chunk].
    cur = ggml_reshape_3d(ctx, cur, nb, n_frames, T);
    for (int i = 0; i < 4; ++i) {
        const int64_t in_ch = cur->ne[0];
        ggml_tensor * seq  = ggml_cont(ctx, ggml_permute(ctx, cur, 1, 0, 2, 3));
        ggml_tensor * cols = ggml_im2col(ctx, b.enc_w[i], seq, kStride[i], 0, 1, 0, 1, 0, false, GGML_TYPE_F32);
        const int64_t len = cols->ne[1];
        ggml_tensor * y = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, b.enc_w[i], 3 * in_ch, kChannels[i]),
                                       ggml_reshape_2d(ctx, cols, 3 * in_ch, len * T));
        y   = ggml_relu(ctx, ggml_add(ctx, y, b.enc_b[i]));
        cur = ggml_reshape_3d(ctx, y, kChannels[i], len, T);
        if (taps) {
            g->output(cur, ("enc" + std::to_string(i)).c_str());
        }
    }
    if (cur->ne[1] != 1 || cur->ne[0] != H) {
        fail(TRANSCRIBE_ERR_INTERNAL, "VAD encoder left %lld steps of %lld channels per chunk", (long long) cur->ne[1],
             (long long) cur->ne[0]);
    }

    // LSTM: the input half of the gates for every chunk at once, then the recurrence.
    ggml_tensor * xin = ggml_mul_mat(ctx, b.w_ih, ggml_reshape_2d(ctx, cur, H, T));
    xin = ggml_add(ctx, ggml_add(ctx, xin, b.b_ih), b.b_hh);
    const size_t col = size_t(H) * sizeof(float);
    ggml_tensor * h = ggml_view_1d(ctx, h_all_, H, 0);
    ggml_tensor * c = ggml_view_1d(ctx, c_all_, H, 0);
    for (int64_t t = 0; t < T; ++t) {
        ggml_tensor * z = ggml_add(ctx, ggml_view_1d(ctx, xin, 4 * H, size_t(t) * xin->nb[1]), ggml_mul_mat(ctx, b.w_hh, h));
        const LstmState next = ops::lstm_cell(ctx, z, c, b.w_hh);
        // The next step reads the copies, so they are ordered before it.
        c = ggml_cpy(ctx, next.c, ggml_view_1d(ctx, c_all_, H, size_t(t + 1) * col));
        h = ggml_cpy(ctx, next.h, ggml_view_1d(ctx, h_all_, H, size_t(t + 1) * col));
        g->expand(c);
        g->expand(h);
    }

    // Head on every step's h (columns 1..T, all written above: graph nodes run in order).
    ggml_tensor * hs = ggml_view_2d(ctx, h_all_, H, T, col, col);
    ggml_tensor * logit = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, b.head_w, H, 1), ggml_relu(ctx, hs));
    logit = ggml_add(ctx, logit, b.head_b);
    if (taps) {
        g->output(logit, "logit");
    }
    g->output(ggml_sigmoid(ctx, logit), "prob");
    slot = std::move(g);
    return *slot;
}

std::vector<float> SileroVadSession::run(const float * pcm, size_t n, int sample_rate,
                                         const std::function<bool()> & should_abort, SileroVadTaps * taps) {
    SileroVadStream from_zero;
    from_zero.sample_rate = sample_rate;
    return run(from_zero, pcm, n, should_abort, taps);
}

std::vector<float> SileroVadSession::run(SileroVadStream & stream, const float * pcm, size_t n,
                                         const std::function<bool()> & should_abort, SileroVadTaps * taps) {
    const SileroVadBranch & b = model_.branch(stream.sample_rate);
    const size_t chunk = size_t(b.chunk), ctx_len = size_t(b.context), width = size_t(b.padded());
    const size_t n_chunks = (n + chunk - 1) / chunk;
    const size_t H = SileroVad::kHidden;
    std::vector<float> probs;
    probs.reserve(n_chunks);
    stream.context.resize(ctx_len, 0.0f);
    stream.state.resize(2 * H, 0.0f);
    std::vector<float> & context = stream.context, & carry = stream.state, input;
    ggml_backend_tensor_set(h_all_, carry.data(), 0, H * sizeof(float));
    ggml_backend_tensor_set(c_all_, carry.data() + H, 0, H * sizeof(float));
    if (taps) {
        *taps = SileroVadTaps {};
    }

    for (size_t done = 0; done < n_chunks;) {
        if (should_abort && should_abort()) {
            fail(TRANSCRIBE_ERR_ABORTED, "run aborted by the caller (voice activity detection)");
        }
        const int block = block_size(n_chunks - done);
        const size_t valid = std::min(n_chunks - done, size_t(block));
        // Each row: [context | chunk, zero-padded | the last context samples reflected, edge excluded].
        input.assign(width * size_t(block), 0.0f);
        for (size_t k = 0; k < valid; ++k) {
            float * row = input.data() + k * width;
            std::copy(context.begin(), context.end(), row);
            const size_t at = (done + k) * chunk, len = std::min(chunk, n - at);
            std::copy(pcm + at, pcm + at + len, row + ctx_len);
            const size_t end = ctx_len + chunk;
            for (size_t j = 0; j < ctx_len; ++j) {
                row[end + j] = row[end - 2 - j];
            }
            std::copy(row + end - ctx_len, row + end, context.begin());
        }
        Graph & g = graph(b, block, taps != nullptr);
        exec_.compute(g, [&] { tensor_set(g.get("vad_input"), input); });
        const std::vector<float> p = tensor_get_f32(g.get("prob"));
        probs.insert(probs.end(), p.begin(), p.begin() + long(valid));
        if (taps) {
            auto take = [&](const char * name, std::vector<float> & to) {
                const std::vector<float> v = tensor_get_f32(g.get(name));
                to.insert(to.end(), v.begin(), v.begin() + long(v.size() / size_t(block) * valid));
            };
            take("magnitude", taps->magnitude);
            for (int i = 0; i < 4; ++i) {
                take(("enc" + std::to_string(i)).c_str(), taps->enc[i]);
            }
            take("logit", taps->logit);
        }
        // The state after the last real chunk becomes column 0 for the next block.
        ggml_backend_tensor_get(h_all_, carry.data(), valid * H * sizeof(float), H * sizeof(float));
        ggml_backend_tensor_get(c_all_, carry.data() + H, valid * H * sizeof(float), H * sizeof(float));
        ggml_backend_tensor_set(h_all_, carry.data(), 0, H * sizeof(float));
        ggml_backend_tensor_set(c_all_, carry.data() + H, 0, H * sizeof(float));
        done += valid;
    }
    state_ = carry;
    if (graphs_.size() > 32) { // bounded: at most a handful of block sizes per rate are ever built
        graphs_.clear();
    }
    return probs;
}

} // namespace transcribe
