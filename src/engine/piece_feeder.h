// Recordings cut into pieces, fed to a session's run_batch: what a single recording's run
// (transcribe_plan) and the batcher's thread (many callers' recordings) both do. Pieces are given
// oldest recording first, a long one's filling what the others leave free; with on_token a
// recording's pieces go one at a time so that its tokens arrive in order; a recording stops being
// given pieces at its first error and completes (joined, or failed) once none of its pieces runs.
#pragma once

#include "model/family.h"
#include "engine/long_audio.h"

#include <deque>
#include <exception>
#include <functional>
#include <map>

namespace transcribe {

class PieceFeeder {
public:
    struct Recording {
        PiecePlan  plan;
        RunOptions options;
        // Filled as it runs; out (or error) once finished.
        std::vector<Transcript> results;
        size_t                  given = 0, running = 0;
        std::exception_ptr      error;
        bool                    finished = false;
        Transcript              out;
        bool can_give() const { return !error && given < plan.n_pieces && !(options.on_token && running > 0); }
    };

    // FINISHED is called with each recording as it completes.
    explicit PieceFeeder(std::function<void(Recording &)> finished = nullptr) : finished_(std::move(finished)) {}

    // R (which must outlive its run) joins the queue; one of no pieces completes at once.
    void add(Recording & r);
    bool can_give() const;
    // run_batch's two callbacks. Job ids count from 0 in each run_batch: call start_batch before one.
    void start_batch() { next_id_ = 0; }
    bool next(BatchJob & job);
    void done(size_t id, Transcript * t, std::exception_ptr error);
    // The batch itself failed (the session's abort, an allocation): every recording it held fails.
    void fail_running(std::exception_ptr error);
    bool idle() const { return waiting_.empty() && running_.empty(); }

private:
    struct Piece {
        Recording *        recording = nullptr;
        size_t             index     = 0;
        std::vector<float> storage;
    };
    void finish(Recording & r);

    std::function<void(Recording &)> finished_;
    std::deque<Recording *>          waiting_; // with pieces still to give, in arrival order
    std::map<size_t, Piece>          running_; // by the session's job id within the current run_batch
    size_t                           next_id_ = 0;
};

// One recording's pieces through the session's run_batch (a PieceFeeder of one), decoded together as far
// as it batches, and joined. The first piece to fail fails the recording.
Transcript transcribe_plan(Session & session, const PiecePlan & plan, const RunOptions & options);

} // namespace transcribe
