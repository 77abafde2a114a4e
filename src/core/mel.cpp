#include "mel.h"

#include "error.h"
#include "model_file.h"
#include "parallel.h"
#include "system_memory.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <new>

namespace transcribe {

namespace {
std::mutex g_fftw_planner_mutex; // FFTW's planner is not thread-safe; execution is
}

struct MelFrontend::FftPlan {
    fftw_plan plan = nullptr;
    int n = 0;
    ~FftPlan() {
        std::lock_guard<std::mutex> lock(g_fftw_planner_mutex);
        if (plan) {
            fftw_destroy_plan(plan);
        }
    }
};

MelConfig mel_config_from_file(const ModelFile & file) {
    MelConfig c;
    c.sample_rate = int(file.get_u32("mel.sample_rate"));
    c.n_fft       = int(file.get_u32("mel.n_fft"));
    c.win_length  = int(file.get_u32("mel.win_length"));
    c.hop_length  = int(file.get_u32("mel.hop_length"));
    c.n_mels      = int(file.get_u32("mel.n_mels"));
    c.preemph     = file.get_f32("mel.preemph");
    c.log_guard   = file.get_f32("mel.log_guard");
    c.norm_eps    = file.get_f32("mel.norm_eps");
    const std::string normalize = file.get_str("mel.normalize", "per_feature");
    if (normalize != "per_feature" && normalize != "none") {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unknown mel normalisation '%s'", file.path().c_str(), normalize.c_str());
    }
    c.per_feature = normalize == "per_feature";
    const std::string variant = file.get_str("mel.variant", "nemo");
    if (variant != "nemo" && variant != "whisper") {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unknown mel variant '%s'", file.path().c_str(), variant.c_str());
    }
    c.variant = variant == "whisper" ? MelConfig::Variant::Whisper : MelConfig::Variant::Nemo;
    // Whisper's transcribe() pads 30 s and keeps a window's frames; the Hugging Face feature extractor as
    // Qwen3-ASR's processor runs it pads nothing (both keys 0).
    c.whisper_pad_samples = int(file.get_u32("mel.whisper_pad_samples", uint32_t(c.whisper_pad_samples)));
    c.whisper_min_frames  = int(file.get_u32("mel.whisper_min_frames", uint32_t(c.whisper_min_frames)));
    if (c.variant == MelConfig::Variant::Whisper && (c.per_feature || c.win_length != c.n_fft)) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: Whisper's mel has no normalisation and a window of n_fft",
             file.path().c_str());
    }
    if (c.n_fft <= 0 || c.n_fft > 1 << 16 || c.win_length <= 0 || c.win_length > c.n_fft || c.hop_length <= 0 ||
        c.n_mels <= 0 || c.n_mels > 4096 || c.sample_rate <= 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid mel parameters", file.path().c_str());
    }
    c.window     = file.read_f32(file.tensor("mel.window", {c.win_length}, {GGML_TYPE_F32}));
    c.filterbank = file.read_f32(file.tensor("mel.filterbank", {c.n_fft / 2 + 1, c.n_mels}, {GGML_TYPE_F32}));
    return c;
}

MelFrontend::MelFrontend(MelConfig config) : cfg_(std::move(config)), plan_(std::make_unique<FftPlan>()) {
    const int n_fft = cfg_.n_fft;
    window_padded_.assign(size_t(n_fft), 0.0);
    const int left = (n_fft - cfg_.win_length) / 2;
    for (int i = 0; i < cfg_.win_length; ++i) {
        window_padded_[size_t(left + i)] = cfg_.window[size_t(i)];
    }
    const int n_bins = n_fft / 2 + 1;
    for (int m = 0; m < cfg_.n_mels; ++m) {
        const float * fb = cfg_.filterbank.data() + size_t(m) * size_t(n_bins);
        int begin = 0, end = n_bins;
        while (begin < end && fb[begin] == 0.0f) {
            ++begin;
        }
        while (end > begin && fb[end - 1] == 0.0f) {
            --end;
        }
        filter_support_.emplace_back(begin, end);
    }
    std::lock_guard<std::mutex> lock(g_fftw_planner_mutex);
    double *       in  = fftw_alloc_real(size_t(n_fft));
    fftw_complex * out = fftw_alloc_complex(size_t(n_fft / 2 + 1));
    plan_->plan = fftw_plan_dft_r2c_1d(n_fft, in, out, FFTW_ESTIMATE);
    plan_->n    = n_fft;
    fftw_free(in);
    fftw_free(out);
}

