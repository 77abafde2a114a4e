// Matrix products of weights with activations: ggml's mul_mat, or our own Q8_0 GEMM kernel
// (kernels/q8_0_gemm.h) where it applies, which is where ggml is slowest on x86.
#pragma once

#include "ggml.h"

namespace transcribe {

// W [K, M] x X [K, N] -> [M, N], as ggml_mul_mat. Takes the Q8_0 GEMM kernel when W is Q8_0 in host
// memory in its file layout, X is a contiguous F32 matrix of at least Q8_0_GEMM_MIN_COLS columns
// (below that the product is bound by reading W, which ggml's GEMV does as well), and the CPU has it.
ggml_tensor * matmul(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

// The kernel's graph op, unconditionally (tests compare it with ggml_mul_mat): X is quantized to Q8_0
// by a ggml copy (ggml's own quantize_row_q8_0, as its mul_mat does), then the custom op runs.
ggml_tensor * q8_0_gemm_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x);

// Whether matmul() would take the kernel for these operands.
bool q8_0_gemm_applies(const ggml_tensor * w, const ggml_tensor * x);

constexpr int64_t Q8_0_GEMM_MIN_COLS = 8;

} // namespace transcribe
