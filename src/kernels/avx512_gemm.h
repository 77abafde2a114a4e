// GEMM for the compute-bound stages (encoder, prefill) on x86 CPUs with AVX-512: Q8_0, Q4_K and Q6_K
// weights through VNNI integer dot products, BF16 weights through AVX512-BF16 ones, F32 by FMAs.
//
// ggml has no repacked Q8_0 layout on x86, and its tinyBLAS Q8_0 GEMM runs one 32-wide dot product
// per instruction chain; its repacked Q4_K GEMM has no VNNI path; Q6_K has no GEMM at all (a dot
// product per output); its tinyBLAS BF16 GEMM trails PyTorch's oneDNN. These kernels unpack 32 weight
// rows at a time into the dot-product instructions' order (4 bytes of each of 16 rows per vector: 4
// weights of Q8_0/Q4_K/Q6_K, one per byte, or 2 of BF16) in a per-thread panel, so one VPDPBUSD does
// 64 multiply-adds (VDPBF16PS 32), and reuse that panel for every column of the activations. The
// panel is made per call from the weights as they lie in memory: nothing is converted or kept at load.
//
// They compute what ggml's mul_mat computes for these types: the same products of the same
// activations, quantized or rounded as ggml's own from_float does (Q8_0, Q8_K, BF16; ops::matmul
// quantizes to Q8_K with kernels/quantize_q8_k, bit for bit the same), with the same block
// scales, integer dot products exact, summed in F32 (only the order of the F32 sums differs).
#pragma once

#include "avx512_gemv.h"

#include "ggml.h"

#include <cstddef>
#include <cstdint>

namespace transcribe {

// Whether there is a kernel for weights of TYPE (Q8_0, Q4_K, Q6_K, BF16, F32) that this CPU (and
// build) runs, and the type activations take for it.
bool avx512_gemm_handles(ggml_type type);
ggml_type avx512_gemm_activation_type(ggml_type weight_type);
// The weights' row length must be a multiple of this for TYPE's kernel (and their row count of 32).
int64_t avx512_gemm_row_multiple(ggml_type weight_type);

struct Avx512GemmArgs {
    ggml_type    type;            // of the weights
    bool         q4_k_x8 = false; // Q4_K weights in ggml's CPU repack layout (8 rows interleaved), not the file's
    bool         panels  = false; // Q8_0 or BF16 weights in the panel layout (avx512_to_panel_layout), not the file's
    const void * w;               // M rows of K values, row stride w_row_bytes (file layout)
    const void * x;               // N rows of K values in the activation type, row stride x_row_bytes
    int32_t *    aux = nullptr;   // N rows of avx512_gemm_aux_ints(type, K): made by avx512_gemm_prepare
    const float * bias = nullptr; // M floats added to every row of y, or none
    float *      y;               // N rows of M floats, row stride y_row_floats (but see y_type)
    int64_t      K, M, N;
    size_t       w_row_bytes, x_row_bytes, aux_row_ints = 0, y_row_floats;

