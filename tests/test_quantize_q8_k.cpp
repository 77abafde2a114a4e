// Our Q8_K quantizer (kernels/quantize_q8_k.h) against ggml's own (the type traits' from_float, which
// ggml's mul_mat uses for Q4_K and Q6_K weights): byte for byte, on rows that exercise what could
// differ: rounding ties, a largest magnitude met twice with both signs, values at the clamp, zero
// blocks, tiny and huge scales.
#include "kernels/quant_blocks.h"
#include "kernels/quantize_q8_k.h"

#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace transcribe;

namespace {

std::vector<uint8_t> ggml_q8_k(const std::vector<float> & x) {
    std::vector<uint8_t> out(x.size() / QK_K * Q8_K_BYTES, 0);
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x.data(), out.data(), int64_t(x.size()));
    return out;
}

std::vector<uint8_t> ours_q8_k(const std::vector<float> & x) {
    std::vector<uint8_t> out(x.size() / QK_K * Q8_K_BYTES, 0xa5); // every byte must be written
    quantize_q8_k(x.data(), out.data(), int64_t(x.size()));
    return out;
}

} // namespace

TEST(QuantizeQ8K, Equals_ggml_byte_for_byte) {
    if (!quantize_q8_k_available() || !quant_layouts_match()) {
        GTEST_SKIP() << "no AVX-512 on this CPU";
    }
    ggml_cpu_init();
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int blocks = 64;
    std::vector<float> x(size_t(blocks) * QK_K);
    for (int b = 0; b < blocks; ++b) {
        float * v = x.data() + size_t(b) * QK_K;
        const float scale = std::ldexp(1.0f, (b % 9) * 6 - 24); // 2^-24 .. 2^24
        for (int i = 0; i < QK_K; ++i) {
            v[i] = normal(rng) * scale;
        }
        switch (b % 8) {
            case 1: // the largest magnitude twice, the negative one first
                v[17] = -8.0f * scale, v[200] = 8.0f * scale;
                break;
            case 2: // values whose scaled value is exactly halfway: max 127, so x = k + 0.5 lands on ties
                for (int i = 0; i < QK_K; ++i) {
                    v[i] = float(i % 254) - 126.5f;
                }
                v[3] = 127.0f;
                break;
            case 3: // all zero
                std::fill(v, v + QK_K, 0.0f);
                break;
            case 4: // one value, the rest zero, the largest last
                std::fill(v, v + QK_K, 0.0f);
                v[QK_K - 1] = -3.0f * scale;
                break;
            case 5: // all equal
                std::fill(v, v + QK_K, 0.75f * scale);
                break;
            default: break;
        }
    }
    const std::vector<uint8_t> ref = ggml_q8_k(x), ours = ours_q8_k(x);
    ASSERT_EQ(ours.size(), ref.size());
    for (int b = 0; b < blocks; ++b) {
        const uint8_t * r = ref.data() + size_t(b) * Q8_K_BYTES, * o = ours.data() + size_t(b) * Q8_K_BYTES;
        float rd, od;
        std::memcpy(&rd, r, 4);
        std::memcpy(&od, o, 4);
        if (rd == 0.0f) { // ggml leaves the sums of an all-zero block as they were: compare the rest
            EXPECT_EQ(od, 0.0f) << "block " << b;
            EXPECT_EQ(std::memcmp(o + 4, r + 4, QK_K), 0) << "block " << b;
            continue;
        }
        EXPECT_EQ(std::memcmp(o, r, Q8_K_BYTES), 0) << "block " << b << " (case " << b % 8 << "): scale " << od << " vs ggml's " << rd;
    }
}
