#include "session_pool.h"

#include <stdexcept>
#include <string>

namespace transcribe_server {

SessionPool::SessionPool(transcribe_model * model, int n_sessions, int max_waiting, transcribe_session_params params)
    : max_waiting_(max_waiting) {
    for (int i = 0; i < n_sessions; ++i) {
        auto slot = std::make_unique<Slot>();
        params.abort_callback  = abort_trampoline;
        params.abort_user_data = slot.get();
        if (transcribe_session_create(model, &params, &slot->session) != TRANSCRIBE_OK) {
            throw std::runtime_error(std::string("cannot create a session: ") + transcribe_last_error());
        }
        slots_.push_back(std::move(slot));
        free_.push_back(i);
    }
}

SessionPool::~SessionPool() {
    for (auto & s : slots_) {
        transcribe_session_free(s->session);
    }
}

bool SessionPool::abort_trampoline(void * user) {
    Slot * slot = static_cast<Slot *>(user);
    std::lock_guard<std::mutex> lock(slot->abort_mutex);
    return slot->abort_check && slot->abort_check();
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

void SessionPool::release(int index) {
    {
        Slot & s = *slots_[size_t(index)];
        std::lock_guard<std::mutex> abort_lock(s.abort_mutex);
        s.abort_check = nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(index);
    cv_.notify_one();
}

SessionPool::Lease::~Lease() {
    if (pool_) {
        pool_->release(index_);
    }
}

transcribe_session * SessionPool::Lease::session() const { return pool_->slots_[size_t(index_)]->session; }

void SessionPool::Lease::set_abort_check(std::function<bool()> check) {
    Slot & s = *pool_->slots_[size_t(index_)];
    std::lock_guard<std::mutex> lock(s.abort_mutex);
    s.abort_check = std::move(check);
}

} // namespace transcribe_server
