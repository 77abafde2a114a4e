#include "engine/live_stream.h"

#include "core/audio.h"
#include "core/error.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace transcribe {

namespace {

std::vector<std::string> words_of(const std::string & text) {
    std::vector<std::string> words;
    std::istringstream in(text);
    for (std::string w; in >> w;) {
        words.push_back(w);
    }
    return words;
}

} // namespace

void LiveTurns::check_rate(int sample_rate) {
    if (sample_rate < kMinSampleRate || sample_rate > kMaxSampleRate) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "live stream: sample rate %d Hz is outside %d..%d", sample_rate, kMinSampleRate,
             kMaxSampleRate);
    }
}

bool LiveTurns::check_samples(const float * pcm, size_t n) {
    if (n == 0) {
        return false;
    }
    if (!pcm) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "live stream: null samples");
    }
    audio_check_finite(pcm, n, "live stream");
    return true;
}

LiveStream::LiveStream(const LiveStreamOptions & options, std::unique_ptr<SpeechDetector> vad)
    : options_(options) {
    check_rate(options.sample_rate);
    if (options.partial_interval_ms < 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "live stream: partial interval %d ms is negative", options.partial_interval_ms);
    }
    if (options.detect_turns) {
        if (!vad) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "live stream: turn detection needs a voice-activity detector");
        }
        turns_ = std::make_unique<VadTurnEdges>(std::move(vad), options.turns, options.sample_rate);
    }
}

LiveStream::~LiveStream() = default;

void LiveStream::push(const float * pcm, size_t n) {
    if (!check_samples(pcm, n)) {
        return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    buffer_.insert(buffer_.end(), pcm, pcm + n);
    pushed_ += int64_t(n);
    if (turns_) {
        edges_.clear();
        turns_->push(pcm, n, edges_);
        for (const TurnEdge & e : edges_) {
            on_edge(e);
        }
    }
    trim();
}

void LiveStream::on_edge(const TurnEdge & edge) {
    const int64_t at = std::clamp<int64_t>(edge.sample, floor_, pushed_);
    if (edge.started) {
        open_        = true;
        open_item_   = next_item_++;
        open_start_  = std::max(at, buffer_origin_);
        partial_at_  = 0;
        partial_gap_ = int64_t(options_.partial_interval_ms) * options_.sample_rate / 1000;
        last_hearing_.clear();
        sent_words_.clear();
        events_.push_back({LiveEventKind::SpeechStarted, open_item_, to_ms(open_start_), 0, {}});
    } else if (open_) {
        events_.push_back({LiveEventKind::SpeechStopped, open_item_, to_ms(open_start_), to_ms(at), {}});
        end_turn(at);
    }
}

void LiveStream::end_turn(int64_t end) {
    EndedTurn t {open_item_, to_ms(open_start_), to_ms(end), {}};
    t.pcm.assign(buffer_.begin() + long(open_start_ - buffer_origin_), buffer_.begin() + long(end - buffer_origin_));
    events_.push_back({LiveEventKind::Committed, t.item, t.start_ms, t.end_ms, {}});
    ended_.push_back(std::move(t));
    open_  = false;
    floor_ = end;
}

void LiveStream::commit() {
    std::lock_guard<std::mutex> lock(mutex_);
    // Between turns the detector's stream keeps only what a turn could reach back to (trim()).
    const int64_t start = open_ ? open_start_ : std::max(floor_, buffer_origin_);
    if ((pushed_ - start) * 10 < options_.sample_rate) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "buffer too small: %lld ms of audio since the last turn, at least 100 ms needed",
             (long long) to_ms(pushed_ - start));
    }
    if (!open_) {
        open_item_  = next_item_++;
        open_start_ = start;
    }
    end_turn(pushed_);
    if (turns_) {
        turns_->restart();
    }
    trim();
}

void LiveStream::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_  = false;
    floor_ = pushed_;
    if (turns_) {
        turns_->restart();
    }
    trim();
}

// Keeps the open turn's audio; without turn detection everything since the last commit; between
// detected turns what a turn starting now could reach back to (its prefix padding, the VAD's chunk
// still waiting and the resampler's delay, within a second).
void LiveStream::trim() {
    const int64_t reach = int64_t(options_.turns.prefix_padding_ms) * options_.sample_rate / 1000 + options_.sample_rate;
    const int64_t keep  = open_ ? open_start_ : turns_ ? std::max(floor_, pushed_ - reach) : floor_;
    const int64_t dead  = keep - buffer_origin_;
    if (dead > 0 && size_t(dead) * 2 >= buffer_.size()) {
        buffer_.erase(buffer_.begin(), buffer_.begin() + long(dead));
        buffer_origin_ = keep;
    }
}

bool LiveStream::decode_due() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return due_locked();
}

size_t LiveStream::turns_waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ended_.size();
}

bool LiveStream::due_locked() const {
    return !ended_.empty() ||
           (open_ && options_.partial_interval_ms > 0 && (pushed_ - open_start_) - partial_at_ >= partial_gap_);
}

void LiveStream::decode(const TurnTranscriber & transcribe) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!ended_.empty()) {
        EndedTurn t = std::move(ended_.front());
        ended_.pop_front();
        lock.unlock();
        std::string text;
        try {
            text = transcribe(t.pcm.data(), t.pcm.size());
        } catch (...) {
            lock.lock();
            ended_.push_front(std::move(t)); // still to finish
            throw;
        }
        lock.lock();
        events_.push_back({LiveEventKind::Completed, t.item, t.start_ms, t.end_ms, std::move(text)});
    }
    if (due_locked()) {
        partial(lock, transcribe);
    }
}

// The open turn so far, heard outside the lock (pushes go on meanwhile).
void LiveStream::partial(std::unique_lock<std::mutex> & lock, const TurnTranscriber & transcribe) {
    const int64_t n = pushed_ - open_start_, item = open_item_;
    const std::vector<float> turn(buffer_.begin() + long(open_start_ - buffer_origin_), buffer_.begin() + long(pushed_ - buffer_origin_));
    lock.unlock();
    const auto begin = std::chrono::steady_clock::now();
    const std::vector<std::string> hearing = words_of(transcribe(turn.data(), turn.size()));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    lock.lock();
    if (!open_ || open_item_ != item) {
        return; // the turn ended (or was cleared) while it was heard: its completion says it all
    }
    // Slow transcribing backs the cadence off: at most half the audio's time goes to partials.
    partial_at_  = n;
    partial_gap_ = std::max(int64_t(options_.partial_interval_ms) * options_.sample_rate / 1000,
                            int64_t(2.0 * seconds * options_.sample_rate));

    size_t agreed = 0;
    while (agreed < hearing.size() && agreed < last_hearing_.size() && hearing[agreed] == last_hearing_[agreed]) {
        ++agreed;
    }
    last_hearing_ = hearing;
    // Words already sent stay; more go out only where this hearing still begins with them.
    if (agreed <= sent_words_.size() || !std::equal(sent_words_.begin(), sent_words_.end(), hearing.begin())) {
        return;
    }
    std::string delta;
    for (size_t i = sent_words_.size(); i < agreed; ++i) {
        delta += (i > 0 ? " " : "") + hearing[i];
        sent_words_.push_back(hearing[i]);
    }
    events_.push_back({LiveEventKind::Delta, open_item_, to_ms(open_start_), to_ms(open_start_ + n), std::move(delta)});
}

bool LiveStream::next_event(LiveEvent & out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (events_.empty()) {
        return false;
    }
    out = std::move(events_.front());
    events_.pop_front();
    return true;
}

} // namespace transcribe
