#include "norms.h"

#include "ggml-backend.h"

#include <cmath>
#include <cstring>

#include "avx512_gemm.h"
#include "custom_op.h"
#include "x86_simd.h"

namespace transcribe {

#if TRANSCRIBE_X86_SIMD

namespace {

#define LN_TARGET __attribute__((target("avx512f,avx512dq")))

// Sum of the 16 floats of V, in double.
LN_TARGET inline __m512d widen_add(__m512d acc, __m512 v) {
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// One row of N floats (N a multiple of 16).
LN_TARGET void normalize_row(const float * x, const float * w, const float * b, float * y, int64_t n, float eps) {
    __m512d sum = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        sum = widen_add(sum, _mm512_loadu_ps(x + i));
    }
    const double mean = _mm512_reduce_add_pd(sum) / double(n);
    const __m512 m = _mm512_set1_ps(float(mean));
    __m512d sq = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), m);
        sq = widen_add(sq, _mm512_mul_ps(d, d));
    }
    const __m512 scale = _mm512_set1_ps(float(1.0 / std::sqrt(_mm512_reduce_add_pd(sq) / double(n) + double(eps))));
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m), scale);
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(t, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i)));
    }
}

// One row of N floats (N a multiple of 16), as ggml's rms_norm then mul: each square rounded to F32,
// summed in double, the mean and the scale in F32.
LN_TARGET void rms_normalize_row(const float * x, const float * w, float * y, int64_t n, float eps) {
    __m512d sum = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        sum = widen_add(sum, _mm512_mul_ps(v, v));
    }
    const float  mean  = float(_mm512_reduce_add_pd(sum) / double(n));
    const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(mean + eps));
    for (int64_t i = 0; i < n; i += 16) {
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), scale), _mm512_loadu_ps(w + i)));
    }
}

// Row R of a contiguous tensor.
inline const float * row(const ggml_tensor * t, int64_t r) { return static_cast<const float *>(t->data) + r * t->ne[0]; }
inline float * row(ggml_tensor * t, int64_t r) { return static_cast<float *>(t->data) + r * t->ne[0]; }

// src[0] = x, src[1] = w, src[2] = b. Rows are split over the threads.
void run_layer_norm(ggml_tensor * dst, int ith, int nth, void * eps) {
    const ggml_tensor * x = dst->src[0];
    for (int64_t r = ith; r < ggml_nrows(x); r += nth) {
        normalize_row(row(x, r), static_cast<const float *>(dst->src[1]->data), static_cast<const float *>(dst->src[2]->data),
                      row(dst, r), x->ne[0], userdata_as_float(eps));
    }
}

// The longest row the layer norm makes into activations: a row's floats on the thread's stack.
constexpr int64_t MAX_ACTIVATION_ROW = 4096;

// As run_layer_norm, each row then made into the activations dst holds (Q8_0 rows in I32, or BF16).
void run_layer_norm_to_activations(ggml_tensor * dst, int ith, int nth, void * eps) {
    const ggml_tensor * x = dst->src[0];
    const int64_t n = x->ne[0];
    alignas(64) float normalized[MAX_ACTIVATION_ROW];
    for (int64_t r = ith; r < ggml_nrows(x); r += nth) {
        normalize_row(row(x, r), static_cast<const float *>(dst->src[1]->data), static_cast<const float *>(dst->src[2]->data),
                      normalized, n, userdata_as_float(eps));
        uint8_t * out = static_cast<uint8_t *>(dst->data) + size_t(r) * dst->nb[1];
        if (dst->type == GGML_TYPE_BF16) {
            avx512_gemm_round_bf16_rows(normalized, size_t(n), n, 0, 1, out, dst->nb[1]);
        } else {
            avx512_gemm_quantize_q8_0_rows(normalized, size_t(n), n, 0, 1, out, dst->nb[1]);
        }
    }
}

// src[0] = x, src[1] = w.
void run_rms_norm(ggml_tensor * dst, int ith, int nth, void * eps) {
    const ggml_tensor * x = dst->src[0];
    for (int64_t r = ith; r < ggml_nrows(x); r += nth) {
        rms_normalize_row(row(x, r), static_cast<const float *>(dst->src[1]->data), row(dst, r), x->ne[0], userdata_as_float(eps));
    }
}

} // namespace

bool layer_norm_kernel_takes(const ggml_tensor * x) {
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] % 16 == 0 &&
           x->ne[2] == 1 && x->ne[3] == 1;
}

bool layer_norm_kernel_makes(ggml_type out_type, int64_t row_length) {
    switch (out_type) {
        case GGML_TYPE_F32:  return true;
        case GGML_TYPE_BF16: return row_length <= MAX_ACTIVATION_ROW;
        case GGML_TYPE_Q8_0: return row_length <= MAX_ACTIVATION_ROW && avx512_gemm_q8_0_row_bytes(row_length) > 0;
        default:             return false;
    }
}

ggml_tensor * layer_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps, ggml_type out_type) {
    ggml_tensor * args[] = {x, w, b};
    if (out_type == GGML_TYPE_F32) {
        ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], 1, 1, args, 3, run_layer_norm,
                                         GGML_N_TASKS_MAX, float_as_userdata(eps));
        return ggml_set_name(y, "layer_norm");
    }
    const bool    q8_0 = out_type == GGML_TYPE_Q8_0;
    ggml_tensor * y = ggml_custom_4d(ctx, q8_0 ? GGML_TYPE_I32 : out_type, q8_0 ? avx512_gemm_q8_0_row_bytes(x->ne[0]) / 4 : x->ne[0],
                                     x->ne[1], 1, 1, args, 3, run_layer_norm_to_activations, GGML_N_TASKS_MAX, float_as_userdata(eps));
    return ggml_format_name(y, "layer_norm %s", ggml_type_name(out_type));
}

bool rms_norm_kernel_takes(const ggml_tensor * x) {
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] % 16 == 0;
}

ggml_tensor * rms_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, float eps) {
    ggml_tensor * args[] = {x, w};
    ggml_tensor * y = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 2, run_rms_norm,
                                     GGML_N_TASKS_MAX, float_as_userdata(eps));
    return ggml_set_name(y, "rms_norm");
}

#else

bool layer_norm_kernel_takes(const ggml_tensor *) { return false; }
bool layer_norm_kernel_makes(ggml_type, int64_t) { return false; }
ggml_tensor * layer_norm_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, float, ggml_type) { return nullptr; }
bool rms_norm_kernel_takes(const ggml_tensor *) { return false; }
ggml_tensor * rms_norm_op(ggml_context *, ggml_tensor *, ggml_tensor *, float) { return nullptr; }

#endif

} // namespace transcribe
