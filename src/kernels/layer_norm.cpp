#include "layer_norm.h"

#include "core/backend.h"

#include "ggml-backend.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRANSCRIBE_AVX512_LAYER_NORM 1
#include <immintrin.h>
// GCC 12 takes the undefined first operand inside some AVX-512 intrinsics for an uninitialised read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

namespace transcribe {

#if TRANSCRIBE_AVX512_LAYER_NORM

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

// src[0] = x, src[1] = w, src[2] = b; eps is the user data's bits. Rows are split over the threads.
void run_layer_norm(ggml_tensor * dst, int ith, int nth, void * eps_bits) {
    const ggml_tensor * x = dst->src[0];
    float eps;
    const uint32_t bits = uint32_t(reinterpret_cast<uintptr_t>(eps_bits));
    std::memcpy(&eps, &bits, sizeof(eps));
    const int64_t n = x->ne[0], rows = x->ne[1];
    for (int64_t r = ith; r < rows; r += nth) {
        normalize_row(reinterpret_cast<const float *>(static_cast<const char *>(x->data) + r * x->nb[1]),
                      static_cast<const float *>(dst->src[1]->data), static_cast<const float *>(dst->src[2]->data),
                      reinterpret_cast<float *>(static_cast<char *>(dst->data) + r * dst->nb[1]), n, eps);
    }
}

bool cpu_has_avx512() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    return ok;
}

} // namespace

bool layer_norm_op_applies(const ggml_tensor * x, const ggml_tensor * w, const ggml_tensor * b) {
    return cpu_has_avx512() && x->type == GGML_TYPE_F32 && ggml_is_contiguous(x) && x->ne[0] % 16 == 0 &&
           x->ne[2] == 1 && x->ne[3] == 1 && is_host_f32_vector(w, x->ne[0]) && is_host_f32_vector(b, x->ne[0]);
}

ggml_tensor * layer_norm_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps) {
    uint32_t bits;
    std::memcpy(&bits, &eps, sizeof(bits));
    ggml_tensor * args[] = {x, w, b};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], 1, 1, args, 3, run_layer_norm, GGML_N_TASKS_MAX,
                          reinterpret_cast<void *>(uintptr_t(bits)));
}

#else

bool layer_norm_op_applies(const ggml_tensor *, const ggml_tensor *, const ggml_tensor *) { return false; }
ggml_tensor * layer_norm_op(ggml_context *, ggml_tensor *, ggml_tensor *, ggml_tensor *, float) { return nullptr; }

#endif

} // namespace transcribe
