// What every family's session shares: the options, an executor on the model's device, the caller's
// abort and progress callbacks, a bounded cache of graphs built once per shape, and stage timing.
#pragma once

#include "core/backend.h"
#include "core/error.h"
#include "model/family.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>

namespace transcribe {

class SessionBase : public Session {
protected:
    SessionBase(ggml_backend_dev_t device, const SessionOptions & options)
        : opt_(options), exec_(device, options.n_threads) {}

    // ABORTED naming the stage when the caller's abort callback says so.
    void check_abort(const char * stage) const {
        if (opt_.abort_callback && opt_.abort_callback(opt_.abort_user_data)) {
            fail(TRANSCRIBE_ERR_ABORTED, "run aborted by the caller (%s)", stage);
        }
    }
    // ABORTED naming the stage when this run's own cancel check says so (a batch goes on without it).
    static void check_cancelled(const RunOptions & o, const char * stage) {
        if (o.cancelled && o.cancelled()) {
            fail(TRANSCRIBE_ERR_ABORTED, "run cancelled by the caller (%s)", stage);
        }
    }
    // INPUT_TOO_LONG when the audio is longer than the model takes in one run.
    void check_audio_length(size_t n_samples, const ModelInfo & info) const {
        const double audio_ms = 1000.0 * double(n_samples) / info.sample_rate;
        if (audio_ms > info.max_audio_ms) {
            fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "audio of %.1f s exceeds the model's %.1f s per run", audio_ms / 1000.0,
                 info.max_audio_ms / 1000.0);
        }
    }
    // f in [0, 1] of this run, mapped into the caller's share of the progress bar.
    void progress(const RunOptions & o, float f) const {
        if (opt_.progress_callback) {
            opt_.progress_callback(o.progress_offset + o.progress_scale * f, opt_.progress_user_data);
        }
    }

    SessionOptions opt_;
    Executor       exec_;
};

// Graphs keyed by shape, built on first use and reused; bounded so that a stream of odd lengths does
// not keep every graph alive.
class GraphCache {
public:
    explicit GraphCache(size_t capacity = 8) : capacity_(capacity) {}
    Graph & get(int64_t key, const std::function<std::unique_ptr<Graph>()> & build) {
        auto it = graphs_.find(key);
        if (it != graphs_.end()) {
            return *it->second;
        }
        if (graphs_.size() >= capacity_) {
            graphs_.clear();
        }
        return *(graphs_[key] = build());
    }

private:
    size_t capacity_;
    std::map<int64_t, std::unique_ptr<Graph>> graphs_;
};

class StageTimer {
public:
    double ms() const { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }

private:
    std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

} // namespace transcribe