MelFrontend::~MelFrontend() = default;

// Frames [0, N_FRAMES): the windowed samples SAMPLE(frame start + j), their power spectrum, and each
// filter's sum over it to STORE(filter, frame, sum), the frames shared among up to N_THREADS workers.
template <typename Sample, typename Store>
void MelFrontend::filterbank_frames(int n_frames, int n_threads, const Sample & sample, const Store & store) const {
    const int n_fft = cfg_.n_fft, hop = cfg_.hop_length, n_bins = n_fft / 2 + 1, n_mels = cfg_.n_mels;
    auto worker = [&](int t0, int t1) {
        std::vector<double> power(static_cast<size_t>(n_bins));
        double *       in    = fftw_alloc_real(size_t(n_fft));
        fftw_complex * spec  = fftw_alloc_complex(size_t(n_bins));
        if (!in || !spec) {
            fftw_free(in);
            fftw_free(spec);
            throw std::bad_alloc();
        }
        for (int t = t0; t < t1; ++t) {
            const int64_t start = int64_t(t) * hop;
            for (int j = 0; j < n_fft; ++j) {
                in[j] = sample(start + j) * window_padded_[size_t(j)];
            }
            fftw_execute_dft_r2c(plan_->plan, in, spec);
            for (int k = 0; k < n_bins; ++k) {
                power[size_t(k)] = spec[k][0] * spec[k][0] + spec[k][1] * spec[k][1];
            }
            for (int m = 0; m < n_mels; ++m) {
                const float * fb = cfg_.filterbank.data() + size_t(m) * size_t(n_bins);
                const auto [begin, end] = filter_support_[size_t(m)];
                double acc = 0.0;
                for (int k = begin; k < end; ++k) {
                    acc += double(fb[k]) * power[size_t(k)];
                }
                store(m, t, acc);
            }
        }
        fftw_free(in);
        fftw_free(spec);
    };
    const int n_workers = std::max(1, std::min(n_threads, n_frames / 64 + 1));
    parallel_for(n_workers, [&](int w) { worker(n_frames * w / n_workers, n_frames * (w + 1) / n_workers); });
}

MelFeatures MelFrontend::compute(const float * samples, size_t n, int n_threads) const {
    const int hop = cfg_.hop_length, n_mels = cfg_.n_mels;
    if (n < size_t(hop)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio too short: %zu samples, need at least %d", n, hop);
    }
    if (cfg_.variant == MelConfig::Variant::Whisper) {
        return compute_whisper(samples, n, n_threads);
    }
    MelFeatures out;
    out.n_mels   = n_mels;
    out.n_valid  = int(n / size_t(hop));
    out.n_frames = out.n_valid + 1;
    const int n_frames = out.n_frames;

    // Log-mel frames straight into the output (the frames past the valid length zeros), normalised there
    // afterwards.
    reserve_huge(out.data, size_t(n_mels) * size_t(n_frames));
    out.data.resize(size_t(n_mels) * size_t(n_frames));
    float * logmel = out.data.data();
    nemo_log_mel(samples, 0, int64_t(n), 0, n_frames, n_threads, logmel);

    // Per-feature normalisation over the valid frames (unbiased std), in place.
    const int L = out.n_valid;
    for (int m = 0; m < n_mels; ++m) {
        float * row = logmel + size_t(m) * size_t(n_frames);
        if (!cfg_.per_feature) {
            continue;
        }
        double mean = 0.0;
        for (int t = 0; t < L; ++t) {
            mean += row[t];
        }
        mean /= L;
        double var = 0.0;
        for (int t = 0; t < L; ++t) {
            var += (row[t] - mean) * (row[t] - mean);
        }
        const double std_dev = L > 1 ? std::sqrt(var / (L - 1)) : 0.0;
        for (int t = 0; t < L; ++t) {
            row[t] = float((row[t] - mean) / (std_dev + double(cfg_.norm_eps)));
        }
    }
    return out;
}

