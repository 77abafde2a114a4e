#include "mel.h"

#include "error.h"
#include "model_file.h"
#include "parallel.h"

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

MelFeatures MelFrontend::compute(const float * samples, size_t n, int n_threads) const {
    const int n_fft = cfg_.n_fft, hop = cfg_.hop_length, n_bins = n_fft / 2 + 1, n_mels = cfg_.n_mels;
    if (n < size_t(hop)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "audio too short: %zu samples, need at least %d", n, hop);
    }
    MelFeatures out;
    out.n_mels   = n_mels;
    out.n_valid  = int(n / size_t(hop));
    out.n_frames = out.n_valid + 1;
    const int n_frames = out.n_frames;

    // Pre-emphasised signal with n_fft/2 zeros on each side (centred STFT, constant padding).
    const size_t pad = size_t(n_fft / 2);
    std::vector<double> padded(n + 2 * pad, 0.0);
    padded[pad] = samples[0];
    for (size_t i = 1; i < n; ++i) {
        padded[pad + i] = double(samples[i]) - double(cfg_.preemph) * double(samples[i - 1]);
    }

    std::vector<float> logmel(size_t(n_mels) * size_t(n_frames));
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
            const double * frame = padded.data() + size_t(t) * size_t(hop);
            for (int j = 0; j < n_fft; ++j) {
                in[j] = frame[j] * window_padded_[size_t(j)];
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
                logmel[size_t(m) * size_t(n_frames) + size_t(t)] = float(std::log(acc + double(cfg_.log_guard)));
            }
        }
        fftw_free(in);
        fftw_free(spec);
    };
    const int n_workers = std::max(1, std::min(n_threads, n_frames / 64 + 1));
    parallel_for(n_workers, [&](int w) { worker(n_frames * w / n_workers, n_frames * (w + 1) / n_workers); });

    // Per-feature normalisation over the valid frames (unbiased std), then zero the rest.
    const int L = out.n_valid;
    out.data.assign(logmel.size(), 0.0f);
    for (int m = 0; m < n_mels; ++m) {
        const float * row = logmel.data() + size_t(m) * size_t(n_frames);
        if (!cfg_.per_feature) {
            std::copy_n(row, L, out.data.data() + size_t(m) * size_t(n_frames));
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
        float * dst = out.data.data() + size_t(m) * size_t(n_frames);
        for (int t = 0; t < L; ++t) {
            dst[t] = float((row[t] - mean) / (std_dev + double(cfg_.norm_eps)));
        }
    }
    return out;
}

} // namespace transcribe
