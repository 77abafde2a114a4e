#include "session_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace transcribe_server {

namespace {
transcribe_session * new_session(transcribe_model * model, const transcribe_session_params & params) {
    transcribe_session * s = nullptr;
    if (transcribe_session_create(model, &params, &s) != TRANSCRIBE_OK) {
        throw std::runtime_error(std::string("cannot create a session: ") + transcribe_last_error());
    }
    return s;
}

bool stop_trampoline(void * user) { return (*static_cast<const std::function<bool()> *>(user))(); }
} // namespace

SessionPool::SessionPool(transcribe_model * model, int n_places, int max_waiting, transcribe_session_params params,
                         bool share_threads)
    : max_waiting_(max_waiting) {
    if (n_places > 1) {
        // One session decoding all places together, if the model batches.
        transcribe_session_params shared = params;
        shared.n_batch = n_places;
        transcribe_session * s = new_session(model, shared);
        if (transcribe_session_batch_size(s) >= n_places) {
            if (transcribe_batcher_create(s, &batcher_) != TRANSCRIBE_OK) {
                transcribe_session_free(s);
                throw std::runtime_error(std::string("cannot create a batcher: ") + transcribe_last_error());
            }
            sessions_.push_back(s);
        } else {
            transcribe_session_free(s);
        }
    }
    if (!batcher_ && share_threads) {
        params.n_threads = std::max(1, params.n_threads / n_places);
    }
    for (int i = 0; i < n_places; ++i) {
        if (!batcher_) {
            params.n_batch = 1;
            sessions_.push_back(new_session(model, params));
        }
        free_.push_back(i);
    }
}

SessionPool::~SessionPool() {
    transcribe_batcher_free(batcher_);
    for (transcribe_session * s : sessions_) {
        transcribe_session_free(s);
    }
}

SessionPool::Lease SessionPool::acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (free_.empty()) {
        if (waiting_ >= max_waiting_) {
            return Lease(nullptr, -1);
        }
        ++waiting_;
        cv_.wait(lock, [&] { return !free_.empty(); });
        --waiting_;
    }
    const int index = free_.back();
    free_.pop_back();
    return Lease(this, index);
}

SessionPool::Lease SessionPool::try_acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty() || waiting_ > 0) {
        return Lease(nullptr, -1);
    }
    const int index = free_.back();
    free_.pop_back();
    return Lease(this, index);
}

void SessionPool::release(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(index);
    cv_.notify_one();
}

SessionPool::Lease::~Lease() {
    if (pool_) {
        pool_->release(index_);
    }
}

transcribe_status SessionPool::Lease::run(const float * pcm, size_t n, transcribe_run_params rp,
                                          const std::function<bool()> & stop, transcribe_result ** out) const {
    rp.abort_callback  = stop_trampoline;
    rp.abort_user_data = const_cast<std::function<bool()> *>(&stop);
    return pool_->batcher_ ? transcribe_batcher_run(pool_->batcher_, pcm, n, &rp, out)
                           : transcribe_run(pool_->sessions_[size_t(index_)], pcm, n, &rp, out);
}

transcribe_status SessionPool::Lease::decode(transcribe_stream * stream, transcribe_run_params rp,
                                             const std::function<bool()> & stop) const {
    rp.abort_callback  = stop_trampoline;
    rp.abort_user_data = const_cast<std::function<bool()> *>(&stop);
    return pool_->batcher_ ? transcribe_stream_decode(stream, nullptr, pool_->batcher_, &rp)
                           : transcribe_stream_decode(stream, pool_->sessions_[size_t(index_)], nullptr, &rp);
}

} // namespace transcribe_server
