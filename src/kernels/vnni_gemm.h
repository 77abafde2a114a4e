// Integer GEMM for the compute-bound stages (encoder, prefill) on x86 CPUs with AVX-512 VNNI, for
// Q8_0 and Q4_K weights (the Q8_0 preset, and the bulk of the _M presets).
//
// ggml has no repacked Q8_0 layout on x86, and its tinyBLAS Q8_0 GEMM runs one 32-wide dot product
// per instruction chain; its repacked Q4_K GEMM has no VNNI path. These kernels unpack 32 weight rows
// at a time into VNNI order (4 bytes of each of 16 rows per vector, one byte per weight) in a
// per-thread panel, so one VPDPBUSD does 64 multiply-adds, and reuse that panel for every column of
// the activations. The panel is made per call from the weights as the file stores them: nothing is
// converted or kept at load.
//
// They compute what ggml's mul_mat computes for these types: the same integer dot products of the
// same quantized activations (ggml's Q8_0 / Q8_K, made by ggml's own quantize_row), with the same
// block scales, summed in F32 (only the order of those F32 sums differs).
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>

namespace transcribe {

// Whether this CPU (and this build) runs the kernels.
bool vnni_gemm_supported();
// Whether there is a kernel for weights of TYPE (Q8_0, Q4_K), and the type activations take for it.
bool vnni_gemm_handles(ggml_type type);
ggml_type vnni_gemm_activation_type(ggml_type weight_type);
// The weights' row length must be a multiple of this for TYPE's kernel (and their row count of 32).
int64_t vnni_gemm_row_multiple(ggml_type weight_type);

struct VnniGemmArgs {
    ggml_type    type;   // of the weights
    bool         q4_k_x8 = false; // Q4_K weights in ggml's CPU repack layout (8 rows interleaved), not the file's
    const void * w;      // M rows of K values, row stride w_row_bytes (file layout)
    const void * x;      // N rows of K values in the activation type, row stride x_row_bytes
    float *      y;      // N rows of M floats, row stride y_row_floats
    int64_t      K, M, N;
    size_t       w_row_bytes, x_row_bytes, y_row_floats;
};

// y[n][m] = sum_k w[m][k] * x[n][k]. Thread ITH of NTH computes its share of the 32-row weight
// panels; the shares do not overlap, so no barrier is needed.
void vnni_gemm(const VnniGemmArgs & a, int ith, int nth);

} // namespace transcribe
