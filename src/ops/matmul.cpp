#include "matmul.h"

#include "placement.h"

#include "core/parallel.h"

#include "kernels/avx512_gemm.h"
#include "kernels/avx512_gemv.h"
#include "kernels/quantize_q8_k.h"

#include "ggml-backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace transcribe {

namespace {

// On x86 ggml's CPU repack buffer holds Q4_K as 8 interleaved rows (its q4_K_8x8 layout).
bool in_repack_buffer(const ggml_tensor * w) {
    return w->buffer && std::strcmp(ggml_backend_buft_name(ggml_backend_buffer_get_type(w->buffer)), "CPU_REPACK") == 0;
}

// Marks a weight stored in the panel layout (tensor->extra: nothing else reads a host weight's extra).
const char kPanelLayout = 0;

// src[0] = F32 rows, contiguous; dst = those rows as Q8_0 with their per-block data, split over the threads.
void run_q8_0_rows(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t rows = ggml_nrows(x);
    avx512_gemm_quantize_q8_0_rows(static_cast<const float *>(x->data), x->nb[1] / sizeof(float), x->ne[0], rows * ith / nth,
                                   rows * (ith + 1) / nth, dst->data, dst->nb[1]);
}

// Our words in a custom op's op_params, after ggml's own (its function, task count and userdata): the
// GEMM's epilogue, and the mark of Q8_0 rows in the last word. (The GEMV keeps its shares in the tail
// of its own nodes, which are F32 and carry no epilogue, so neither is ever read there.)
constexpr int kEpilogueAt = 6;
static_assert(kEpilogueAt * sizeof(int32_t) >= 2 * sizeof(void *) + 2 * sizeof(int), "the epilogue would overlap ggml's custom op params");
constexpr int     kRowsMarkAt = int(GGML_MAX_OP_PARAMS / sizeof(int32_t)) - 1;
constexpr int32_t kQ8_0RowsMark = 0x52303851; // "Q80R"

enum : int32_t { kHasBias = 1, kSilu = 2, kHasResidual = 4, kRelu = 8 };
struct GemmEpilogueParams {
    int32_t flags;
    float   scale;
};

// The weight travels as the ops' user data rather than as a source: the scheduler would otherwise
// refuse the op for a weight in ggml's CPU repack buffer, whose layout only ggml's own matmul reads
// (and ours, for Q4_K). Weights are constants, so the graph needs no edge from them.
Avx512GemmArgs args_of(const ggml_tensor * w, const ggml_tensor * x) {
    Avx512GemmArgs a;
    a.type    = w->type;
    a.q4_k_x8 = in_repack_buffer(w);
    a.panels  = in_panel_layout(w);
    a.w       = w->data;
    a.x       = x->data;
    a.K       = w->ne[0];
    a.M       = w->ne[1];
    a.N       = x->ne[1];
    a.w_row_bytes = w->nb[1];
    a.x_row_bytes = x->nb[1];
    return a;
}

// dst = the activation rows' per-block data, from src[0] = the quantized activations.
void run_prepare(ggml_tensor * dst, int ith, int nth, void * weight) {
    Avx512GemmArgs a = args_of(static_cast<const ggml_tensor *>(weight), dst->src[0]);
    a.aux          = static_cast<int32_t *>(dst->data);
    a.aux_row_ints = dst->nb[1] / sizeof(int32_t);
    avx512_gemm_prepare(a, ith, nth);
}

// dst = the epilogue of W x (+ b), from src[0] = the quantized (or BF16) activations, then their
// per-block data where the type has it and they do not carry it, then the bias and the residual as
// the op's epilogue words say. dst: F32, BF16, or Q8_0 rows for the next product.
void run_gemm(ggml_tensor * dst, int ith, int nth, void * weight) {
    Avx512GemmArgs a = args_of(static_cast<const ggml_tensor *>(weight), dst->src[0]);
    int next = 1;
    if (is_q8_0_rows(dst->src[0])) { // each row's per-block data after its blocks
        avx512_gemm_read_q8_0_rows(a, dst->src[0]->data, dst->src[0]->nb[1]);
    } else if (avx512_gemm_aux_ints(a.type, a.K) > 0) {
        const ggml_tensor * aux = dst->src[next++];
        a.aux          = static_cast<int32_t *>(aux->data);
        a.aux_row_ints = aux->nb[1] / sizeof(int32_t);
    }
    GemmEpilogueParams e;
    std::memcpy(&e, dst->op_params + kEpilogueAt, sizeof e);
    if (e.flags & kHasBias) {
        a.bias = static_cast<const float *>(dst->src[next++]->data);
    }
    if (e.flags & kHasResidual) {
        const ggml_tensor * r = dst->src[next++];
        a.residual            = static_cast<const float *>(r->data);
        a.residual_row_floats = r->nb[1] / sizeof(float);
        a.residual_scale      = e.scale;
    }
    a.relu         = (e.flags & kRelu) != 0;
    a.silu         = (e.flags & kSilu) != 0;
    a.y            = static_cast<float *>(dst->data);
    a.y_row_floats = dst->nb[1] / sizeof(float);
    if (dst->type != GGML_TYPE_F32) {
        a.y_type      = is_q8_0_rows(dst) ? GGML_TYPE_Q8_0 : dst->type;
        a.y_row_bytes = dst->nb[1];
    }
    avx512_gemm(a, ith, nth);
}

// The words the GEMV's threads keep their shares of the rows in: the tail of the node's own op_params
// (ggml keeps the custom op's function, task count and userdata at its head; the rest is zeroed when
// the node is made and lives as long as it). The node's, not the weight's: sessions sharing a model
// run the same weight at once.
constexpr int kSharesAt = int(GGML_MAX_OP_PARAMS / sizeof(int32_t)) - MEASURED_SHARES_WORDS;
static_assert(kSharesAt * sizeof(int32_t) >= 2 * sizeof(void *) + 2 * sizeof(int), "the shares would overlap ggml's custom op params");
int32_t * gemv_shares(ggml_tensor * dst) { return dst->op_params + kSharesAt; }

// The GEMV's operands: W times X (F32) into Y.
Avx512GemvArgs gemv_args(const ggml_tensor * w, const ggml_tensor * x, float * y) {
    Avx512GemvArgs a;
    a.type        = w->type;
    a.w           = w->data;
    a.w_row_bytes = w->nb[1];
    a.x           = static_cast<const float *>(x->data);
    a.y           = y;
    a.K           = w->ne[0];
    a.M           = w->ne[1];
    return a;
}

// dst = W x (+ b) for one column, from src[0] = x (F32), then the bias if there is one.
void run_gemv(ggml_tensor * dst, int ith, int nth, void * weight) {
    const auto * w = static_cast<const ggml_tensor *>(weight);
    Avx512GemvArgs a = gemv_args(w, dst->src[0], static_cast<float *>(dst->data));
    a.bias         = dst->src[1] ? static_cast<const float *>(dst->src[1]->data) : nullptr;
    a.N            = dst->src[0]->ne[1];
    a.x_row_floats = dst->src[0]->nb[1] / sizeof(float);
    a.y_row_floats = dst->nb[1] / sizeof(float);
    a.shares       = gemv_shares(dst);
    if (in_panel_layout(w)) {
        avx512_panel_gemv(a, ith, nth);
    } else {
        avx512_gemv(a, ith, nth);
    }
}

// Whether the switch NAME is set in the environment (to anything but empty or 0).
bool switched_on(const char * name) {
    const char * v = std::getenv(name);
    return v && *v && *v != '0';
}

// TRANSCRIBE_NO_AVX512_GEMM=1 leaves every product to ggml (for benchmarks against it).
bool enabled() {
    static const bool on = !switched_on("TRANSCRIBE_NO_AVX512_GEMM");
    return on;
}

// Whether the GEMM kernel takes a weight of W's type and shape (wherever it lies).
bool gemm_takes_shape(const ggml_tensor * w) {
    return enabled() && avx512_gemm_handles(w->type) && w->ne[0] % avx512_gemm_row_multiple(w->type) == 0 &&
           w->ne[1] % 32 == 0 && w->ne[2] == 1 && w->ne[3] == 1;
}

} // namespace

