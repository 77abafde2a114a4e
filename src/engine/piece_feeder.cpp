#include "engine/piece_feeder.h"

#include <algorithm>

namespace transcribe {

void PieceFeeder::add(Recording & r) {
    r.results.resize(r.plan.n_pieces);
    waiting_.push_back(&r);
    finish(r); // a recording of no pieces completes now
}

bool PieceFeeder::can_give() const {
    return std::any_of(waiting_.begin(), waiting_.end(), [](const Recording * r) { return r->can_give(); });
}

bool PieceFeeder::next(BatchJob & job) {
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [](const Recording * r) { return r->can_give(); });
    if (it == waiting_.end()) {
        return false;
    }
    Recording & r = **it;
    Piece & piece = running_[next_id_++];
    piece.recording = &r;
    piece.index     = r.given++;
    ++r.running;
    const auto [x, n] = r.plan.audio_of(piece.index, piece.storage);
    job.pcm       = x;
    job.n_samples = n;
    job.options   = r.options;
    // Each piece its share of the recording's progress bar.
    const float share = r.options.progress_scale / float(r.plan.n_pieces);
    job.options.progress_offset = r.options.progress_offset + share * float(piece.index);
    job.options.progress_scale  = share;
    if (r.given == r.plan.n_pieces) {
        waiting_.erase(it);
    }
    return true;
}

void PieceFeeder::done(size_t id, Transcript * t, std::exception_ptr error) {
    auto it = running_.find(id);
    if (it == running_.end()) {
        return;
    }
    Recording & r = *it->second.recording;
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
}

void PieceFeeder::fail_running(std::exception_ptr error) {
    std::map<size_t, Piece> running;
    running.swap(running_);
    for (auto & [id, piece] : running) {
        Recording & r = *piece.recording;
        r.error = r.error ? r.error : error;
        --r.running;
        finish(r);
    }
}

// Completes R once nothing of it runs and nothing more will be given.
void PieceFeeder::finish(Recording & r) {
    if (r.finished || r.running > 0 || (!r.error && r.given < r.plan.n_pieces)) {
        return;
    }
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), &r), waiting_.end());
    if (!r.error) {
        try {
            r.out = r.plan.join(std::move(r.results));
        } catch (...) {
            r.error = std::current_exception();
        }
    }
    r.finished = true;
    if (finished_) {
        finished_(r);
    }
}

Transcript transcribe_plan(Session & session, const PiecePlan & plan, const RunOptions & options) {
    PieceFeeder feeder;
    PieceFeeder::Recording r;
    r.plan    = plan;
    r.options = options;
    feeder.add(r);
    feeder.start_batch();
    session.run_batch([&](BatchJob & job) { return feeder.next(job); },
                      [&](size_t id, Transcript * t, std::exception_ptr error) { feeder.done(id, t, error); });
    if (r.error) {
        std::rethrow_exception(r.error);
    }
    return std::move(r.out);
}

} // namespace transcribe
