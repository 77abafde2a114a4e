// NeMo's AudioToMelSpectrogramPreprocessor at inference (spec 3.1): pre-emphasis, zero-padded centred
// STFT with the model's own window, power spectrum, the model's own filterbank, ln(x + guard),
// per-feature normalisation over the valid frames (or none). Configured from GGUF `mel.*` metadata so every
// family built on NeMo's front end reuses it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace transcribe {

class ModelFile;

struct MelConfig {
    int   sample_rate = 16000;
    int   n_fft       = 512;
    int   win_length  = 400;
    int   hop_length  = 160;
    int   n_mels      = 128;
    float preemph     = 0.97f;
    float log_guard   = 5.9604644775390625e-08f; // 2^-24
    float norm_eps    = 1e-5f;
    bool  per_feature = true; // NeMo's per_feature normalisation; false: the log-mel as it is ("NA")
    std::vector<float> window;     // [win_length]
    std::vector<float> filterbank; // [n_mels][n_fft / 2 + 1]
};

// Reads mel.* metadata and the mel.window / mel.filterbank tensors (F32) from a model file.
MelConfig mel_config_from_file(const ModelFile & file);

struct MelFeatures {
    std::vector<float> data; // [n_mels][n_frames], channel-major like NeMo
    int n_mels   = 0;
    int n_frames = 0; // floor(n / hop) + 1
    int n_valid  = 0; // floor(n / hop): frames past it are zero
};

class MelFrontend {
public:
    explicit MelFrontend(MelConfig config);
    ~MelFrontend();
    MelFeatures compute(const float * samples, size_t n, int n_threads) const;
    const MelConfig & config() const { return cfg_; }

private:
    struct FftPlan;
    MelConfig cfg_;
    std::vector<double> window_padded_; // window centred in n_fft
    // Each filter's nonzero bins [begin, end): a mel filter covers a few bins of the spectrum, and
    // skipping its zeros changes no sum (0 * a finite power adds +0).
    std::vector<std::pair<int, int>> filter_support_;
    std::unique_ptr<FftPlan> plan_;
};

} // namespace transcribe