bool is_q8_0_rows(const ggml_tensor * x) {
    return x->op == GGML_OP_CUSTOM && x->type == GGML_TYPE_I32 && x->op_params[kRowsMarkAt] == kQ8_0RowsMark;
}

ggml_tensor * mark_as_q8_0_rows(ggml_tensor * x) {
    x->op_params[kRowsMarkAt] = kQ8_0RowsMark;
    return x;
}

bool avx512_gemm_applies(const ggml_tensor * w, const ggml_tensor * x) {
    const bool host_layout = in_host_memory(w) && !w->extra;
    const bool repacked    = w->type == GGML_TYPE_Q4_K && in_repack_buffer(w);
    return gemm_takes_shape(w) && (host_layout || repacked) && ggml_is_contiguous(w) && x->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(x) && x->ne[0] == w->ne[0] && x->ne[2] == 1 && x->ne[3] == 1 && x->ne[1] >= AVX512_GEMM_MIN_COLS;
}

bool avx512_gemv_applies(const ggml_tensor * w, const ggml_tensor * x) {
    return enabled() && avx512_gemv_handles(w->type, w->ne[0]) && in_host_memory(w) && !w->extra && ggml_is_contiguous(w) &&
           w->ne[2] == 1 && w->ne[3] == 1 && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) &&
           x->ne[0] == w->ne[0] && x->ne[1] == 1 && x->ne[2] == 1 && x->ne[3] == 1;
}

