// One session shared by threads: each caller's run() blocks until its recording is transcribed, while
// the pieces of every recording in flight are decoded together in the session's decode steps, joining
// and leaving between steps (continuous batching). One thread of its own drives the session.
#pragma once

#include "family.h"
#include "long_audio.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace transcribe {

class Batcher {
public:
    explicit Batcher(Session & session);
    ~Batcher(); // after the runs in flight; no run may start once it is called
    Batcher(const Batcher &) = delete;
    Batcher & operator=(const Batcher &) = delete;

    // A recording's pieces (plan.audio_of and plan.join run on the batcher's thread, as does
    // options.on_token: with it the pieces go one at a time, so tokens arrive in order).
    struct Recording {
        PiecePlan  plan;
        RunOptions options;
    };
    // Throws the first error of its pieces (ABORTED alone where options.cancelled said so).
    Transcript run(Recording recording);

private:
    struct Request {
        Recording               recording;
        std::vector<Transcript> results;
        size_t                  given = 0, running = 0;
        std::exception_ptr      error;
        bool                    finished = false;
        Transcript              out;
        bool can_give() const {
            return !error && given < recording.plan.n_pieces && !(recording.options.on_token && running > 0);
        }
    };
    struct Piece {
        Request *          request = nullptr;
        size_t             index   = 0;
        std::vector<float> storage;
    };
    void loop();
    bool next_piece(BatchJob & job);                                      // under mutex_
    void piece_done(size_t id, Transcript * t, std::exception_ptr error); // under mutex_
    void finish(Request & r);                                             // under mutex_

    Session &               session_;
    std::mutex              mutex_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<Request *>   waiting_; // requests with pieces still to give, in arrival order
    std::map<size_t, Piece> running_; // by the session's job id within the current run_batch
    size_t                  next_id_ = 0;
    bool                    stop_    = false;
    std::thread             thread_;
};

} // namespace transcribe
