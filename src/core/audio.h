// Audio in: decode any container libsndfile reads, downmix to mono, resample with soxr.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

struct soxr; // soxr.h's soxr_t

namespace transcribe {

// Sample rates taken for audio: below 1 kHz a header is not describing sound (and a 4 KB file at 1 Hz
// would resample into half an hour at 22 kHz: fuzz_audio found that one); 768 kHz is the highest rate
// audio hardware records.
constexpr int kMinSampleRate = 1000;
constexpr int kMaxSampleRate = 768000;

// How much audio a decode may produce, and when to stop it.
struct AudioLimits {
    double                max_seconds = 0; // <= 0: none; past it INPUT_TOO_LONG (the header's length first)
    std::function<bool()> abort;           // polled between blocks: true stops with ABORTED
};

// Decoded, downmixed and resampled block by block (soxr's streaming resampler), so a long file is held
// once, at the target rate.
std::vector<float> audio_decode_file(const std::string & path, int target_rate, const AudioLimits & limits = {});
std::vector<float> audio_decode_memory(const void * data, size_t size, int target_rate, const AudioLimits & limits = {});
// Interleaved PCM at any rate / channel count to mono at target_rate.
std::vector<float> audio_to_mono(const float * interleaved, size_t n_frames, int sample_rate, int n_channels,
                                 int target_rate);
// soxr's streaming resampler, or none when the rates match: blocks of mono samples in, the output
// appended to OUT as soon as soxr gives it.
class StreamResampler {
public:
    StreamResampler(int in_rate, int out_rate, std::vector<float> & out); // AUDIO_DECODE where soxr refuses
    ~StreamResampler();
    StreamResampler(const StreamResampler &) = delete;
    StreamResampler & operator=(const StreamResampler &) = delete;

    void push(const float * x, size_t n);
    // Flushes the resampler; the output is cut to round(n_in * ratio) samples, as the one-shot call gives.
    void finish();

private:
    void run(const float * x, size_t n);

    std::vector<float> & out_;
    ::soxr *             soxr_ = nullptr;
    int                  in_rate_, out_rate_;
    size_t               in_ = 0;
};

// AUDIO_DECODE naming the first non-finite sample, if any.
void audio_check_finite(const float * samples, size_t n, const char * what);

} // namespace transcribe