bool matmul_reads_file_layout(const ggml_tensor * w) { return gemm_takes_shape(w) && avx512_gemv_handles(w->type, w->ne[0]); }

bool in_panel_layout(const ggml_tensor * w) { return w->extra == &kPanelLayout; }

bool panel_layout_takes(const ggml_tensor * w) {
    return enabled() && avx512_panel_layout_takes(w->type, w->ne[0], w->ne[1]) && w->ne[2] == 1 && w->ne[3] == 1 &&
           ggml_is_contiguous(w);
}

ModelFile::WeightRelayout matmul_weight_relayout() { return {matmul_reads_file_layout, panel_layout_takes, to_panel_layout}; }

void to_panel_layout(ggml_tensor * w, int n_threads) {
    const int64_t panels = w->ne[1] / 32;
    const size_t  panel_bytes = ggml_row_size(w->type, w->ne[0]) * 32;
    std::vector<uint8_t> scratch(panel_bytes * size_t(n_threads)); // before the threads: they allocate nothing
    parallel_for(n_threads, [&](int t) {
        avx512_to_panel_layout(w->data, w->type, w->ne[0], panels * t / n_threads, panels * (t + 1) / n_threads,
                               scratch.data() + panel_bytes * size_t(t));
    });
    w->extra = const_cast<char *>(&kPanelLayout);
}

// dst = the products of src[0] (x, one column) with src[1..] (weights in the file layout), stacked by rows.
void run_gemv_stacked(ggml_tensor * dst, int ith, int nth, void *) {
    constexpr int MAX_PARTS = GGML_MAX_SRC - 1;
    Avx512GemvArgs parts[MAX_PARTS];
    int n_parts = 0;
    int64_t first = 0;
    for (; n_parts < MAX_PARTS && dst->src[n_parts + 1]; ++n_parts) {
        const ggml_tensor * w = dst->src[n_parts + 1];
        parts[n_parts] = gemv_args(w, dst->src[0], static_cast<float *>(dst->data) + first);
        first += w->ne[1];
    }
    avx512_gemv_stacked(parts, n_parts, gemv_shares(dst), ith, nth);
}

ggml_tensor * avx512_gemv_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b) {
    ggml_tensor * args[2] = {x, b};
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, w->ne[1], x->ne[1], 1, 1, args, b ? 2 : 1, run_gemv, GGML_N_TASKS_MAX, w);
    ggml_format_name(y, "avx512_gemv %s", ggml_type_name(w->type));
    return y;
}

// Rows of dst (Q8_K) = rows of src[0] (F32, contiguous) quantized, split over the threads.
void run_quantize_q8_k(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t rows = ggml_nrows(x);
    for (int64_t r = rows * ith / nth; r < rows * (ith + 1) / nth; ++r) {
        quantize_q8_k(static_cast<const float *>(x->data) + r * x->ne[0], static_cast<char *>(dst->data) + r * dst->nb[1], x->ne[0]);
    }
}

// Rows of dst (BF16) = rows of src[0] (F32, contiguous) rounded as ggml's cast rounds, split over the threads.
void run_round_bf16(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t rows = ggml_nrows(x);
    avx512_gemm_round_bf16_rows(static_cast<const float *>(x->data), size_t(x->ne[0]), x->ne[0], rows * ith / nth,
                                rows * (ith + 1) / nth, dst->data, dst->nb[1]);
}

