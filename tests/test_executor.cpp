// The executor keeps a graph's allocation while that graph runs again with nothing else allocated in
// between, and allocates anew after another graph: each run must see its own new inputs either way.
#include "core/backend.h"

#include <gtest/gtest.h>

#include <vector>

using namespace transcribe;

namespace {

// y = 2 x + 1 over N floats.
struct Affine {
    Graph         g;
    ggml_tensor * x, * y;
    explicit Affine(int64_t n) : g(16, "affine") {
        x = g.input("x", GGML_TYPE_F32, n);
        y = ggml_scale_bias(g.ctx(), x, 2.0f, 1.0f);
        g.output(y, "y");
    }
    std::vector<float> run(Executor & exec, const std::vector<float> & in) {
        exec.compute(g, [&] { tensor_set(x, in); });
        return tensor_get_f32(y);
    }
};

std::vector<float> affine_of(const std::vector<float> & in) {
    std::vector<float> out;
    for (float v : in) {
        out.push_back(2.0f * v + 1.0f);
    }
    return out;
}

} // namespace

TEST(Executor, A_graph_run_again_or_after_another_sees_its_new_inputs) {
    Executor exec(select_device(TRANSCRIBE_BACKEND_CPU, 0), 2);
    Affine small(64), large(4096);
    const std::vector<float> a(64, 1.5f), b(64, -3.0f), c(4096, 0.25f), d(64, 7.0f);
    EXPECT_EQ(small.run(exec, a), affine_of(a));
    EXPECT_EQ(small.run(exec, b), affine_of(b)); // kept allocation, new input
    EXPECT_EQ(large.run(exec, c), affine_of(c)); // another graph: the buffers are reallocated (and grow)
    EXPECT_EQ(small.run(exec, d), affine_of(d)); // back: allocated anew, not at its stale addresses
    EXPECT_EQ(small.run(exec, a), affine_of(a));
}
