// Silero VAD (v5; v6.2 has the same graph): a speech probability per chunk of 512 samples at 16 kHz
// (256 at 8 kHz), streamed with the previous chunk's last 64 (32) samples as context and an LSTM
// state carried from chunk to chunk, as upstream's OnnxWrapper does. The spec is MODEL.md of the
// silero-vad fixture.
#pragma once

#include "core/backend.h"
#include "core/model_file.h"
#include "model/speech_detector.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace transcribe {

// The weights of one sample-rate branch and the shapes that go with it.
struct SileroVadBranch {
    int rate = 0, n_fft = 0, hop = 0, context = 0, chunk = 0;
    ggml_tensor * basis = nullptr;               // [n_fft, 2 * n_bins]: real rows, then imaginary rows
    ggml_tensor * enc_w[4] {}, * enc_b[4] {};    // Conv1d kernels [3, in, out] (ggml order), biases [out]
    ggml_tensor * w_ih = nullptr, * w_hh = nullptr, * b_ih = nullptr, * b_hh = nullptr; // gates i, f, g, o
    ggml_tensor * head_w = nullptr, * head_b = nullptr;

    int n_bins() const { return n_fft / 2 + 1; }
    int padded() const { return context + chunk + context; } // the model's input, reflection-padded
};

class SileroVad {
public:
    static constexpr int kHidden = 128;

    // BAD_GGUF / MISSING_TENSOR / BAD_SHAPE / UNSUPPORTED_ARCH naming the file on failure. The weights
    // go to the CPU: the model is small and sequential, an accelerator would only add launch latency.
    explicit SileroVad(const std::string & path);

    const SileroVadBranch & branch(int sample_rate) const; // INVALID_ARG for a rate the file lacks
    std::vector<int> sample_rates() const;
    const std::string & name() const { return name_; }
    ggml_backend_dev_t device() const { return device_; }

private:
    std::unique_ptr<ModelFile> file_;
    ggml_backend_dev_t         device_;
    std::string                name_;
    std::map<int, SileroVadBranch> branches_;
};

// Intermediates of every chunk, for checks against the reference (filled when asked for).
struct SileroVadTaps {
    std::vector<float> magnitude; // per chunk [frames][n_bins]
    std::vector<float> enc[4];    // per chunk [length][channels]
    std::vector<float> logit;
};

// Where a stream of chunks stands: the last context samples and the LSTM state (h, then c), both zero
// before the first chunk.
struct SileroVadStream {
    int                sample_rate = 16000;
    std::vector<float> context;
    std::vector<float> state;
};

class SileroVadSession final : public SpeechDetector {
public:
    SileroVadSession(const SileroVad & model, int n_threads);
    ~SileroVadSession() override;
    SileroVadSession(const SileroVadSession &) = delete;
    SileroVadSession & operator=(const SileroVadSession &) = delete;

    // One probability per chunk of pcm (ceil(n / chunk); the last chunk zero-padded), streamed from a
    // zero state. should_abort is polled between blocks of chunks (ABORTED).
    std::vector<float> run(const float * pcm, size_t n, int sample_rate, const std::function<bool()> & should_abort = {},
                           SileroVadTaps * taps = nullptr);
    // The same, going on from STREAM (and leaving it after the last chunk): a recording fed in pieces of
    // whole chunks gets the probabilities it gets in one run.
    std::vector<float> run(SileroVadStream & stream, const float * pcm, size_t n,
                           const std::function<bool()> & should_abort = {}, SileroVadTaps * taps = nullptr);
    std::vector<float> probabilities(const float * pcm, size_t n, int sample_rate,
                                     const std::function<bool()> & abort) override {
        return run(pcm, n, sample_rate, abort);
    }
    size_t chunk_samples(int sample_rate) const override { return size_t(model_.branch(sample_rate).chunk); }
    std::vector<float> next_probabilities(const float * pcm, size_t n, int sample_rate) override {
        live_.sample_rate = sample_rate;
        return run(live_, pcm, n);
    }
    // The LSTM state after the last chunk of the last run: h, then c (kHidden each).
    const std::vector<float> & state() const { return state_; }
    const SileroVad & model() const { return model_; }

private:
    Graph & graph(const SileroVadBranch & b, int n_chunks, bool taps);

    const SileroVad &  model_;
    Executor           exec_;
    ggml_context *        state_ctx_ = nullptr;
    ggml_backend_buffer_t state_buf_ = nullptr;
    ggml_tensor *         h_all_     = nullptr; // [kHidden, max block + 1]: column 0 the carried state,
    ggml_tensor *         c_all_     = nullptr; // column t + 1 the state after the block's chunk t
    std::map<std::tuple<int, int, bool>, std::unique_ptr<Graph>> graphs_;
    std::vector<float>    state_;
    SileroVadStream       live_; // where next_probabilities stands
};

} // namespace transcribe
