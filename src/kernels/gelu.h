// GELU with the exact erf (OpenAI Whisper's, torch's nn.GELU()) on x86 CPUs with AVX-512. ggml's
// GELU_ERF calls the C library's scalar erff for every element, which makes it as slow as a matrix
// product in Whisper's encoder; ggml's other GELU is the tanh approximation, a different function.
#pragma once

#include "ggml.h"

namespace transcribe {

// Whether the kernel takes X: a contiguous F32 tensor, on a CPU that runs it.
bool gelu_erf_kernel_takes(const ggml_tensor * x);

// 0.5 x (1 + erf(x / sqrt 2)) of every element. 1 + erf is computed as erfc of |x| / sqrt 2 (or 2 minus
// it), with the Chebyshev fit of Numerical Recipes' erfcc (relative error below 1.2e-7 in exact
// arithmetic): in F32 the result is within 4e-7 of the exact GELU, and keeps its relative precision in
// the negative tail, where 1 + erff(x) cancels. In place: the result is X's tensor.
ggml_tensor * gelu_erf_op(ggml_context * ctx, ggml_tensor * x);

// The same for N floats (any N), for tests and other kernels' epilogues.
void gelu_erf_row(const float * x, float * y, int64_t n);

} // namespace transcribe
