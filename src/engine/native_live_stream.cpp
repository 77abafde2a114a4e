#include "engine/native_live_stream.h"

#include "core/audio.h"
#include "core/error.h"

#include <algorithm>

namespace transcribe {

NativeLiveStream::NativeLiveStream(const NativeLiveOptions & options, NativeLiveModel model,
                                   std::unique_ptr<SpeechDetector> vad)
    : options_(options), model_(std::move(model)) {
    check_rate(options.sample_rate);
    if (!model_.open || !model_.detokenize) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "live stream: the model does not transcribe as it hears");
    }
    if (options.turns == NativeTurns::EndOfTurnToken && model_.end_of_turn < 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG,
             "live stream: turns at the end of an utterance need a model that says where one ends "
             "(an end-of-utterance model); use the voice-activity detector or commits");
    }
    if (options.turns == NativeTurns::Vad) {
        if (!vad) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "live stream: turn detection needs a voice-activity detector");
        }
        vad_ = std::make_unique<VadTurnEdges>(std::move(vad), options.vad, model_.sample_rate);
    } else {
        open_segment(0);
    }
    if (options.sample_rate != model_.sample_rate) {
        to_model_rate_ = std::make_unique<StreamResampler>(options.sample_rate, model_.sample_rate, resampled_);
    }
}

NativeLiveStream::~NativeLiveStream() = default;

void NativeLiveStream::push(const float * pcm, size_t n) {
    if (!check_samples(pcm, n)) {
        return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (to_model_rate_) {
        resampled_.clear();
        to_model_rate_->push(pcm, n);
        append(resampled_.data(), resampled_.size());
    } else {
        append(pcm, n);
    }
    trim();
}

// Samples at the model's rate join the buffer; the detector's edges in them become events.
void NativeLiveStream::append(const float * pcm, size_t n) {
    buffer_.insert(buffer_.end(), pcm, pcm + n);
    if (vad_ && n > 0) {
        edges_.clear();
        vad_->push(pcm, n, edges_);
        for (const TurnEdge & e : edges_) {
            on_edge(e);
        }
    }
}

void NativeLiveStream::on_edge(const TurnEdge & edge) {
    const int64_t at = std::clamp<int64_t>(edge.sample, std::max(floor_, buffer_origin_), pushed());
    const bool    open = !segments_.empty() && segments_.back().end < 0;
    if (edge.started && !open) {
        open_segment(at);
        open_item(segments_.back(), to_ms(at), true);
    } else if (!edge.started && open) {
        const Segment & seg = segments_.back();
        events_.push_back({LiveEventKind::SpeechStopped, seg.item, seg.item_start_ms, to_ms(at), {}});
        end_segment(at, false);
    }
}

void NativeLiveStream::open_segment(int64_t start) {
    Segment seg;
    seg.start         = start;
    seg.item_start_ms = to_ms(start);
    segments_.push_back(std::move(seg));
}

void NativeLiveStream::end_segment(int64_t end, bool dropped) {
    Segment & seg = segments_.back();
    seg.end     = end;
    seg.dropped = dropped;
    floor_      = end;
    if (!dropped && seg.item >= 0 && !seg.committed) {
        events_.push_back({LiveEventKind::Committed, seg.item, seg.item_start_ms, to_ms(end), {}});
        seg.committed = true;
    }
}

void NativeLiveStream::open_item(Segment & seg, int64_t start_ms, bool announce) {
    seg.item          = next_item_++;
    seg.item_start_ms = start_ms;
    seg.committed     = false;
    if (announce) {
        events_.push_back({LiveEventKind::SpeechStarted, seg.item, start_ms, 0, {}});
    }
}

void NativeLiveStream::complete_item(Segment & seg, int64_t end_ms) {
    if (!seg.committed) {
        events_.push_back({LiveEventKind::Committed, seg.item, seg.item_start_ms, end_ms, {}});
    }
    events_.push_back({LiveEventKind::Completed, seg.item, seg.item_start_ms, end_ms, seg.text});
    seg.item      = -1;
    seg.last_word = -1;
    seg.text.clear();
    seg.committed     = false;
    seg.item_start_ms = end_ms;
}

void NativeLiveStream::commit() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (to_model_rate_) { // the resampler's tail belongs to the turn committed: flushed, and a fresh one after
        resampled_.clear();
        to_model_rate_->finish();
        append(resampled_.data(), resampled_.size());
        to_model_rate_ = std::make_unique<StreamResampler>(options_.sample_rate, model_.sample_rate, resampled_);
    }
    const bool open = !segments_.empty() && segments_.back().end < 0;
    if (!open) { // between the detector's turns: what was kept of the audio since the last one
        open_segment(std::max(floor_, buffer_origin_));
    }
    Segment & seg = segments_.back();
    const int64_t length = pushed() - seg.start;
    if (length * 10 < model_.sample_rate) {
        if (!open) {
            segments_.pop_back();
        }
        fail(TRANSCRIBE_ERR_INVALID_ARG, "buffer too small: %lld ms of audio since the last turn, at least 100 ms needed",
             (long long) to_ms(length));
    }
    if (seg.item < 0) {
        open_item(seg, seg.item_start_ms, false);
    }
    end_segment(pushed(), false);
    if (vad_) {
        vad_->restart();
    } else {
        open_segment(pushed());
    }
    trim();
}

