#include "backend.h"

#include <algorithm>
#include <atomic>

#include "error.h"
#include "log.h"
#include "system_memory.h"

#include "ggml-cpu.h"

#include <cstring>
#include <new>

namespace transcribe {

const char * backend_name(transcribe_backend backend) {
    switch (backend) {
        case TRANSCRIBE_BACKEND_AUTO:   return "auto";
        case TRANSCRIBE_BACKEND_CPU:    return "CPU";
        case TRANSCRIBE_BACKEND_CUDA:   return "CUDA";
        case TRANSCRIBE_BACKEND_VULKAN: return "Vulkan";
        case TRANSCRIBE_BACKEND_METAL:  return "Metal";
    }
    return "?";
}

ggml_backend_dev_t select_device(transcribe_backend backend, int device_index) {
    if (backend == TRANSCRIBE_BACKEND_CPU) {
        return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    }
    if (backend == TRANSCRIBE_BACKEND_AUTO) {
        int seen = 0;
        for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
            ggml_backend_dev_t dev = ggml_backend_dev_get(i);
            if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU && seen++ == device_index) {
                return dev;
            }
        }
        return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    }
    ggml_backend_reg_t reg = ggml_backend_reg_by_name(backend_name(backend));
    if (!reg) {
        fail(TRANSCRIBE_ERR_BACKEND, "backend %s is not available in this build", backend_name(backend));
    }
    if (device_index < 0 || size_t(device_index) >= ggml_backend_reg_dev_count(reg)) {
        fail(TRANSCRIBE_ERR_BACKEND, "backend %s has no device %d (%zu found)", backend_name(backend), device_index,
             ggml_backend_reg_dev_count(reg));
    }
    return ggml_backend_reg_dev_get(reg, size_t(device_index));
}

Graph::Graph(size_t max_nodes, std::string label) : label_(std::move(label)) {
    static std::atomic<uint64_t> made {0};
    id_ = ++made;
    ggml_init_params params = {
        /*mem_size   =*/ggml_tensor_overhead() * max_nodes * 2 + ggml_graph_overhead_custom(max_nodes, false),
        /*mem_buffer =*/nullptr,
        /*no_alloc   =*/true,
    };
    ctx_ = ggml_init(params);
    if (!ctx_) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate a graph context");
    }
    gf_ = ggml_new_graph_custom(ctx_, max_nodes, false);
}

Graph::~Graph() { ggml_free(ctx_); }

ggml_tensor * Graph::input(const char * name, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    ggml_tensor * t = ggml_new_tensor_3d(ctx_, type, ne0, ne1, ne2);
    ggml_set_name(t, name);
    ggml_set_input(t);
    named_[name] = t;
    return t;
}

void Graph::output(ggml_tensor * t, const char * name) {
    ggml_set_output(t);
    ggml_build_forward_expand(gf_, t);
    named_[name] = t;
}

ggml_tensor * Graph::find(const char * name) const {
    auto it = named_.find(name);
    return it == named_.end() ? nullptr : it->second;
}

ggml_tensor * Graph::get(const char * name) const {
    auto it = named_.find(name);
    if (it == named_.end()) {
        fail(TRANSCRIBE_ERR_INTERNAL, "graph has no tensor %s", name);
    }
    return it->second;
}

Executor::Executor(ggml_backend_dev_t device, int n_threads) : device_(device), n_threads_(n_threads) {
    try {
        init(n_threads);
    } catch (...) {
        release(); // a throwing constructor runs no destructor: free what was made
        throw;
    }
}

void Executor::init(int n_threads) {
    ggml_backend_t primary = ggml_backend_dev_init(device_, nullptr);
    if (!primary) {
        fail(TRANSCRIBE_ERR_BACKEND, "cannot initialise backend device %s", ggml_backend_dev_name(device_));
    }
    backends_.push_back(primary);
    if (ggml_backend_dev_type(device_) != GGML_BACKEND_DEVICE_TYPE_CPU) {
        ggml_backend_t cpu = ggml_backend_dev_init(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), nullptr);
        if (!cpu) {
            fail(TRANSCRIBE_ERR_BACKEND, "cannot initialise the CPU backend");
        }
        backends_.push_back(cpu);
    }
    for (ggml_backend_t b : backends_) {
        if (ggml_backend_is_cpu(b)) {
            ggml_backend_cpu_set_n_threads(b, n_threads);
        }
    }
    sched_ = ggml_backend_sched_new(backends_.data(), nullptr, int(backends_.size()), 16384, false, true);
    if (!sched_) {
        fail(TRANSCRIBE_ERR_BACKEND, "cannot create the graph scheduler");
    }
    if (profile_) {
        profile_->attach(sched_);
    }
}