// X in the activation type ACT: our Q8_0 and Q8_K quantizers and BF16 rounding where this CPU runs them
// (ggml's Q8_K is its scalar reference, its BF16 cast a scalar loop), ggml's cast otherwise.
ggml_tensor * to_activation_type(ggml_context * ctx, ggml_tensor * x, ggml_type act) {
    if (act == x->type || is_q8_0_rows(x)) {
        return x;
    }
    if (act == GGML_TYPE_BF16) {
        return ops::to_bf16(ctx, x);
    }
    const int64_t q8_0_row_bytes = avx512_gemm_q8_0_row_bytes(x->ne[0]);
    if (act == GGML_TYPE_Q8_0 && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && q8_0_row_bytes > 0) {
        ggml_tensor * args[1] = {x};
        ggml_tensor * q = ggml_custom_4d(ctx, GGML_TYPE_I32, q8_0_row_bytes / 4, ggml_nrows(x), 1, 1, args, 1, run_q8_0_rows,
                                         GGML_N_TASKS_MAX, nullptr);
        ggml_set_name(q, "q8_0_rows");
        return mark_as_q8_0_rows(q);
    }
    if (act == GGML_TYPE_Q8_K && x->type == GGML_TYPE_F32 && quantize_q8_k_available() && ggml_is_contiguous(x) && x->ne[0] % ggml_blck_size(GGML_TYPE_Q8_K) == 0) {
        ggml_tensor * args[1] = {x};
        ggml_tensor * q = ggml_custom_4d(ctx, GGML_TYPE_Q8_K, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 1, run_quantize_q8_k, GGML_N_TASKS_MAX, nullptr);
        ggml_set_name(q, "quantize_q8_k");
        return q;
    }
    return ggml_cast(ctx, x, act);
}

namespace {
// The GEMM's node: W x (+ B), then the epilogue E, the result in OUT_TYPE (F32; BF16 or Q8_0 rows
// for weights in the panel layout only).
ggml_tensor * gemm_node(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b, const ops::Epilogue & e,
                        ggml_type out_type) {
    const ggml_type act = avx512_gemm_activation_type(w->type);
    ggml_tensor * args[4] = {to_activation_type(ctx, x, act), nullptr, nullptr, nullptr};
    int n_args = 1;
    if (is_q8_0_rows(args[0])) {
        // its per-block data travels in its rows
    } else if (const int64_t aux = avx512_gemm_aux_ints(w->type, w->ne[0])) {
        args[n_args++] = ggml_custom_4d(ctx, GGML_TYPE_I32, aux, x->ne[1], 1, 1, args, 1, run_prepare, GGML_N_TASKS_MAX, w);
    }
    GemmEpilogueParams params = {(e.silu ? kSilu : 0) | (e.relu ? kRelu : 0), e.scale};
    if (b) {
        args[n_args++] = b;
        params.flags |= kHasBias;
    }
    if (e.residual) {
        args[n_args++] = e.residual;
        params.flags |= kHasResidual;
    }
    ggml_tensor * y = out_type == GGML_TYPE_Q8_0
                          ? mark_as_q8_0_rows(ggml_custom_4d(ctx, GGML_TYPE_I32, avx512_gemm_q8_0_row_bytes(w->ne[1]) / 4, x->ne[1],
                                                             1, 1, args, n_args, run_gemm, GGML_N_TASKS_MAX, w))
                          : ggml_custom_4d(ctx, out_type, w->ne[1], x->ne[1], 1, 1, args, n_args, run_gemm, GGML_N_TASKS_MAX, w);
    std::memcpy(y->op_params + kEpilogueAt, &params, sizeof params);
    ggml_format_name(y, "avx512_gemm %s", ggml_type_name(w->type));
    return y;
}
} // namespace

ggml_tensor * avx512_gemm_op(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b) {
    return gemm_node(ctx, w, x, b, {}, GGML_TYPE_F32);
}

namespace {
// PRODUCT(fused) of W with the bias B in the kernel's epilogue (fused = B) where the kernel can read it
// (an F32 vector in host memory), else PRODUCT(nullptr) and ggml's add of B after it.
template <typename Product> ggml_tensor * with_bias(ggml_context * ctx, const ggml_tensor * w, ggml_tensor * b, Product product) {
    const bool fuse = is_host_f32_vector(b, w->ne[1]);
    ggml_tensor * y = product(fuse ? b : nullptr);
    return b && !fuse ? ggml_add(ctx, y, b) : y;
}
} // namespace

