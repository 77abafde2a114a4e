// Activations quantized to Q8_K (the type Q4_K and Q6_K weights are multiplied with) on x86 CPUs with
// AVX-512: bit for bit what ggml's from_float for Q8_K gives, at vector speed. ggml has only its
// scalar reference quantizer for Q8_K on x86, which every GEMV call (and every GEMM's activation cast)
// runs over the whole activation.
#pragma once

#include <cstdint>

namespace transcribe {

// Whether this CPU (and build) runs quantize_q8_k.
bool quantize_q8_k_available();

// The K floats at X (K a multiple of 256) as K / 256 Q8_K blocks at Y (ggml's block_q8_K layout:
// F32 scale, 256 signed bytes, 16 sums of 16). Per block, as ggml's quantize_row_q8_K_ref: the value
// of largest magnitude (the first such) sets the scale -127 / max; each value is rounded to the nearest
// integer of value * scale (ties to even), at most 127; the scale stored is its reciprocal. An all-zero
// block is stored as zeros (sums included).
void quantize_q8_k(const float * x, void * y, int64_t K);

} // namespace transcribe
