// N sessions over one loaded model (weights shared), handed to requests one at a time, with a bounded
// number of requests allowed to wait for one.
#pragma once

#include "transcribe.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace transcribe_server {

class SessionPool {
public:
    SessionPool(transcribe_model * model, int n_sessions, int max_waiting, transcribe_session_params params);
    ~SessionPool();

    class Lease {
    public:
        Lease(SessionPool * pool, int index) : pool_(pool), index_(index) {}
        Lease(Lease && o) noexcept : pool_(o.pool_), index_(o.index_) { o.pool_ = nullptr; }
        Lease(const Lease &) = delete;
        ~Lease();
        explicit operator bool() const { return pool_ != nullptr; }
        transcribe_session * session() const;
        // Polled by the session's abort callback while this lease holds it.
        void set_abort_check(std::function<bool()> check);

    private:
        SessionPool * pool_;
        int           index_;
    };

    // Waits for a free session; an empty lease when max_waiting requests are already waiting.
    Lease acquire();

private:
    struct Slot {
        transcribe_session *  session = nullptr;
        std::function<bool()> abort_check;
        std::mutex            abort_mutex;
    };
    static bool abort_trampoline(void * user);
    void release(int index);

    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<int>                   free_;
    int                                waiting_ = 0, max_waiting_;
    std::mutex                         mutex_;
    std::condition_variable            cv_;
};

} // namespace transcribe_server
