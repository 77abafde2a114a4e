// Q8_0 x Q8_0 matrix product for the compute-bound stages (encoder, prefill) on x86 CPUs with
// AVX-512 VNNI. ggml has no repacked Q8_0 layout on x86 and its tinyBLAS Q8_0 GEMM takes one 32-wide
// dot product per instruction chain; this kernel repacks 32 weight rows at a time into VNNI order
// (4 bytes of each of 16 rows per vector) in a per-thread panel, so one VPDPBUSD does 64
// multiply-adds, and reuses that panel for every column of the activations.
//
// It computes exactly what ggml's Q8_0 mul_mat computes: the same per-block integer dot products of
// the same quantized activations, scaled by the product of the two block scales and summed in F32
// (only the order of those F32 sums differs).
#pragma once

#include <cstddef>
#include <cstdint>

namespace transcribe {

// Whether this CPU (and this build) runs the kernel.
bool q8_0_gemm_supported();

struct Q8_0GemmArgs {
    const void * w;      // M rows of K values, Q8_0, row stride w_row_bytes
    const void * x;      // N rows of K values, Q8_0, row stride x_row_bytes
    float *      y;      // N rows of M floats, row stride y_row_floats
    int64_t      K, M, N;
    size_t       w_row_bytes, x_row_bytes, y_row_floats;
};

// y[n][m] = sum_k w[m][k] * x[n][k]. K and M must be multiples of 32. Thread ITH of NTH computes its
// share of the 32-row weight panels; the threads' shares do not overlap, so no barrier is needed.
void q8_0_gemm(const Q8_0GemmArgs & a, int ith, int nth);

} // namespace transcribe
