// The audio transcribe-stream hands over a packet at a time: a file's samples at real-time pace (or as
// fast as they are taken), or raw s16le mono from stdin as the pipe delivers whole packets.
#pragma once

#include "transcribe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace transcribe_tools {

class PacketSource {
public:
    // AUDIO null: stdin at RATE. PACE: a file's packet is handed over once it has been "recorded".
    PacketSource(const transcribe_audio * audio, int rate, int packet_ms, bool pace)
        : audio_(audio), rate_(rate), pace_(pace), packet_(size_t(rate) * size_t(packet_ms) / 1000), raw_(packet_),
          start_(std::chrono::steady_clock::now()) {}

    int rate() const { return rate_; }

    // The next packet into PCM (resized to it); false at the end.
    bool next(std::vector<float> & pcm) {
        pcm.resize(packet_);
        size_t n = 0;
        if (!audio_) {
            while (n < packet_) { // whole packets, however the pipe splits them
                const size_t r = std::fread(raw_.data() + n, sizeof(int16_t), packet_ - n, stdin);
                if (r == 0) {
                    break;
                }
                n += r;
            }
            for (size_t i = 0; i < n; ++i) {
                pcm[i] = float(raw_[i]) / 32768.0f;
            }
        } else {
            n = std::min(packet_, audio_->n_samples - at_);
            std::copy(audio_->samples + at_, audio_->samples + at_ + n, pcm.begin());
            if (pace_) {
                std::this_thread::sleep_until(start_ + std::chrono::milliseconds(int64_t(at_ + n) * 1000 / rate_));
            }
        }
        at_ += n;
        pcm.resize(n);
        return n > 0;
    }

private:
    const transcribe_audio * audio_;
    int                      rate_;
    bool                     pace_;
    size_t                   packet_, at_ = 0;
    std::vector<int16_t>     raw_;
    std::chrono::steady_clock::time_point start_;
};

} // namespace transcribe_tools
