// Minimal .npy (format 1.0, little-endian, C order) reading and writing: parity dumps and tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace transcribe {

void npy_write_f32(const std::string & path, const float * data, const std::vector<int64_t> & shape);

struct NpyArray {
    std::vector<int64_t> shape;
    std::vector<float>   f32; // float arrays
    std::vector<int32_t> i32; // int32 / int64 arrays (narrowed)
};
NpyArray npy_read(const std::string & path);

// Writes name.npy under $TRANSCRIBE_DUMP_DIR when that variable is set.
bool dump_enabled();
void dump_f32(const char * name, const std::vector<float> & data, const std::vector<int64_t> & shape);
// Writes name.json (a list of ids) under $TRANSCRIBE_DUMP_DIR when that variable is set.
void dump_ids(const char * name, const std::vector<int32_t> & ids);

} // namespace transcribe
