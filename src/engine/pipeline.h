// A recording from samples to its transcript, as every caller of the engine runs one (the C API is a
// thin shim over this): the run's checks, how the recording is cut (at pauses into the model's window,
// or by a voice-activity detector's speech), its pieces through the session (decoded together as far
// as the session batches, or through a batcher shared by threads), joined; speculative decoding's
// draft model run on the same threads.
#pragma once

#include "engine/batcher.h"
#include "model/family.h"
#include "engine/long_audio.h"
#include "engine/speaker_segments.h"
#include "model/speech_detector.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace transcribe {

// What one run asks beyond its samples.
struct RecordingRequest {
    RunOptions options;
    int        chunk_ms = 0; // pieces of at most this much audio; <= 0: the model's window
    // Speech-aware cutting: detectors made by NEW_VAD (kept by the pipeline while VAD_ID stays the same).
    std::function<std::unique_ptr<SpeechDetector>()> new_vad;
    uint64_t                                          vad_id = 0;
    transcribe_vad_params                             speech {};
    // Each token's bytes as decoded (streaming); with it a recording's pieces go one at a time.
    std::function<void(int32_t, const std::string &)> token_bytes;
    // Speculative decoding: a draft model (kept as a session of its own while DRAFT_ID stays the same),
    // or fixed draft ids for every piece.
    Model *              draft    = nullptr;
    uint64_t             draft_id = 0;
    std::vector<int32_t> draft_ids;
    // Speaker-attributed transcripts: the recording's speaker segments, from a diarizer (word-timed
    // models: each word its speaker; others: the recording transcribed turn by turn, speaker_turns.h).
    std::function<std::vector<SpeakerSegment>(const float * pcm, size_t n)> diarize;
    // Word times from a CTC model (transcript_alignment.h), kept as a session of its own while ALIGNER_ID
    // stays the same; the transcript's words and segments become the aligned ones.
    Model *  aligner    = nullptr;
    uint64_t aligner_id = 0;
};

class RecordingPipeline {
public:
    RecordingPipeline(Model & model, const SessionOptions & options);

    Model &                model() { return model_; }
    Session &              session() { return *session_; }
    const SessionOptions & options() const { return options_; }

    // One recording (INVALID_ARG / ABORTED / ... thrown as Error).
    Transcript run(const float * pcm, size_t n, const RecordingRequest & req);

    // Several: those within one window decoded together (one by one where tokens stream out, whose
    // callback would not say whose token each is), the longer ones and those a VAD cuts after, each with
    // its pieces decoded together. The session's abort stops everything (what has not run keeps ran false).
    struct Outcome {
        std::unique_ptr<Transcript> transcript;
        std::exception_ptr          error;
        bool                        ran = false;
    };
    std::vector<Outcome> run_many(const float * const * pcm, const size_t * n, int count, const RecordingRequest & req);

    // TEXT (someone's transcript of the recording, in LANGUAGE) timed by this pipeline's model, which must
    // be an aligner (a CTC head or a forced aligner, as for RecordingRequest::aligner): one segment over
    // the whole recording, its words placed as align_transcript places them.
    Transcript align_text(const float * pcm, size_t n, const std::string & text, const std::string & language);

    // One recording through BATCHER (on this pipeline's session), from any thread: with a VAD, a
    // detector of the caller's own runs on the calling thread.
    Transcript run_shared(Batcher & batcher, const float * pcm, size_t n, const RecordingRequest & req);

private:
    RunOptions prepare(const float * pcm, size_t n, const RecordingRequest & req);
    size_t     window_samples(const RecordingRequest & req) const;
    PiecePlan  plan(SpeechDetector * vad, const float * pcm, size_t n, const RecordingRequest & req, const RunOptions & o,
                    double & vad_ms, double & diarize_ms, const std::function<bool()> & abort);
    bool       per_turn(const RecordingRequest & req, const RunOptions & o) const;
    // The transcript's words placed by the request's aligner, in SESSION (the pipeline's own where null).
    void align(Transcript & t, const float * pcm, size_t n, const RecordingRequest & req, const RunOptions & o,
               Session * session = nullptr);
    // The transcript's words' speakers where the request asks for them (word-timed models).
    void attribute(Transcript & t, const float * pcm, size_t n, const RecordingRequest & req, const RunOptions & o,
                   double & diarize_ms) const;
    // The diarizer's segments of the recording, its time added to DIARIZE_MS.
    static std::vector<SpeakerSegment> diarized(const RecordingRequest & req, const float * pcm, size_t n,
                                                double & diarize_ms);
    // What a session of a companion model (draft, aligner) runs with: this pipeline's threads, one
    // recording at a time, no progress of its own.
    SessionOptions companion_options() const;
    std::vector<int32_t> draft_of(Model & draft, uint64_t draft_id, const float * pcm, size_t n,
                                  const std::function<bool()> & cancelled);

    Model &                         model_;
    SessionOptions                  options_;
    std::unique_ptr<Session>        session_;
    uint64_t                        vad_id_ = 0;
    std::unique_ptr<SpeechDetector> vad_;       // made on the first run that asks for vad_id_
    uint64_t                        draft_id_ = 0;
    std::unique_ptr<Session>        draft_;     // a session of the draft model, on this pipeline's thread
    uint64_t                        aligner_id_ = 0;
    std::unique_ptr<Session>        aligner_;   // a session of the aligner, on this pipeline's thread
};

} // namespace transcribe
