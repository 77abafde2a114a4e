// Audio decode: files written here in several containers, rates, channel counts and sample formats
// come back as 16 kHz mono within a stated tolerance of the ideal resampled signal.
#include "core/audio.h"
#include "core/error.h"
#include "support.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

using namespace transcribe;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Stereo test tone: left 440 Hz at 0.6, right 440 Hz at 0.2, so the mono downmix is 0.4 sin(2 pi 440 t).
std::string write_tone(const std::string & name, int format, int rate, int channels, double seconds) {
    const std::string path = ::testing::TempDir() + name;
    SF_INFO info {};
    info.samplerate = rate;
    info.channels   = channels;
    info.format     = format;
    SNDFILE * f = sf_open(path.c_str(), SFM_WRITE, &info);
    EXPECT_NE(f, nullptr) << sf_strerror(nullptr) << " for " << name;
    if (!f) {
        return path;
    }
    const sf_count_t n = sf_count_t(seconds * rate);
    std::vector<float> buf(size_t(n) * size_t(channels));
    for (sf_count_t i = 0; i < n; ++i) {
        const double s = std::sin(2 * kPi * 440.0 * double(i) / rate);
        for (int c = 0; c < channels; ++c) {
            buf[size_t(i) * size_t(channels) + size_t(c)] = float(channels == 1 ? 0.4 * s : (c == 0 ? 0.6 : 0.2) * s);
        }
    }
    sf_writef_float(f, buf.data(), n);
    sf_close(f);
    return path;
}

double ideal(size_t i) { return 0.4 * std::sin(2 * kPi * 440.0 * double(i) / 16000.0); }

// Max deviation from the ideal over the interior (resampler edges excluded).
double max_error(const std::vector<float> & x) {
    double m = 0;
    for (size_t i = 800; i + 800 < x.size(); ++i) {
        m = std::max(m, std::fabs(double(x[i]) - ideal(i)));
    }
    return m;
}

// Relative power at 440 Hz (Goertzel) for lossy codecs, whose delay and phase are their own.
double tone_fraction(const std::vector<float> & x) {
    const double w = 2 * kPi * 440.0 / 16000.0;
    double s1 = 0, s2 = 0, energy = 0;
    for (float v : x) {
        const double s = v + 2 * std::cos(w) * s1 - s2;
        s2 = s1;
        s1 = s;
        energy += double(v) * v;
    }
    const double power = s1 * s1 + s2 * s2 - 2 * std::cos(w) * s1 * s2;
    return 2.0 * power / (double(x.size()) * energy);
}

struct Case {
    const char * name;
    int format, rate, channels;
    double tolerance; // max abs error vs ideal; < 0: lossy, checked by tone fraction
};

class AudioDecode : public ::testing::TestWithParam<Case> {};

} // namespace

