// A float parameter for a ggml custom op (eps, a scale) travels as the op's user data: its bits in
// the pointer, so the graph owns no side allocation for it.
#pragma once

#include <cstdint>
#include <cstring>

namespace transcribe {

inline void * float_as_userdata(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    return reinterpret_cast<void *>(uintptr_t(bits));
}

inline float userdata_as_float(void * p) {
    const uint32_t bits = uint32_t(reinterpret_cast<uintptr_t>(p));
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
}

} // namespace transcribe
