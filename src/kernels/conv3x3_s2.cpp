#include "conv3x3_s2.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace transcribe {

namespace {

int64_t halved(int64_t n) { return (n - 1) / 2 + 1; }

// Output positions (f', t', n) split over the threads by runs of whole time steps.
void thread_share(int64_t n_cols, int ith, int nth, int64_t & begin, int64_t & end) {
    begin = n_cols * ith / nth;
    end   = n_cols * (ith + 1) / nth;
}

void run_single_channel(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0], * k = dst->src[1], * b = dst->src[2];
    const int64_t T = x->ne[0], F = x->ne[1], C = dst->ne[0], Fo = dst->ne[1], To = dst->ne[2], N = dst->ne[3];
    const float * xs = static_cast<const float *>(x->data);
    const float * ks = static_cast<const float *>(k->data);
    const float * bs = static_cast<const float *>(b->data);
    float * out = static_cast<float *>(dst->data);
    // The kernel tap-major ([9][C]) so a tap's weights over the channels are contiguous.
    std::vector<float> taps(size_t(9 * C));
    for (int64_t c = 0; c < C; ++c) {
        for (int tap = 0; tap < 9; ++tap) {
            taps[size_t(tap * C + c)] = ks[c * 9 + tap]; // ggml's [KW, KH, 1, C]: tap = kh * 3 + kw
        }
    }
    int64_t begin = 0, end = 0;
    thread_share(To * N, ith, nth, begin, end);
    for (int64_t col = begin; col < end; ++col) {
        const int64_t n = col / To, to = col % To;
        for (int64_t fo = 0; fo < Fo; ++fo) {
            float * __restrict y = out + ((n * To + to) * Fo + fo) * C;
            std::memcpy(y, bs, size_t(C) * sizeof(float));
            for (int kh = 0; kh < 3; ++kh) {
                const int64_t f = 2 * fo + kh - 1;
                if (f < 0 || f >= F) {
                    continue;
                }
                for (int kw = 0; kw < 3; ++kw) {
                    const int64_t t = 2 * to + kw - 1;
                    if (t < 0 || t >= T) {
                        continue;
                    }
                    const float v = xs[(n * F + f) * T + t];
                    const float * __restrict w = taps.data() + (kh * 3 + kw) * C;
                    for (int64_t c = 0; c < C; ++c) {
                        y[c] += v * w[c];
                    }
                }
            }
        }
    }
}

void run_im2col(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * x = dst->src[0];
    const int64_t C = x->ne[0], F = x->ne[1], T = x->ne[2], Fo = dst->ne[1], To = dst->ne[2], N = dst->ne[3];
    const float * xs = static_cast<const float *>(x->data);
    float * out = static_cast<float *>(dst->data);
    const size_t run = size_t(C) * sizeof(float);
    int64_t begin = 0, end = 0;
    thread_share(To * N, ith, nth, begin, end);
    for (int64_t col = begin; col < end; ++col) {
        const int64_t n = col / To, to = col % To;
        for (int64_t fo = 0; fo < Fo; ++fo) {
            float * y = out + ((n * To + to) * Fo + fo) * 9 * C;
            for (int kf = 0; kf < 3; ++kf) {
                const int64_t f = 2 * fo + kf - 1;
                for (int kt = 0; kt < 3; ++kt, y += C) {
                    const int64_t t = 2 * to + kt - 1;
                    if (f < 0 || f >= F || t < 0 || t >= T) {
                        std::memset(y, 0, run);
                    } else {
                        std::memcpy(y, xs + ((n * T + t) * F + f) * C, run);
                    }
                }
            }
        }
    }
}

} // namespace

ggml_tensor * conv3x3_s2_single_channel_op(ggml_context * ctx, ggml_tensor * x, ggml_tensor * kernel, ggml_tensor * bias) {
    ggml_tensor * args[] = {x, kernel, bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, kernel->ne[3], halved(x->ne[1]), halved(x->ne[0]), x->ne[2], args, 3,
                          run_single_channel, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor * im2col3x3_s2_op(ggml_context * ctx, ggml_tensor * x) {
    ggml_tensor * args[] = {x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, 9 * x->ne[0], halved(x->ne[1]), halved(x->ne[2]), x->ne[3], args, 1, run_im2col,
                          GGML_N_TASKS_MAX, nullptr);
}

} // namespace transcribe
