// One session shared by threads: each caller's run() blocks until its recording is transcribed, while
// the pieces of every recording in flight are decoded together in the session's decode steps, joining
// and leaving between steps (continuous batching). One thread of its own drives the session.
#pragma once

#include "model/family.h"
#include "engine/long_audio.h"
#include "engine/piece_feeder.h"

#include <condition_variable>
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
    void loop();

    Session &               session_;
    std::mutex              mutex_;
    std::condition_variable work_cv_, done_cv_;
    PieceFeeder             feeder_; // under mutex_
    bool                    stop_ = false;
    std::thread             thread_;
};

} // namespace transcribe
