// Shared helpers for the tests: fixture paths, golden loading, tolerances from MANIFEST.json.
#pragma once

#include "core/npy.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace test {

inline const char * kClips[] = {"jfk", "jfk_0p7s", "jfk_div8", "tone_noise_3s"};

std::string fixture(const std::string & rel);   // path under the tiny fixture
std::string model(const std::string & name);    // path of a converted test model
const nlohmann::json & manifest();
double golden_atol(const std::string & clip, const std::string & file); // MANIFEST suggested_atol
transcribe::NpyArray golden(const std::string & clip, const std::string & file);
std::vector<int32_t> golden_ids(const std::string & clip);
std::vector<float> read_wav_16k(const std::string & clip); // the fixture clip through our decoder
float max_abs_diff(const std::vector<float> & a, const std::vector<float> & b);

} // namespace test
