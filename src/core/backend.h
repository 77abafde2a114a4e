// Backend selection (CPU, CUDA, Vulkan, Metal through ggml's registry) and a per-session scheduler
// that runs graphs built once per shape.
#pragma once

#include "transcribe.h"

#include "op_profile.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace transcribe {

// The device the weights go to; BACKEND naming what was asked for when it is not available.
ggml_backend_dev_t select_device(transcribe_backend backend, int device_index);
const char * backend_name(transcribe_backend backend);

// A graph plus the context holding its tensor metadata; inputs are found by name.
class Graph {
public:
    // LABEL names the stage in profiles (see op_profile.h).
    explicit Graph(size_t max_nodes, std::string label = "graph");
    ~Graph();
    Graph(const Graph &) = delete;
    Graph & operator=(const Graph &) = delete;

    ggml_context * ctx() const { return ctx_; }
    ggml_cgraph *  graph() const { return gf_; }
    ggml_tensor *  input(const char * name, ggml_type type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1);
    ggml_tensor *  get(const char * name) const; // an input or an output marked with output()
    ggml_tensor *  find(const char * name) const; // the same, or nullptr where the graph has none
    // Keeps RESOURCE alive as long as the graph: memory outside the scheduler that its tensors view.
    void           keep(std::shared_ptr<const void> resource) { kept_.push_back(std::move(resource)); }
    void           output(ggml_tensor * t, const char * name);
    void           expand(ggml_tensor * t) { ggml_build_forward_expand(gf_, t); }
    const std::string & label() const { return label_; }
    // Distinct for every graph made in the process (an address can be reused by a later graph).
    uint64_t id() const { return id_; }

private:
    uint64_t       id_;
    ggml_context * ctx_ = nullptr;
    ggml_cgraph *  gf_  = nullptr;
    std::map<std::string, ggml_tensor *> named_;
    std::string    label_;
    std::vector<std::shared_ptr<const void>> kept_;
};

// Backend instances for one session (the model's device plus the CPU for ops it lacks) and the
// scheduler that splits and allocates graphs across them.
class Executor {
public:
    Executor(ggml_backend_dev_t device, int n_threads);
    ~Executor();
    Executor(const Executor &) = delete;
    Executor & operator=(const Executor &) = delete;

    // Allocates the graph's intermediates (reusing the scheduler's buffers) and runs it. A graph run
    // again with no other graph allocated in between keeps its allocation: a decode step's graph of a
    // few small ops cost more to split and allocate than to compute.
    void compute(Graph & g);
    // Inputs must be set after allocation: compute() calls set_inputs between the two.
    template <typename F> void compute(Graph & g, F && set_inputs) {
        allocate(g);
        set_inputs();
        run(g);
    }
    ggml_backend_dev_t device() const { return device_; }
    int n_threads() const { return n_threads_; }
    ggml_backend_buffer_type_t buffer_type() const { return ggml_backend_dev_buffer_type(device_); }

private:
    void init(int n_threads);
    void release();
    void abandon();
    void allocate(Graph & g);
    void run(Graph & g);

    ggml_backend_dev_t           device_;
    int                          n_threads_;
    std::vector<ggml_backend_t>  backends_;
    ggml_backend_sched_t         sched_ = nullptr;
    uint64_t                     allocated_ = 0; // the id of the graph the scheduler's buffers hold, or 0
    std::unique_ptr<OpProfile>   profile_ = OpProfile::from_env();
};

void tensor_set(ggml_tensor * t, const void * data, size_t bytes);
template <typename T> void tensor_set(ggml_tensor * t, const std::vector<T> & v) { tensor_set(t, v.data(), v.size() * sizeof(T)); }
std::vector<float> tensor_get_f32(const ggml_tensor * t);
// Into OUT, resized: a caller stepping a graph many times reuses the same buffer.
void tensor_get_f32(const ggml_tensor * t, std::vector<float> & out);

} // namespace transcribe