void NativeLiveStream::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!segments_.empty() && segments_.back().end < 0) {
        end_segment(pushed(), true);
    }
    floor_ = pushed();
    if (vad_) {
        vad_->restart();
    } else {
        open_segment(pushed());
    }
    trim();
}

bool NativeLiveStream::decode_due() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (segments_.empty()) {
        return false;
    }
    const Segment & seg = segments_.front();
    return seg.end >= 0 || std::max(fed_, seg.start) < pushed();
}

size_t NativeLiveStream::turns_waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return size_t(std::count_if(segments_.begin(), segments_.end(),
                                [](const Segment & s) { return s.end >= 0 && !s.dropped; }));
}

void NativeLiveStream::decode() {
    for (;;) {
        std::vector<float> audio;
        bool               finish = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (segments_.empty()) {
                return;
            }
            const Segment & seg = segments_.front();
            if (!stream_) {
                fed_ = seg.start;
            }
            const int64_t limit = seg.end >= 0 ? seg.end : pushed();
            if (fed_ < limit) {
                audio.assign(buffer_.begin() + long(fed_ - buffer_origin_), buffer_.begin() + long(limit - buffer_origin_));
                fed_ = limit;
            }
            finish = seg.end >= 0 && fed_ == seg.end;
            if (audio.empty() && !finish) {
                return;
            }
        }
        if (!stream_) {
            stream_ = model_.open();
        }
        stream_->push(audio.data(), audio.size());
        if (finish) {
            stream_->finish();
        }
        const std::vector<StreamStep> steps = stream_->take_steps();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            Segment & seg = segments_.front();
            take(seg, steps);
            if (finish) {
                if (!seg.dropped && seg.item >= 0) {
                    complete_item(seg, to_ms(seg.end));
                }
                segments_.pop_front();
            }
            trim();
        }
        if (finish) {
            stream_.reset(); // the next segment's audio starts with empty caches
        }
    }
}

// A step's tokens join the segment's turn (opened by the first where the detector did not open it); the
// words they add go out as a Delta; an end-of-utterance token ends the turn there. A delta is the text of
// the new tokens as they join onto the turn's last one (decoded with it, past its own text), so the work
// per step stays that of its own tokens however long the turn.
void NativeLiveStream::take(Segment & seg, const std::vector<StreamStep> & steps) {
    if (seg.dropped) {
        return;
    }
    const bool semantic = options_.turns == NativeTurns::EndOfTurnToken;
    std::vector<int32_t> fresh;
    for (const StreamStep & step : steps) {
        const int64_t heard_ms = to_ms(seg.start) + step.audio_end_ms;
        auto send_delta = [&] {
            if (fresh.empty()) {
                return;
            }
            std::string delta;
            if (seg.last_word < 0) {
                delta = model_.detokenize(fresh);
            } else {
                const std::string before = model_.detokenize({seg.last_word});
                fresh.insert(fresh.begin(), seg.last_word);
                const std::string joined = model_.detokenize(fresh);
                delta = joined.compare(0, before.size(), before) == 0 ? joined.substr(before.size()) : joined;
            }
            seg.last_word = fresh.back();
            fresh.clear();
            if (!delta.empty()) {
                events_.push_back({LiveEventKind::Delta, seg.item, seg.item_start_ms, heard_ms, delta});
                seg.text += delta;
            }
        };
        for (int32_t t : step.tokens) {
            if (seg.item < 0) {
                open_item(seg, seg.item_start_ms, semantic);
            }
            if (t != model_.end_of_turn) {
                fresh.push_back(t);
            } else if (semantic) {
                send_delta();
                events_.push_back({LiveEventKind::SpeechStopped, seg.item, seg.item_start_ms, heard_ms, {}});
                complete_item(seg, heard_ms);
            }
        }
        send_delta();
        if (seg.item < 0) {
            seg.item_start_ms = heard_ms; // a turn the next tokens open begins after what was heard
        }
    }
}

// Keeps what the model has still to hear, and, between the detector's turns, what a turn starting now
// could reach back to (its prefix padding and the detector's latency, within a second).
void NativeLiveStream::trim() {
    int64_t keep = pushed();
    if (!segments_.empty()) {
        keep = std::max(segments_.front().start, fed_);
    }
    if (vad_) {
        const int64_t reach = int64_t(options_.vad.prefix_padding_ms) * model_.sample_rate / 1000 + model_.sample_rate;
        keep = std::min(keep, std::max(floor_, pushed() - reach));
    }
    const int64_t dead = keep - buffer_origin_;
    if (dead > 0 && size_t(dead) * 2 >= buffer_.size()) {
        buffer_.erase(buffer_.begin(), buffer_.begin() + long(dead));
        buffer_origin_ = keep;
    }
}

bool NativeLiveStream::next_event(LiveEvent & out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (events_.empty()) {
        return false;
    }
    out = std::move(events_.front());
    events_.pop_front();
    return true;
}

} // namespace transcribe
