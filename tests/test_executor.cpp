// The executor keeps a graph's allocation while that graph runs again with nothing else allocated in
// between, and allocates anew after another graph: each run must see its own new inputs either way.
#include "core/backend.h"
#include "core/system_memory.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
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

namespace {

// The AnonHugePages of the mapping of this process holding ADDR, in kB; -1 when not found.
long huge_kb_at(const void * addr) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) { // a mapping's first line
            inside = uintptr_t(addr) >= lo && uintptr_t(addr) < hi;
        } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
            return std::stol(line.substr(14));
        }
    }
    return -1;
}

long vmstat(const char * key) {
    std::ifstream in("/proc/vmstat");
    std::string k;
    long v = 0;
    while (in >> k >> v) {
        if (k == key) {
            return v;
        }
    }
    return -1;
}

std::string thp_mode() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(in, s);
    return s;
}

} // namespace

// The first run of a graph touches its compute buffer's pages first; on virtual machines each 4 KiB
// first touch is a costly trap, so the executor asks for huge pages before that run.
TEST(Executor, A_large_compute_buffer_is_backed_by_huge_pages) {
    const std::string mode = thp_mode();
    if (mode.empty() || mode.find("[never]") != std::string::npos) {
        GTEST_SKIP() << "no transparent huge pages here (" << mode << ")";
    }
    Executor exec(select_device(TRANSCRIBE_BACKEND_CPU, 0), 2);
    const int64_t n = int64_t(16) << 20; // 64 MiB in and 64 MiB out
    Affine big(n);
    const long fallbacks = vmstat("thp_fault_fallback");
    const std::vector<float> in(size_t(n), 0.5f);
    EXPECT_EQ(big.run(exec, in)[size_t(n) - 1], 2.0f);
    // The advice covers the buffer's 2 MiB-aligned interior (a mapping of its own): ask about its middle.
    const long huge = huge_kb_at(static_cast<const char *>(big.y->data) + ggml_nbytes(big.y) / 2);
    if (huge == 0 && vmstat("thp_fault_fallback") > fallbacks) {
        GTEST_SKIP() << "the kernel had no huge pages to give (thp_fault_fallback grew)";
    }
    EXPECT_GT(huge, 0) << "THP mode: " << mode;
}

TEST(SystemMemory, Advising_ranges_smaller_than_a_huge_page_or_unaligned_is_harmless) {
    advise_huge_pages(nullptr, 0);
    std::vector<char> small(4096, 1);
    advise_huge_pages(small.data() + 1, small.size() - 1);
    std::vector<float> v;
    reserve_huge(v, size_t(3) << 20);
    EXPECT_GE(v.capacity(), size_t(3) << 20);
    v.assign(size_t(3) << 20, 1.0f);
    EXPECT_EQ(v.back(), 1.0f);
}
