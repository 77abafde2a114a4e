// The LSTM cell as one op (kernels/lstm_cell.h) against the same cell as ggml's separate ops (sigmoid,
// tanh, products, sum): the kernel evaluates the same formulas with the same roundings, so the two agree
// bit for bit, h' and c' alike.
#include "kernels/lstm_cell.h"
#include "support.h"

#include <gtest/gtest.h>

#include <vector>

using namespace transcribe;

namespace {

// ggml's ops for the cell, as ops::lstm_cell builds them where the kernel does not run: [H, 2] (h', c').
ggml_tensor * cell_of_ggml_ops(ggml_context * g, ggml_tensor * z, ggml_tensor * c_prev) {
    const int64_t H = c_prev->ne[0];
    const size_t  col = size_t(H) * sizeof(float);
    ggml_tensor * sg = ggml_sigmoid(g, z);
    ggml_tensor * c  = ggml_add(g, ggml_mul(g, ggml_view_1d(g, sg, H, col), c_prev),
                                ggml_mul(g, ggml_view_1d(g, sg, H, 0), ggml_tanh(g, ggml_view_1d(g, z, H, 2 * col))));
    ggml_tensor * h  = ggml_mul(g, ggml_view_1d(g, sg, H, 3 * col), ggml_tanh(g, c));
    return ggml_concat(g, ggml_reshape_2d(g, h, H, 1), ggml_reshape_2d(g, c, H, 1), 1);
}

} // namespace

// The prediction net's width (640) and Silero VAD's (128); gate inputs from saturated (|z| ~ 12) to small.
TEST(LstmCell, One_op_equals_ggmls_separate_ops_bit_for_bit) {
    for (const int64_t H : {640, 128}) {
        test::CpuOperands o(2, unsigned(H));
        ggml_tensor * z = o.add(4 * H);
        ggml_tensor * c = o.add(H);
        o.allocate();
        o.fill(z, 4.0f);
        o.fill(c, 2.0f);
        ASSERT_TRUE(lstm_cell_kernel_takes(z, c));
        const std::vector<float> ref  = test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return cell_of_ggml_ops(g, z, c); });
        const std::vector<float> ours = test::compute_on_cpu(o.cpu, [&](ggml_context * g) { return lstm_cell_op(g, z, c); });
        ASSERT_EQ(ours.size(), size_t(2 * H));
        EXPECT_EQ(ours, ref) << "H " << H;
    }
}