namespace ops {

ggml_tensor * matmul(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b) {
    if ((x->type != GGML_TYPE_F32 && x->type == avx512_gemm_activation_type(w->type)) || is_q8_0_rows(x)) { // from activations_for()
        return with_bias(ctx, w, b, [&](ggml_tensor * fused) { return avx512_gemm_op(ctx, w, x, fused); });
    }
    if (in_panel_layout(w)) { // only our kernels read it: the activations are brought to what they take
        const int64_t cols = ggml_nelements(x) / x->ne[0];
        ggml_tensor * x2 = x->type == GGML_TYPE_F32 ? x : ggml_cast(ctx, x, GGML_TYPE_F32);
        x2 = ggml_is_contiguous(x2) ? x2 : ggml_cont(ctx, x2);
        x2 = ggml_reshape_2d(ctx, x2, x->ne[0], cols);
        ggml_tensor * y = with_bias(ctx, w, b, [&](ggml_tensor * fused) {
            return cols <= AVX512_PANEL_SMALL_N ? avx512_gemv_op(ctx, w, x2, fused) : avx512_gemm_op(ctx, w, x2, fused);
        });
        return ggml_reshape_4d(ctx, y, w->ne[1], x->ne[1], x->ne[2], x->ne[3]);
    }
    const bool gemm = avx512_gemm_applies(w, x);
    if (gemm || avx512_gemv_applies(w, x)) {
        return with_bias(ctx, w, b, [&](ggml_tensor * fused) {
            return gemm ? avx512_gemm_op(ctx, w, x, fused) : avx512_gemv_op(ctx, w, x, fused);
        });
    }
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    return b ? ggml_add(ctx, y, b) : y;
}

ggml_type gemm_activation_type(const std::vector<ggml_tensor *> & ws, const ggml_tensor * x) {
    if (ws.empty() || x->type != GGML_TYPE_F32 || !ggml_is_contiguous(x) || x->ne[2] != 1 || x->ne[3] != 1) {
        return GGML_TYPE_COUNT;
    }
    const ggml_type act = avx512_gemm_activation_type(ws[0]->type);
    for (ggml_tensor * w : ws) {
        const bool panel = in_panel_layout(w) && x->ne[1] > AVX512_PANEL_SMALL_N && x->ne[0] == w->ne[0];
        if (!(panel || avx512_gemm_applies(w, x)) || avx512_gemm_activation_type(w->type) != act) {
            return GGML_TYPE_COUNT;
        }
    }
    return act;
}

namespace {
// Whether X can be brought to our GEMM's activation type once for all of several products.
bool gemms_share_activations(const std::vector<ggml_tensor *> & ws, const ggml_tensor * x) {
    return ws.size() >= 2 && gemm_activation_type(ws, x) != GGML_TYPE_COUNT;
}

// Whether our GEMM's epilogue can do E for W x (+ B): the GEMM takes them (weights in the panel layout:
// more columns than a decode step, X F32 rows or already activations for W), the bias in host memory,
// the residual F32 rows of the result's shape.
bool epilogue_fuses(const ggml_tensor * w, const ggml_tensor * x, const ggml_tensor * b, const Epilogue & e) {
    const ggml_type act = avx512_gemm_activation_type(w->type);
    const bool activations = is_q8_0_rows(x) ? act == GGML_TYPE_Q8_0 && x->ne[0] * 4 == avx512_gemm_q8_0_row_bytes(w->ne[0])
                                             : (x->type == act || x->type == GGML_TYPE_F32) && ggml_is_contiguous(x) && x->ne[0] == w->ne[0];
    const bool residual = !e.residual || (e.residual->type == GGML_TYPE_F32 && ggml_is_contiguous(e.residual) &&
                                          e.residual->ne[0] == w->ne[1] && e.residual->ne[1] == x->ne[1] &&
                                          ggml_nelements(e.residual) == w->ne[1] * x->ne[1]);
    const bool kernel = in_panel_layout(w) ? activations && x->ne[2] == 1 && x->ne[3] == 1 && x->ne[1] > AVX512_PANEL_SMALL_N
                                           : avx512_gemm_applies(w, x);
    return kernel && (!b || is_host_f32_vector(b, w->ne[1])) && residual;
}

// The type the epilogue makes W x in for E.feeds: that product's activation type where it reads them
// as they are (both weights in the panel layout), else F32.
ggml_type epilogue_output_type(const ggml_tensor * w, const Epilogue & e) {
    if (!e.feeds || !in_panel_layout(w) || !in_panel_layout(e.feeds) || e.feeds->ne[0] != w->ne[1]) {
        return GGML_TYPE_F32;
    }
    const ggml_type act = avx512_gemm_activation_type(e.feeds->type);
    if (act == GGML_TYPE_Q8_0) {
        return avx512_gemm_q8_0_row_bytes(w->ne[1]) > 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F32;
    }
    return act == GGML_TYPE_BF16 ? act : GGML_TYPE_F32;
}
} // namespace

ggml_tensor * to_bf16(ggml_context * ctx, ggml_tensor * x) {
    if (x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] % 16 == 0 && avx512_gemm_handles(GGML_TYPE_BF16)) {
        ggml_tensor * args[1] = {x};
        ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_BF16, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 1, run_round_bf16,
                                         GGML_N_TASKS_MAX, nullptr);
        return ggml_set_name(y, "to_bf16");
    }
    return ggml_cast(ctx, x, GGML_TYPE_BF16);
}

