// Where a graph spends its time, op by op: set TRANSCRIBE_PROFILE=1 (table on stderr) or
// TRANSCRIBE_PROFILE=FILE (appended to FILE) and every session prints, when it ends, the time of each
// ggml op per stage (encoder, prefill, decode), with the matmuls split by weight type and their
// GFLOP/s. The scheduler then runs the graph a node at a time, which also stops ggml from fusing
// neighbouring ops: the stage totals come out a few percent above an unprofiled run.
#pragma once

#include "ggml-backend.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace transcribe {

class OpProfile {
public:
    // Null unless TRANSCRIBE_PROFILE is set.
    static std::unique_ptr<OpProfile> from_env();
    explicit OpProfile(std::string destination) : destination_(std::move(destination)) {}
    ~OpProfile();
    OpProfile(const OpProfile &) = delete;
    OpProfile & operator=(const OpProfile &) = delete;

    void attach(ggml_backend_sched_t sched) { ggml_backend_sched_set_eval_callback(sched, &OpProfile::observe, this); }
    void begin(const std::string & stage) { stage_ = stage; }
    std::string report() const;

private:
    using clock = std::chrono::steady_clock;
    struct Entry {
        double ms    = 0;
        double flops = 0;
        long   calls = 0;
    };
    static bool observe(ggml_tensor * t, bool ask, void * self);

    std::string destination_;
    std::string stage_ = "graph";
    std::map<std::string, std::map<std::string, Entry>> stages_;
    clock::time_point start_;
    bool running_ = false;
};

} // namespace transcribe
