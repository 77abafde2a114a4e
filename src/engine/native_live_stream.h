// Live transcription through a model that transcribes as it hears (NeMo's cache-aware streaming models,
// model/family.h NativeStream): the audio goes through the model once, chunk by chunk, and each step's
// new words go out as a Delta; nothing is re-transcribed. The events are the live stream's (LiveEvent),
// the turns found one of three ways:
//   EndOfTurnToken  one stream over all the audio, a turn ending at the model's end-of-utterance token
//                   (OpenAI's semantic_vad); its tokens since the previous turn are its transcript, so
//                   the turns' tokens joined are the model's streaming transcript of the whole audio;
//   Vad             the voice-activity detector's turns (server_vad): each turn's audio, its prefix
//                   padding included, streamed through a stream of its own from the turn's start and
//                   finished at its end, so its transcript is the model's streaming run on that audio
//                   (the silence between turns costs nothing);
//   Commits         one stream from commit to commit.
// A commit ends the current turn in any mode: its stream is finished (the audio heard so far, all of it
// transcribed) and the next audio starts a new one.
//
// push(), commit() and clear() only take audio and mark edges; decode() runs the model on what is due
// (a thread of its own may call it while another pushes; one decode() at a time).
#pragma once

#include "engine/live_stream.h"
#include "model/family.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace transcribe {

class StreamResampler;

enum class NativeTurns { EndOfTurnToken, Vad, Commits };

struct NativeLiveOptions {
    int                 sample_rate = 16000; // of the samples pushed (resampled to the model's)
    NativeTurns         turns = NativeTurns::Commits;
    TurnDetectionParams vad;                 // NativeTurns::Vad
};

struct NativeLiveModel {
    int                                           sample_rate = 16000;
    int32_t                                       end_of_turn = -1; // the token, or -1
    std::function<std::unique_ptr<NativeStream>()> open;            // a fresh stream (the caches empty)
    std::function<std::string(const std::vector<int32_t> &)> detokenize;
};

class NativeLiveStream : public LiveTurns {
public:
    // VAD: required for NativeTurns::Vad. INVALID_ARG where the mode needs what the model lacks.
    NativeLiveStream(const NativeLiveOptions & options, NativeLiveModel model, std::unique_ptr<SpeechDetector> vad);
    ~NativeLiveStream();
    NativeLiveStream(const NativeLiveStream &) = delete;
    NativeLiveStream & operator=(const NativeLiveStream &) = delete;

    void push(const float * pcm, size_t n) override;
    // (The current turn's stream is finished: the audio pushed so far all transcribed.)
    void commit() override;
    // (The current turn's stream runs out with nothing more sent.)
    void clear() override;

    bool   decode_due() const override;
    size_t turns_waiting() const override;
    // Runs the model over the audio due, finishing the turns that ended.
    void decode();

    bool next_event(LiveEvent & out) override;

private:
    // Audio one stream runs over, from its start to the commit, VAD edge or clear that ends it, and the
    // turn its tokens are making.
    struct Segment {
        int64_t              start = 0, end = -1; // model-rate samples; end -1: still open
        bool                 dropped = false;     // cleared: its stream runs out, nothing more is sent
        int64_t              item = -1;           // the turn being heard; -1: none open
        int64_t              item_start_ms = 0;
        bool                 committed = false;   // the item's Committed went out
        int32_t              last_word = -1;      // the item's last token (end-of-turn tokens aside)
        std::string          text;                // its text so far: the deltas sent, joined
    };

    int64_t to_ms(int64_t sample) const { return sample * 1000 / model_.sample_rate; }
    int64_t pushed() const { return buffer_origin_ + int64_t(buffer_.size()); }
    void    append(const float * pcm, size_t n);
    void    on_edge(const TurnEdge & edge);
    void    open_segment(int64_t start);
    void    end_segment(int64_t end, bool dropped);
    void    open_item(Segment & seg, int64_t start_ms, bool announce);
    void    complete_item(Segment & seg, int64_t end_ms);
    void    take(Segment & seg, const std::vector<StreamStep> & steps);
    void    trim();

    mutable std::mutex mutex_; // everything below but stream_ (decode()'s own)

    NativeLiveOptions                options_;
    NativeLiveModel                  model_;
    std::unique_ptr<VadTurnEdges>    vad_;
    std::unique_ptr<StreamResampler> to_model_rate_;
    std::vector<float>               resampled_;
    std::vector<TurnEdge>            edges_;

    std::vector<float>  buffer_;            // model-rate samples from buffer_origin_ on
    int64_t             buffer_origin_ = 0;
    int64_t             floor_ = 0;         // the next segment starts no earlier
    std::deque<Segment> segments_;          // in order; the front one is decode()'s
    int64_t             fed_ = 0;           // the front segment's samples given to stream_ so far
    int64_t             next_item_ = 0;

    std::unique_ptr<NativeStream> stream_;
    std::deque<LiveEvent>         events_;
};

} // namespace transcribe
