// Live transcription of one audio stream: samples arrive in pieces of any size; turns of speech are
// found as they happen (turn_detector.h over a streamed voice-activity detector) or committed by the
// caller; each turn, once over, is transcribed from its own samples alone (so its text is what a whole
// run on those samples gives), and a turn still being spoken is re-transcribed now and then so its words
// can go out early. Those partial transcripts are sent as append-only deltas of the words two
// consecutive partials agree on (a word is out only once two hearings of it agree), at a cadence that
// backs off when transcribing is slow, so the work stays a bounded share of real time.
//
// The stream decodes nothing itself: decode() takes the transcriber (a session of the caller's), so
// many streams can share a model and a stream holds a session only while it transcribes. decode() may
// run on a thread of its own while another pushes (it transcribes outside the stream's lock, so turn
// edges keep being found while a turn is transcribed); one decode() at a time.
#pragma once

#include "engine/vad_turn_edges.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace transcribe {

struct LiveStreamOptions {
    int                 sample_rate = 16000; // of the samples pushed
    bool                detect_turns = true; // false: turns only by commit()
    TurnDetectionParams turns;
    int                 partial_interval_ms = 500; // partial transcripts at most once per this much audio; 0: none
};

enum class LiveEventKind { SpeechStarted, SpeechStopped, Committed, Delta, Completed };

struct LiveEvent {
    LiveEventKind kind;
    int64_t       item = 0;           // the turn, numbered from 0 in the order turns start (or are committed)
    int64_t       audio_start_ms = 0; // the turn's audio in the stream (SpeechStarted: the start only)
    int64_t       audio_end_ms   = 0;
    std::string   text;               // Delta: the words to append; Completed: the turn's transcript
};

// What a caller of a live stream sees, whichever way it transcribes (this one re-decoding an offline
// model's turns, native_live_stream.h through a model that transcribes as it hears): audio in, turn
// edges marked, events out.
class LiveTurns {
public:
    virtual ~LiveTurns() = default;
    // More samples: turn edges found in them become events.
    virtual void push(const float * pcm, size_t n) = 0;
    // What has been pushed since the last turn, commit or clear becomes a turn of its own (an open turn
    // is ended here). INVALID_ARG for less than 100 ms of audio, as OpenAI's commit.
    virtual void commit() = 0;
    // Forgets the audio since the last turn, commit or clear, and an open turn with it.
    virtual void clear() = 0;
    // Whether decode() has work.
    virtual bool   decode_due() const = 0;
    // Ended turns not yet transcribed (a scheduler puts them before partial transcripts).
    virtual size_t turns_waiting() const = 0;
    virtual bool   next_event(LiveEvent & out) = 0;

protected:
    // INVALID_ARG for a rate outside what the audio core takes.
    static void check_rate(int sample_rate);
    // False for no samples; INVALID_ARG for null ones, AUDIO_DECODE for a non-finite one.
    static bool check_samples(const float * pcm, size_t n);
};

// Samples at the stream's rate to their transcript.
using TurnTranscriber = std::function<std::string(const float * pcm, size_t n)>;

class LiveStream : public LiveTurns {
public:
    // VAD: the detector turn detection runs (required where options.detect_turns).
    LiveStream(const LiveStreamOptions & options, std::unique_ptr<SpeechDetector> vad);
    ~LiveStream();
    LiveStream(const LiveStream &) = delete;
    LiveStream & operator=(const LiveStream &) = delete;

    const LiveStreamOptions & options() const { return options_; }

    void push(const float * pcm, size_t n) override;
    // (Between detected turns, only the last second and prefix padding are kept for a commit.)
    void commit() override;
    void clear() override;

    // A turn to finish or a partial transcript due.
    bool   decode_due() const override;
    size_t turns_waiting() const override;
    // Finishes every ended turn (in order, each a Completed), then, where due, a partial transcript of
    // the open turn (a Delta when it brings agreed words).
    void decode(const TurnTranscriber & transcribe);

    bool next_event(LiveEvent & out) override;

private:
    struct EndedTurn {
        int64_t            item, start_ms, end_ms;
        std::vector<float> pcm;
    };

    int64_t to_ms(int64_t sample) const { return sample * 1000 / options_.sample_rate; }
    void    on_edge(const TurnEdge & edge);
    void    end_turn(int64_t end);
    void    trim();
    bool    due_locked() const;
    void    partial(std::unique_lock<std::mutex> & lock, const TurnTranscriber & transcribe);

    mutable std::mutex              mutex_; // the state below, between push() and a decode() elsewhere

    LiveStreamOptions               options_;
    std::unique_ptr<VadTurnEdges>   turns_;
    std::vector<TurnEdge>           edges_;

    std::vector<float> buffer_;          // the stream's samples from buffer_origin_ on
    int64_t            buffer_origin_ = 0;
    int64_t            pushed_        = 0;
    int64_t            floor_         = 0; // where the audio not yet in a turn begins
    int64_t            next_item_     = 0;

    bool    open_       = false; // a turn is being spoken
    int64_t open_item_  = 0, open_start_ = 0;
    int64_t partial_at_ = 0;     // the open turn's length at its last partial transcript
    int64_t partial_gap_ = 0;    // samples of new audio the next partial waits for
    std::vector<std::string> last_hearing_, sent_words_;

    std::deque<EndedTurn> ended_;
    std::deque<LiveEvent> events_;
};

} // namespace transcribe