TEST_P(AudioDecode, To_16k_mono_within_tolerance) {
    const Case c = GetParam();
    const std::string path = write_tone(c.name, c.format, c.rate, c.channels, 1.0);
    const std::vector<float> pcm = audio_decode_file(path, 16000);
    const double expected = 16000.0;
    if (c.tolerance > 0) {
        EXPECT_NEAR(double(pcm.size()), expected, 2.0) << c.name;
        EXPECT_LE(max_error(pcm), c.tolerance) << c.name;
    } else {
        EXPECT_NEAR(double(pcm.size()), expected, 0.1 * expected) << c.name; // codec padding
        EXPECT_GT(tone_fraction(pcm), 0.95) << c.name;
    }
    // Decoding from memory gives the same samples as from the file.
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(audio_decode_memory(bytes.data(), bytes.size(), 16000), pcm) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, AudioDecode,
    ::testing::Values(Case {"pcm16_44k_stereo.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 44100, 2, 1e-3},
                      Case {"u8_22k_stereo.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_U8, 22050, 2, 1.5e-2},
                      Case {"float_48k_mono.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 48000, 1, 1e-3},
                      Case {"pcm16_16k_mono.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 1e-4},
                      Case {"pcm24_8k_mono.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_24, 8000, 1, 1e-3},
                      Case {"pcm16_44k_stereo.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 44100, 2, 1e-3},
                      Case {"vorbis_44k_stereo.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 44100, 2, -1},
                      Case {"opus_48k_mono.ogg", SF_FORMAT_OGG | SF_FORMAT_OPUS, 48000, 1, -1},
                      Case {"mp3_44k_stereo.mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 44100, 2, -1}),
    [](const ::testing::TestParamInfo<Case> & i) {
        std::string s = i.param.name;
        for (char & ch : s) {
            ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
        }
        return s;
    });

TEST(Audio, Pcm_downmix_and_resample) {
    std::vector<float> stereo(2 * 48000);
    for (size_t i = 0; i < 48000; ++i) {
        const double s = std::sin(2 * kPi * 440.0 * double(i) / 48000.0);
        stereo[2 * i]     = float(0.6 * s);
        stereo[2 * i + 1] = float(0.2 * s);
    }
    const auto mono = audio_to_mono(stereo.data(), 48000, 48000, 2, 16000);
    EXPECT_EQ(mono.size(), 16000u);
    EXPECT_LE(max_error(mono), 1e-3);
}

namespace {
transcribe_status status_of(const std::function<void()> & f) {
    try {
        f();
    } catch (const Error & e) {
        EXPECT_NE(std::string(e.what()), "");
        return e.status();
    }
    return TRANSCRIBE_OK;
}
} // namespace

TEST(Audio, Bad_inputs_have_named_errors) {
    EXPECT_EQ(status_of([] { audio_decode_file("/nonexistent/x.wav", 16000); }), TRANSCRIBE_ERR_FILE_NOT_FOUND);
    const std::string empty = ::testing::TempDir() + "empty.wav";
    std::ofstream(empty).close();
    EXPECT_EQ(status_of([&] { audio_decode_file(empty, 16000); }), TRANSCRIBE_ERR_AUDIO_DECODE);
    const std::string text = ::testing::TempDir() + "not_audio.wav";
    std::ofstream(text) << "this is not audio, just some text that no decoder should accept\n";
    EXPECT_EQ(status_of([&] { audio_decode_file(text, 16000); }), TRANSCRIBE_ERR_AUDIO_DECODE);
    const std::string zero = write_tone("zero_length.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 0.0);
    EXPECT_EQ(status_of([&] { audio_decode_file(zero, 16000); }), TRANSCRIBE_ERR_AUDIO_DECODE);
    // A float wav holding a NaN sample.
    const std::string nan_path = ::testing::TempDir() + "nan.wav";
    SF_INFO info {};
    info.samplerate = 16000;
    info.channels   = 1;
    info.format     = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
    SNDFILE * f = sf_open(nan_path.c_str(), SFM_WRITE, &info);
    ASSERT_NE(f, nullptr);
    std::vector<float> v(1600, 0.1f);
    v[700] = NAN;
    sf_command(f, SFC_SET_NORM_FLOAT, nullptr, SF_FALSE);
    sf_writef_float(f, v.data(), sf_count_t(v.size()));
    sf_close(f);
    EXPECT_EQ(status_of([&] { audio_decode_file(nan_path, 16000); }), TRANSCRIBE_ERR_AUDIO_DECODE);
}

// Found by fuzz_audio: a file of one frame at 44.1 kHz resampled to 16 kHz left no sample at all, and
// the load reported success with an empty buffer.
TEST(Audio, Too_short_to_resample_is_an_error) {
    const float one[2] = {0.5f, 0.5f};
    EXPECT_THROW(audio_to_mono(one, 1, 44100, 2, 16000), Error);
    const std::string dir = std::string(FUZZ_REGRESSIONS) + "/audio";
    for (const auto & entry : std::filesystem::directory_iterator(dir)) {
        std::ifstream f(entry.path(), std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        for (int rate : {16000, 8000, 22050, 44100}) {
            try {
                const auto pcm = audio_decode_memory(bytes.data(), bytes.size(), rate);
                EXPECT_FALSE(pcm.empty()) << entry.path();
            } catch (const Error & e) {
                EXPECT_EQ(e.status(), TRANSCRIBE_ERR_AUDIO_DECODE) << entry.path();
            }
        }
    }
}

// Found by fuzz_audio (long run): a 4 KB wav whose header says 1 Hz resampled for over a minute into
// half an hour of 22 kHz audio. Rates outside kMinSampleRate..kMaxSampleRate are refused by name.
TEST(Audio, Implausible_sample_rates_are_refused) {
    std::ifstream f(std::string(FUZZ_REGRESSIONS) + "/audio/wav-at-1-hz-upsampled.bin", std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 44u);
    try {
        audio_decode_memory(bytes.data(), bytes.size(), 22050);
        ADD_FAILURE() << "a 1 Hz file was decoded";
    } catch (const Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_AUDIO_DECODE);
        EXPECT_NE(std::string(e.what()).find("sample rate 1 Hz"), std::string::npos) << e.what();
    }
    const std::vector<float> pcm(100, 0.1f);
    EXPECT_THROW(audio_to_mono(pcm.data(), pcm.size(), 999, 1, 16000), Error);
    EXPECT_THROW(audio_to_mono(pcm.data(), pcm.size(), 16000, 1, 768001), Error);
    EXPECT_EQ(audio_to_mono(pcm.data(), pcm.size(), 1000, 1, 1000).size(), pcm.size()); // the edges are taken
}

TEST(Audio, Limits_stop_decoding_with_a_named_error) {
    const std::string path = test::fixture("audio/jfk.wav"); // 11 s
    transcribe::AudioLimits limits;
    limits.max_seconds = 5;
    try {
        transcribe::audio_decode_file(path, 16000, limits);
        FAIL() << "no error";
    } catch (const transcribe::Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_INPUT_TOO_LONG);
        EXPECT_NE(std::string(e.what()).find("11.0 s exceeds the limit of 5.0 s"), std::string::npos) << e.what();
    }
    limits.max_seconds = 0;
    int polls = 0;
    limits.abort = [&polls] { return ++polls == 3; };
    try {
        transcribe::audio_decode_file(path, 16000, limits);
        FAIL() << "no error";
    } catch (const transcribe::Error & e) {
        EXPECT_EQ(e.status(), TRANSCRIBE_ERR_ABORTED);
        EXPECT_EQ(polls, 3);
    }
    limits.abort = nullptr;
    limits.max_seconds = 12;
    EXPECT_EQ(transcribe::audio_decode_file(path, 16000, limits).size(), 176000u);
}