std::vector<float> MelFrontend::frames(const float * samples, int64_t samples_start, size_t n_samples, int64_t n_total,
                                       int first, int count, int n_threads) const {
    if (cfg_.variant != MelConfig::Variant::Nemo || cfg_.per_feature) {
        fail(TRANSCRIBE_ERR_INTERNAL, "mel frames a chunk at a time: only NeMo's log-mel without normalisation");
    }
    const int64_t held_end = samples_start + int64_t(n_samples);
    const int64_t need_begin = std::max<int64_t>(0, frame_first_sample(first));
    int64_t need_end = frame_end_sample(first + count - 1);
    if (n_total >= 0) {
        need_end = std::min(need_end, n_total);
    }
    if (count <= 0 || need_begin < samples_start || need_end > held_end) {
        fail(TRANSCRIBE_ERR_INTERNAL, "mel frames %d..%d read samples that are not held", first, first + count);
    }
    std::vector<float> out(size_t(cfg_.n_mels) * size_t(count));
    nemo_log_mel(samples, samples_start, n_total, first, count, n_threads, out.data());
    return out;
}

void MelFrontend::nemo_log_mel(const float * samples, int64_t samples_start, int64_t n_total, int first, int count,
                               int n_threads, float * out) const {
    // The pre-emphasised signal with n_fft/2 zeros on each side (a centred STFT, constant padding), read
    // a frame at a time rather than copied whole: a long recording's padded copy in doubles is 8 bytes a
    // sample of new memory to fault in.
    const int64_t pad = cfg_.n_fft / 2;
    const int64_t valid = n_total < 0 ? INT64_MAX : n_total / cfg_.hop_length;
    const double  preemph = double(cfg_.preemph);
    auto sample_at = [&](int64_t i) { return double(samples[i - samples_start]); };
    auto emphasised = [&](int64_t j) { // sample j of frame FIRST's padded signal
        const int64_t i = int64_t(first) * cfg_.hop_length + j - pad;
        if (i < 0 || (n_total >= 0 && i >= n_total)) {
            return 0.0;
        }
        return i == 0 ? sample_at(0) : sample_at(i) - preemph * sample_at(i - 1);
    };
    filterbank_frames(count, n_threads, emphasised, [&](int m, int t, double acc) {
        // NeMo's frames from the valid length on hold the pad value, 0.
        out[size_t(m) * size_t(count) + size_t(t)] = first + t < valid ? float(std::log(acc + double(cfg_.log_guard))) : 0.0f;
    });
}

MelFeatures MelFrontend::compute_whisper(const float * samples, size_t n, int n_threads) const {
    const int n_fft = cfg_.n_fft, hop = cfg_.hop_length, n_mels = cfg_.n_mels;
    // The signal log_mel_spectrogram sees: the audio, then pad zeros; torch.stft's centring reflects it.
    const int64_t n_audio = int64_t(n), n_signal = n_audio + cfg_.whisper_pad_samples, half = n_fft / 2;
    auto sample = [&](int64_t i) { // sample i of the reflect-padded signal
        i -= half;
        if (i < 0) {
            i = -i;
        } else if (i >= n_signal) {
            i = 2 * (n_signal - 1) - i;
        }
        return i < n_audio ? double(samples[i]) : 0.0;
    };
    // n_signal / hop frames (the STFT's last one dropped); those whose window lies past the audio are
    // log10(1e-10) = -10: only the ones that reach it are computed.
    const int64_t n_total = n_signal / hop;
    const int     n_live  = int(std::min<int64_t>(n_total, (n_audio + half) / hop + 1));
    std::vector<float> logmel(size_t(n_mels) * size_t(n_live));
    filterbank_frames(n_live, n_threads, sample, [&](int m, int t, double acc) {
        logmel[size_t(m) * size_t(n_live) + size_t(t)] = float(std::log10(std::max(acc, double(cfg_.log_guard))));
    });

    float top = n_total > n_live ? float(std::log10(double(cfg_.log_guard))) : -INFINITY;
    for (float v : logmel) {
        top = std::max(top, v);
    }
    MelFeatures out;
    out.n_mels   = n_mels;
    out.n_valid  = int(n / size_t(hop));
    out.n_frames = int(std::min<int64_t>(n_total, std::max(out.n_valid, cfg_.whisper_min_frames)));
    out.data.resize(size_t(n_mels) * size_t(out.n_frames));
    const float silence = float(std::log10(double(cfg_.log_guard)));
    for (int m = 0; m < n_mels; ++m) {
        for (int t = 0; t < out.n_frames; ++t) {
            const float x = t < n_live ? logmel[size_t(m) * size_t(n_live) + size_t(t)] : silence;
            out.data[size_t(m) * size_t(out.n_frames) + size_t(t)] = (std::max(x, top - 8.0f) + 4.0f) / 4.0f;
        }
    }
    return out;
}

} // namespace transcribe
