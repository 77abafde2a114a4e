// The op layer's matrix product of weights with activations: ggml's mul_mat, or our own integer GEMM
// and GEMV kernels (kernels/avx512_gemm.h, avx512_gemv.h) where they apply, which is where ggml is
// slowest on x86.
#pragma once

#include "core/model_file.h"

#include "ggml.h"

#include <vector>

namespace transcribe {

// W [K, M] x X [K, N] (+ B [M] on every column) -> [M, N], as ggml_mul_mat (and ggml_add). Takes our
// kernel when it has one for W's type, W is in host memory in its file layout (or, for Q4_K, in ggml's
// CPU repack buffer), X is a contiguous F32 matrix of at least AVX512_GEMM_MIN_COLS columns (below
// that the product is bound by reading W, which ggml's GEMV does as well, from the repacked layout
// where there is one), and the CPU runs it.
namespace ops {
ggml_tensor * matmul(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b = nullptr);

// matmul(W, X, B) for each W of WS (and B of BS, if given), the same X. Where our GEMM takes them all,
// X is brought to its activation type once for all. Where our GEMV takes them all (one column: a
// decode step) and there are no biases, they are one op (its results views of one output), which
// shares the rows of all out among the threads at once: one split to balance and one graph node
// where there were several.
std::vector<ggml_tensor *> matmuls(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x,
                                   const std::vector<ggml_tensor *> & bs = {});

// What a product's result goes through before anything else reads it: done in our GEMM's epilogue
// where the weights are in the panel layout and X has more columns than a decode step (no pass over
// the result in memory), else by ggml's ops after the product; the same values either way.
struct Epilogue {
    bool          relu     = false;   // relu(W x + b)
    bool          silu     = false;   // silu(W x + b)
    ggml_tensor * residual = nullptr; // then residual + scale * that ([M, N], F32)
    float         scale    = 1.0f;
    ggml_tensor * feeds    = nullptr; // the weight the result is multiplied by next, and only by it: the
                                      // result is then made in that product's activation type if it can be
};
ggml_tensor * matmul(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b, const Epilogue & e);

// X (F32) rounded to BF16 as ggml's cast rounds it, by our vector kernel where it runs.
ggml_tensor * to_bf16(ggml_context * ctx, ggml_tensor * x);

// TRANSCRIBE_UNFUSED=1 when a graph is built leaves epilogues, and activations made by the ops before a
// product, to separate passes (read at every build: bench/fusion_ab compares both in one process).
bool fusion_enabled();

// The activation type our GEMM brings X to for every W of WS, where it takes them all with one type;
// else GGML_TYPE_COUNT. Rows made in that type (or Q8_0 rows, see is_q8_0_rows) go to matmul() as
// they are.
ggml_type gemm_activation_type(const std::vector<ggml_tensor *> & ws, const ggml_tensor * x);

// X for products with each W of WS made apart (matmul(W, result) anywhere in the graph: a product
// per layer of one input): in our GEMM's activation type, brought there once, where that GEMM takes
// them all; else X itself.
ggml_tensor * activations_for(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x);
} // namespace ops

// The kernel's graph op, unconditionally (tests compare it with ggml_mul_mat): X is quantized to the
// activation type as ggml's mul_mat does it (Q8_K by our kernels/quantize_q8_k, bit for bit; the others
// by a ggml copy, ggml's own quantize_row), then the custom op runs; B, if given, is added in the
// kernel's epilogue.
ggml_tensor * avx512_gemm_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b = nullptr);

// Q8_0 activation rows with our GEMM's per-block data after each row (I32 [row bytes / 4, N],
// avx512_gemm_q8_0_row_bytes), as the ops that make them mark them; matmul() takes them as they are.
bool is_q8_0_rows(const ggml_tensor * x);
ggml_tensor * mark_as_q8_0_rows(ggml_tensor * x);

// Whether ops::matmul() would take the kernel for these operands.
bool avx512_gemm_applies(const ggml_tensor * w, const ggml_tensor * x);

// One activation column (decode; over weights in the panel layout up to AVX512_PANEL_SMALL_N columns,
// a column per sequence): our GEMV (kernels/avx512_gemv.h), which quantizes X itself, where
// it has a kernel for W's type; the op and the test.
ggml_tensor * avx512_gemv_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b = nullptr);
bool avx512_gemv_applies(const ggml_tensor * w, const ggml_tensor * x);

// Whether our kernels take this weight, in its file layout, for every column count (GEMM and GEMV):
// then it gains nothing from ggml's CPU repack buffer, whose layout our GEMV does not read.
bool matmul_reads_file_layout(const ggml_tensor * w);

constexpr int64_t AVX512_GEMM_MIN_COLS = 8;

// Weights stored in our kernels' panel layout (kernels/avx512_gemm.h) at load: ops::matmul then always
// takes our GEMM (GEMV for one column) for them. panel_layout_takes: whether W (a host tensor in the
// file layout) can be; to_panel_layout converts its data in place on N_THREADS threads and marks it.
bool in_panel_layout(const ggml_tensor * w);
bool panel_layout_takes(const ggml_tensor * w);
void to_panel_layout(ggml_tensor * w, int n_threads);
// All three as what a model file asks of the op layer when it loads (ModelFile::set_weight_relayout).
ModelFile::WeightRelayout matmul_weight_relayout();

} // namespace transcribe