bool fusion_enabled() { return !switched_on("TRANSCRIBE_UNFUSED"); }

ggml_tensor * matmul(ggml_context * ctx, ggml_tensor * w, ggml_tensor * x, ggml_tensor * b, const Epilogue & e) {
    if (fusion_enabled() && epilogue_fuses(w, x, b, e)) {
        return gemm_node(ctx, w, x, b, e, epilogue_output_type(w, e));
    }
    ggml_tensor * y = matmul(ctx, w, x, b);
    if (e.relu) {
        y = ggml_relu(ctx, y);
    }
    if (e.silu) {
        y = ggml_silu(ctx, y);
    }
    if (e.residual) {
        y = ggml_add(ctx, e.residual, e.scale == 1.0f ? y : ggml_scale(ctx, y, e.scale));
    }
    return y;
}

ggml_tensor * activations_for(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x) {
    return gemms_share_activations(ws, x) ? to_activation_type(ctx, x, avx512_gemm_activation_type(ws[0]->type)) : x;
}

std::vector<ggml_tensor *> matmuls(ggml_context * ctx, const std::vector<ggml_tensor *> & ws, ggml_tensor * x,
                                   const std::vector<ggml_tensor *> & bs) {
    auto bias = [&](size_t i) { return i < bs.size() ? bs[i] : nullptr; };
    std::vector<ggml_tensor *> ys;
    if (gemms_share_activations(ws, x)) {
        ggml_tensor * xa = to_activation_type(ctx, x, avx512_gemm_activation_type(ws[0]->type));
        for (size_t i = 0; i < ws.size(); ++i) {
            ys.push_back(with_bias(ctx, ws[i], bias(i), [&](ggml_tensor * fused) { return avx512_gemm_op(ctx, ws[i], xa, fused); }));
        }
        return ys;
    }
    bool stack = ws.size() > 1 && ws.size() < GGML_MAX_SRC;
    int64_t rows = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
        stack = stack && avx512_gemv_applies(ws[i], x) && !bias(i);
        rows += ws[i]->ne[1];
    }
    if (!stack) {
        for (size_t i = 0; i < ws.size(); ++i) {
            ys.push_back(matmul(ctx, ws[i], x, bias(i)));
        }
        return ys;
    }
    // The weights are sources here, not user data: the stacked op takes none from ggml's CPU repack
    // buffer (avx512_gemv_applies), so the scheduler has no reason to refuse it.
    ggml_tensor * args[GGML_MAX_SRC] = {x};
    std::copy(ws.begin(), ws.end(), args + 1);
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, rows, 1, 1, 1, args, int(ws.size()) + 1, run_gemv_stacked, GGML_N_TASKS_MAX, nullptr);
    ggml_set_name(y, "avx512_gemv stacked");
    int64_t first = 0;
    for (ggml_tensor * w : ws) {
        ys.push_back(ggml_view_2d(ctx, y, w->ne[1], 1, size_t(w->ne[1]) * sizeof(float), size_t(first) * sizeof(float)));
        first += w->ne[1];
    }
    return ys;
}

} // namespace ops

} // namespace transcribe
