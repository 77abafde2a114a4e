#include "batcher.h"

#include "error.h"

#include <algorithm>

namespace transcribe {

Batcher::Batcher(Session & session) : session_(session), thread_([this] { loop(); }) {}

Batcher::~Batcher() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
}

Transcript Batcher::run(Recording recording) {
    Request r;
    r.results.resize(recording.plan.n_pieces);
    r.recording = std::move(recording);
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "the batcher is being freed");
    }
    if (r.recording.plan.n_pieces == 0) {
        r.out = r.recording.plan.join({});
        return std::move(r.out);
    }
    waiting_.push_back(&r);
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
            work_cv_.wait(lock, [&] {
                return (stop_ && waiting_.empty()) ||
                       std::any_of(waiting_.begin(), waiting_.end(), [](const Request * r) { return r->can_give(); });
            });
            if (stop_ && waiting_.empty()) {
                return;
            }
            next_id_ = 0;
        }
        // The callbacks run on this thread, inside run_batch: they take the lock themselves, so that
        // callers may add requests while the session computes.
        try {
            session_.run_batch(
                [this](BatchJob & job) {
                    std::lock_guard<std::mutex> lock(mutex_);
                    return next_piece(job);
                },
                [this](size_t id, Transcript * t, std::exception_ptr error) {
                    std::lock_guard<std::mutex> lock(mutex_);
                    piece_done(id, t, error);
                });
        } catch (...) {
            // The batch itself failed (the session's abort, an allocation): every recording it held fails.
            const std::exception_ptr error = std::current_exception();
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto & [id, piece] : running_) {
                Request & r = *piece.request;
                r.error = r.error ? r.error : error;
                --r.running;
                finish(r);
            }
            running_.clear();
        }
    }
}

bool Batcher::next_piece(BatchJob & job) {
    // The oldest request that can give a piece: recordings are served in arrival order, a long one's
    // pieces filling what the others leave free.
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [](const Request * r) { return r->can_give(); });
    if (it == waiting_.end()) {
        return false;
    }
    Request & r = **it;
    Piece & piece = running_[next_id_++];
    piece.request = &r;
    piece.index   = r.given++;
    ++r.running;
    const auto [x, n] = r.recording.plan.audio_of(piece.index, piece.storage);
    job.pcm       = x;
    job.n_samples = n;
    job.options   = r.recording.options;
    if (r.given == r.recording.plan.n_pieces) {
        waiting_.erase(it);
    }
    return true;
}

void Batcher::piece_done(size_t id, Transcript * t, std::exception_ptr error) {
    auto it = running_.find(id);
    if (it == running_.end()) {
        return;
    }
    Request & r = *it->second.request;
    const size_t index = it->second.index;
    running_.erase(it);
    --r.running;
    if (error && !r.error) {
        r.error = error;
    }
    if (t) {
        r.results[index] = std::move(*t);
    }
    finish(r);
    work_cv_.notify_all();
}

// Completes R once nothing of it runs and nothing more will be given.
void Batcher::finish(Request & r) {
    if (r.finished || r.running > 0 || (!r.error && r.given < r.recording.plan.n_pieces)) {
        return;
    }
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), &r), waiting_.end());
    if (!r.error) {
        try {
            r.out = r.recording.plan.join(std::move(r.results));
        } catch (...) {
            r.error = std::current_exception();
        }
    }
    r.finished = true;
    done_cv_.notify_all();
}

} // namespace transcribe
