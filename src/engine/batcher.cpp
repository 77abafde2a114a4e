#include "engine/batcher.h"

#include "core/error.h"

#include <algorithm>

namespace transcribe {

Batcher::Batcher(Session & session)
    : session_(session), feeder_([this](PieceFeeder::Recording &) { done_cv_.notify_all(); }), thread_([this] { loop(); }) {}

Batcher::~Batcher() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
}

Transcript Batcher::run(Recording recording) {
    PieceFeeder::Recording r;
    r.plan    = std::move(recording.plan);
    r.options = std::move(recording.options);
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "the batcher is being freed");
    }
    feeder_.add(r);
    work_cv_.notify_all();
    done_cv_.wait(lock, [&] { return r.finished; });
    if (r.error) {
        std::rethrow_exception(r.error);
    }
    return std::move(r.out);
}

void Batcher::loop() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_cv_.wait(lock, [&] { return (stop_ && feeder_.idle()) || feeder_.can_give(); });
            if (stop_ && feeder_.idle()) {
                return;
            }
            feeder_.start_batch();
        }
        // The callbacks run on this thread, inside run_batch: they take the lock themselves, so that
        // callers may add recordings while the session computes.
        try {
            session_.run_batch(
                [this](BatchJob & job) {
                    std::lock_guard<std::mutex> lock(mutex_);
                    return feeder_.next(job);
                },
                [this](size_t id, Transcript * t, std::exception_ptr error) {
                    std::lock_guard<std::mutex> lock(mutex_);
                    feeder_.done(id, t, error);
                    work_cv_.notify_all();
                });
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            feeder_.fail_running(std::current_exception());
        }
    }
}

} // namespace transcribe
