// The server's sessions on its one loaded model, handed to requests one at a time, with a bounded
// number of requests allowed to wait for one. Where the model decodes several recordings together
// (an LLM decoder), the N places share one session through a batcher: concurrent requests are decoded
// in the same steps. Otherwise each place is a session of its own.
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
    // N_PLACES requests at once; MAX_WAITING more may wait for a place. PARAMS.n_threads serve the shared
    // session; with a session a place, each gets its share of them where SHARE_THREADS.
    SessionPool(transcribe_model * model, int n_places, int max_waiting, transcribe_session_params params,
                bool share_threads = false);
    ~SessionPool();
    bool batched() const { return batcher_ != nullptr; }

    class Lease {
    public:
        Lease(SessionPool * pool, int index) : pool_(pool), index_(index) {}
        Lease(Lease && o) noexcept : pool_(o.pool_), index_(o.index_) { o.pool_ = nullptr; }
        Lease(const Lease &) = delete;
        ~Lease();
        explicit operator bool() const { return pool_ != nullptr; }
        // transcribe_run on this place (its session, or the shared batcher); STOP, polled during the run,
        // ends it with TRANSCRIBE_ERR_ABORTED. RP's abort callback is taken for it.
        transcribe_status run(const float * pcm, size_t n, transcribe_run_params rp, const std::function<bool()> & stop,
                              transcribe_result ** out) const;
        // transcribe_stream_decode on this place, STOP as for run().
        transcribe_status decode(transcribe_stream * stream, transcribe_run_params rp, const std::function<bool()> & stop) const;

    private:
        SessionPool * pool_;
        int           index_;
    };

    // Waits for a free place; an empty lease when max_waiting requests are already waiting.
    Lease acquire();
    // A place free now that no one is waiting for; else an empty lease (work that can be skipped).
    Lease try_acquire();

private:
    void release(int index);

    std::vector<transcribe_session *> sessions_; // one a place, or the one shared
    transcribe_batcher *              batcher_ = nullptr;
    std::vector<int>                  free_;
    int                               waiting_ = 0, max_waiting_;
    std::mutex                        mutex_;
    std::condition_variable           cv_;
};

} // namespace transcribe_server