    // The epilogue, once a result's sums are complete: after the bias, ReLU or SiLU as ggml's relu and
    // silu compute them; then residual + residual_scale * that, as ggml's scale then add compute it;
    // then y stored as F32, or as the next product's activations, y_row_bytes apart: Q8_0 rows
    // (avx512_gemm_quantize_q8_0_rows' bytes) or BF16 (ggml's rounding), for weights in the panel
    // layout only (the other paths keep partial sums in y, a chunk of K at a time).
    bool          relu     = false;
    bool          silu     = false;
    const float * residual = nullptr; // N rows of M floats, residual_row_floats apart
    size_t        residual_row_floats = 0;
    float         residual_scale      = 1.0f;
    ggml_type     y_type   = GGML_TYPE_F32;
    size_t        y_row_bytes = 0;
};

// Whether A asks for more than the bias in the epilogue.
inline bool avx512_gemm_has_epilogue(const Avx512GemmArgs & a) { return a.relu || a.silu || a.residual || a.y_type != GGML_TYPE_F32; }

// What the kernel for TYPE needs of each activation row beyond the row itself (per-block scales and
// sums, 0 for BF16), as int32 values, and the pass that makes it from a.x into a.aux: thread ITH of
// NTH makes its share of the rows. It must be complete before avx512_gemm() starts.
int64_t avx512_gemm_aux_ints(ggml_type weight_type, int64_t K);
void avx512_gemm_prepare(const Avx512GemmArgs & a, int ith, int nth);

// Q8_0 weights' activations made in one pass instead of ggml's cast then avx512_gemm_prepare: each
// row of K floats quantized to Q8_0 as ggml's CPU quantizer does it (the same bytes), its per-block data
// right after its blocks. The bytes a row takes (a multiple of 4), 0 where K is not a multiple of 64.
int64_t avx512_gemm_q8_0_row_bytes(int64_t K);
// Rows [n0, n1) of X (row stride x_row_floats) into OUT (row stride out_row_bytes).
void avx512_gemm_quantize_q8_0_rows(const float * x, size_t x_row_floats, int64_t K, int64_t n0, int64_t n1, void * out,
                                    size_t out_row_bytes);
// BF16 weights' activations: rows [n0, n1) of X rounded to BF16 as ggml's cast rounds them.
void avx512_gemm_round_bf16_rows(const float * x, size_t x_row_floats, int64_t K, int64_t n0, int64_t n1, void * out,
                                 size_t out_row_bytes);
// Points A's activations (x and aux, for A.K) at such rows.
void avx512_gemm_read_q8_0_rows(Avx512GemmArgs & a, const void * rows, size_t row_bytes);

// y[n][m] = sum_k w[m][k] * x[n][k] (+ bias[m]). Thread ITH of NTH computes its share of the 32-row weight
// panels; the shares do not overlap, so no barrier is needed. Nothing is allocated.
void avx512_gemm(const Avx512GemmArgs & a, int ith, int nth);

// The panel layout: Q8_0 and BF16 weights stored at load the way the GEMM unpacks them (per 32 rows:
// Q8_0 per block of 32 values, the sign-flipped bytes in the dot products' order, then the 32 rows' F16
// scales; BF16 per dword of 2 values, that dword of rows 0-15 then of rows 16-31), in the file layout's
// own bytes. The products then read the weights once and unpack nothing (decoding several sequences at
// once is bound by reading the weights, and BF16's unpacking cost a sixth of its encoder). Only these
// kernels read it.
constexpr int64_t AVX512_PANEL_MAX_K = 16384;
// Whether weights of TYPE, K x M, can be stored so on this CPU.
bool avx512_panel_layout_takes(ggml_type type, int64_t K, int64_t M);
// Converts panels [p0, p1) (rows 32 p0 .. 32 p1) of the weights of TYPE at DATA, in place; SCRATCH holds
// one panel's bytes (32 rows of K values).
void avx512_to_panel_layout(void * data, ggml_type type, int64_t K, int64_t p0, int64_t p1, uint8_t * scratch);
// Rows IDS[0..n) of weights of TYPE in the panel layout, dequantized (widened) as ggml's get_rows does, into
// OUT (n rows of K floats); thread ITH of NTH does its share of the rows.
void avx512_panel_rows(const void * w, ggml_type type, int64_t K, const int32_t * ids, int64_t n, float * out, int ith, int nth);
// Products of weights in the panel layout with up to AVX512_PANEL_SMALL_N columns of F32 x (decode:
// a column per sequence), each thread bringing x to the activation type itself (as avx512_gemv): one op,
// no passes before it.
constexpr int64_t AVX512_PANEL_SMALL_N = 8;
void avx512_panel_gemv(const Avx512GemvArgs & a, int ith, int nth);

} // namespace transcribe
