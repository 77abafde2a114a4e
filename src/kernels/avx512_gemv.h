// Matrix-vector products for decode (one activation column) on x86 CPUs with AVX-512 VNNI.
//
// Decode streams every weight once per token, so a GEMV should run at memory speed. ggml's Q8_0 dot
// product does not: it sums each row's blocks through one F32 accumulator, one FMA latency (4 cycles
// on Zen 4) per 32-byte block, about 20-24 GB/s a core even from cache, under what memory gives two
// cores here (30-58 GB/s). These kernels sum each row's blocks in turn into 4 accumulators, the integer
// part of each block by one VPDPBUSD, and read each row front to back (one stream the hardware
// prefetcher follows).
//
// They compute what ggml's mul_mat computes: the activation quantized as ggml's from_float does (Q8_K
// by kernels/quantize_q8_k, bit for bit the same), the same block scales, integer dot products exact,
// summed in F32 (only the order of the F32 sums differs).
#pragma once

#include "measured_shares.h"

#include "ggml.h"

#include <cstdint>

namespace transcribe {

// Whether there is a GEMV for weights of TYPE with rows of K values that this CPU (and build) runs.
bool avx512_gemv_handles(ggml_type type, int64_t K);

// y[m] = sum_k w[m][k] * x[k] (+ bias[m]) for M rows of K values (file layout, row stride W_ROW_BYTES),
// x F32. Thread ITH of NTH computes a contiguous share of the rows (see shares); each thread quantizes x
// itself (a few microseconds), so no other pass or barrier is needed. Nothing is allocated.
struct Avx512GemvArgs {
    ggml_type     type;
    const void *  w;
    size_t        w_row_bytes;
    const float * x;
    const float * bias = nullptr;
    float *       y;
    int64_t       K, M;
    // More than one column: only over weights in the panel layout (avx512_panel_gemv, up to
    // AVX512_PANEL_SMALL_N), rows of x and y this many floats apart.
    int64_t       N = 1;
    size_t        x_row_floats = 0, y_row_floats = 0;
    // Optional: MEASURED_SHARES_WORDS ints, 0 when the op is made, that live as long as it and that only
    // its calls use. With them each thread's share of the rows follows its measured speed
    // (kernels/measured_shares.h); without (or with more threads than the words cover) they are even.
    int32_t *     shares = nullptr;
};
void avx512_gemv(const Avx512GemvArgs & a, int ith, int nth);

// N_PARTS products of one x (one column, each part with its own weights, type and y), the rows of all
// of them shared out among the threads as one matrix (SHARE_WORDS: as Avx512GemvArgs::shares): one op
// where there were N_PARTS, with one split of the rows to balance instead of N_PARTS.
void avx512_gemv_stacked(const Avx512GemvArgs * parts, int n_parts, int32_t * share_words, int ith, int nth);

} // namespace transcribe