Executor::~Executor() { release(); }

void Executor::release() {
    allocated_ = 0;
    if (sched_) {
        ggml_backend_sched_free(sched_);
        sched_ = nullptr;
    }
    for (ggml_backend_t b : backends_) {
        ggml_backend_free(b);
    }
    backends_.clear();
}

// ggml's allocator and CPU backend are C code over C++ allocations: a bad_alloc thrown under them
// leaves them holding a buffer they already freed, so they can be neither used nor freed again. They
// are abandoned (their memory is lost, as it is to a failed allocation anyway) and made anew on the
// next use, so that one failed run does not crash the session's later ones.
void Executor::abandon() {
    allocated_ = 0;
    sched_ = nullptr;
    backends_.clear();
}

namespace {

// The scheduler's host buffers that G's tensors were given, advised to use huge pages before the run
// that follows touches them first (a buffer grown for a longer input is all new pages).
void advise_huge_compute_buffers(const Graph & g) {
    std::vector<ggml_backend_buffer_t> seen;
    for (ggml_tensor * t = ggml_get_first_tensor(g.ctx()); t; t = ggml_get_next_tensor(g.ctx(), t)) {
        ggml_backend_buffer_t b = t->buffer;
        if (b && ggml_backend_buffer_is_host(b) && std::find(seen.begin(), seen.end(), b) == seen.end()) {
            seen.push_back(b);
            advise_huge_pages(ggml_backend_buffer_get_base(b), ggml_backend_buffer_get_size(b));
        }
    }
}

} // namespace

void Executor::allocate(Graph & g) {
    if (sched_ && allocated_ == g.id()) {
        return;
    }
    allocated_ = 0;
    // A reused graph still carries the addresses of its previous allocation, which the allocator would
    // take as valid (and which dangle once its buffers grew for another graph): forget them.
    for (ggml_tensor * t = ggml_get_first_tensor(g.ctx()); t; t = ggml_get_next_tensor(g.ctx(), t)) {
        t->data   = nullptr;
        t->buffer = nullptr;
    }
    if (!sched_) {
        release(); // whatever a failed init left
        init(n_threads_);
    }
    bool ok = false;
    try {
        ggml_backend_sched_reset(sched_);
        ok = ggml_backend_sched_alloc_graph(sched_, g.graph());
    } catch (const std::bad_alloc &) {
        abandon();
    }
    if (!ok) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate compute buffers for a graph of %d nodes", ggml_graph_n_nodes(g.graph()));
    }
    advise_huge_compute_buffers(g);
    allocated_ = g.id();
}

void Executor::run(Graph & g) {
    ggml_status st = GGML_STATUS_ALLOC_FAILED;
    if (profile_) {
        profile_->begin(g.label());
    }
    try {
        st = ggml_backend_sched_graph_compute(sched_, g.graph());
    } catch (const std::bad_alloc &) {
        abandon();
    }
    if (st != GGML_STATUS_SUCCESS) {
        allocated_ = 0; // allocated anew next time, whatever the failure left
        fail(st == GGML_STATUS_ALLOC_FAILED ? TRANSCRIBE_ERR_OOM : TRANSCRIBE_ERR_BACKEND, "graph compute failed (%s)",
             ggml_status_to_string(st));
    }
}

void Executor::compute(Graph & g) {
    allocate(g);
    run(g);
}

void tensor_set(ggml_tensor * t, const void * data, size_t bytes) {
    if (bytes != ggml_nbytes(t)) {
        fail(TRANSCRIBE_ERR_INTERNAL, "input %s: %zu bytes given, %zu expected", ggml_get_name(t), bytes, ggml_nbytes(t));
    }
    ggml_backend_tensor_set(t, data, 0, bytes);
}

void tensor_get_f32(const ggml_tensor * t, std::vector<float> & out) {
    if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) {
        fail(TRANSCRIBE_ERR_INTERNAL, "tensor %s is not contiguous F32", ggml_get_name(t));
    }
    out.resize(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, out.data(), 0, ggml_nbytes(t));
}

std::vector<float> tensor_get_f32(const ggml_tensor * t) {
    std::vector<float> out;
    tensor_get_f32(t, out);
    return out;
}

} // namespace transcribe
