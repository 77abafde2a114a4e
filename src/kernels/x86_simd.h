// What each AVX-512 kernel file starts from: whether this compiler builds x86 kernels at all
// (TRANSCRIBE_X86_SIMD), the intrinsics, and GCC's false warnings about them off. (GCC 12 takes the
// undefined first operand inside some AVX-512 intrinsics for an uninitialised read; the pragmas stay
// in force for the rest of the including file, which only the kernel sources are.)
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRANSCRIBE_X86_SIMD 1
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace transcribe {

// AVX-512 F, DQ, BW and VL: what the kernels' vector code needs; each adds its own extensions.
inline bool cpu_has_avx512() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    return ok;
}

} // namespace transcribe
#endif
