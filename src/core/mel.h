// Log-mel front ends as data (GGUF `mel.*` metadata), in two variants:
// - NeMo's AudioToMelSpectrogramPreprocessor at inference (spec 3.1): pre-emphasis, zero-padded centred
//   STFT with the model's own window, power spectrum, the model's own filterbank, ln(x + guard),
//   per-feature normalisation over the valid frames (or none);
// - OpenAI Whisper's log_mel_spectrogram as transcribe() calls it: the audio followed by 30 s of zeros,
//   a reflect-padded centred STFT whose last frame is dropped, power, the filterbank, log10(max(x, 1e-10)),
//   clamped to (its maximum over the whole padded signal) - 8, then (x + 4) / 4.
#pragma once

#include <cstddef>
#include <cstdint>
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
    enum class Variant { Nemo, Whisper } variant = Variant::Nemo;
    int   whisper_pad_samples = 480000; // Whisper: the zeros after the audio (N_SAMPLES) the maximum spans
    int   whisper_min_frames  = 3000;   // Whisper: frames kept at least (the padding's too: language detection reads them)
    std::vector<float> window;     // [win_length]
    std::vector<float> filterbank; // [n_mels][n_fft / 2 + 1]
};

// Reads mel.* metadata and the mel.window / mel.filterbank tensors (F32) from a model file.
MelConfig mel_config_from_file(const ModelFile & file);

struct MelFeatures {
    std::vector<float> data; // [n_mels][n_frames], channel-major like NeMo
    int n_mels   = 0;
    int n_frames = 0; // NeMo: floor(n / hop) + 1; Whisper: max(floor(n / hop), whisper_min_frames), the padding's frames after the audio's
    int n_valid  = 0; // floor(n / hop): NeMo's frames past it are zero
};

class MelFrontend {
public:
    explicit MelFrontend(MelConfig config);
    ~MelFrontend();
    MelFeatures compute(const float * samples, size_t n, int n_threads) const;
    // NeMo's log-mel without normalisation (models streamed a chunk at a time: "NA"), frames [FIRST, FIRST +
    // COUNT) of a signal of N_TOTAL samples (< 0: not known yet; every frame asked must then lie inside the
    // samples held), the samples [SAMPLES_START, SAMPLES_START + N_SAMPLES) of it in SAMPLES (every sample
    // those frames read). The same values as compute() gives those frames. Channel-major [n_mels][count].
    std::vector<float> frames(const float * samples, int64_t samples_start, size_t n_samples, int64_t n_total, int first,
                              int count, int n_threads) const;
    // The first sample frame T reads (its preemphasis included), and the sample after its last.
    int64_t frame_first_sample(int t) const { return int64_t(t) * cfg_.hop_length - cfg_.n_fft / 2 - 1; }
    int64_t frame_end_sample(int t) const { return int64_t(t) * cfg_.hop_length + cfg_.n_fft / 2; }
    const MelConfig & config() const { return cfg_; }

private:
    MelFeatures compute_whisper(const float * samples, size_t n, int n_threads) const;
    // NeMo's unnormalised log-mel frames [FIRST, FIRST + COUNT) of a signal of N_TOTAL samples (< 0: not
    // known yet), SAMPLES holding it from SAMPLES_START on, into OUT [n_mels][count].
    void nemo_log_mel(const float * samples, int64_t samples_start, int64_t n_total, int first, int count, int n_threads,
                      float * out) const;
    template <typename Sample, typename Store>
    void filterbank_frames(int n_frames, int n_threads, const Sample & sample, const Store & store) const;

    struct FftPlan;
    MelConfig cfg_;
    std::vector<double> window_padded_; // window centred in n_fft
    // Each filter's nonzero bins [begin, end): a mel filter covers a few bins of the spectrum, and
    // skipping its zeros changes no sum (0 * a finite power adds +0).
    std::vector<std::pair<int, int>> filter_support_;
    std::unique_ptr<FftPlan> plan_;
};

} // namespace transcribe
