#include "support.h"

#include "core/audio.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace test {

std::string fixture(const std::string & rel) { return std::string(TINY_FIXTURE) + "/" + rel; }
std::string model(const std::string & name) { return std::string(TEST_MODELS) + "/" + name; }

const nlohmann::json & manifest() {
    static const nlohmann::json m = [] {
        std::ifstream f(fixture("MANIFEST.json"));
        return nlohmann::json::parse(f);
    }();
    return m;
}

double golden_atol(const std::string & clip, const std::string & file) {
    return manifest()["goldens"][clip][file]["suggested_atol"].get<double>();
}

transcribe::NpyArray golden(const std::string & clip, const std::string & file) {
    return transcribe::npy_read(fixture("golden/" + clip + "/" + file));
}

std::vector<int32_t> golden_ids(const std::string & clip) {
    std::ifstream f(fixture("golden/" + clip + "/greedy_ids.json"));
    return nlohmann::json::parse(f).get<std::vector<int32_t>>();
}

std::vector<float> read_wav_16k(const std::string & clip) {
    return transcribe::audio_decode_file(fixture("audio/" + clip + ".wav"), 16000);
}

float max_abs_diff(const std::vector<float> & a, const std::vector<float> & b) {
    EXPECT_EQ(a.size(), b.size());
    float m = 0.0f;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const float d = std::fabs(a[i] - b[i]);
        m = std::isnan(d) ? INFINITY : std::max(m, d);
    }
    return m;
}

} // namespace test
