// Audio in: decode any container libsndfile reads, downmix to mono, resample with soxr.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace transcribe {

std::vector<float> audio_decode_file(const std::string & path, int target_rate);
std::vector<float> audio_decode_memory(const void * data, size_t size, int target_rate);
// Interleaved PCM at any rate / channel count to mono at target_rate.
std::vector<float> audio_to_mono(const float * interleaved, size_t n_frames, int sample_rate, int n_channels,
                                 int target_rate);
// AUDIO_DECODE naming the first non-finite sample, if any.
void audio_check_finite(const float * samples, size_t n, const char * what);

} // namespace transcribe
