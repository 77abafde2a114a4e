// Long recordings: cut at the quietest points near the window limit, transcribe piece by piece with
// one session, and join the pieces into timed segments of the original audio.
#pragma once

#include "model/family.h"
#include "engine/speech_segments.h"

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace transcribe {

// Pieces of at most max_len samples covering [0, n). Each cut lies in the last quarter of its window,
// in the middle of the quietest 200 ms there (short-time energy), so a pause, when there is one, is
// where the cut goes.
std::vector<AudioSpan> split_at_pauses(const float * x, size_t n, int sample_rate, size_t max_len);

// The span of `piece` without leading and trailing silence (frames 35 dB below the piece's loudest).
AudioSpan trim_silence(const float * x, AudioSpan piece, int sample_rate);

// Piece i's samples: a span of the recording, or made into STORAGE (kept while the piece runs).
using PieceAudio = std::function<std::pair<const float *, size_t>(size_t i, std::vector<float> & storage)>;

// A recording cut into pieces: how many, each one's samples, and how their transcripts (in piece order)
// join into the recording's. The recording's samples (and the tokenizer) must outlive it.
struct PiecePlan {
    size_t                                             n_pieces = 0;
    PieceAudio                                         audio_of;
    std::function<Transcript(std::vector<Transcript>)> join;
};

// Pieces of at most window_samples cut at pauses, joined as one segment per piece, times in the
// original audio, truncation reported per segment and overall.
PiecePlan plan_pieces(const float * x, size_t n, int sample_rate, size_t window_samples);
// The same for pieces already cut (spans of x, in order, each within the window).
PiecePlan plan_spans(const float * x, std::vector<AudioSpan> pieces, int sample_rate);

// transcribe_plan (piece_feeder.h) of plan_pieces(...).
Transcript transcribe_pieces(Session & session, const float * x, size_t n, int sample_rate, size_t window_samples,
                             const RunOptions & options);

// What the model hears of a recording when a VAD found its speech: speech regions, back to back (the
// silence between them cut out, as faster-whisper's VAD filter does).
struct SpeechPiece {
    std::vector<AudioSpan> regions; // each becomes segments of its own
    size_t samples() const;
};

// Pieces of at most max_len samples of speech from speech regions (in order, not overlapping): a region
// longer than max_len is cut at its lowest-probability chunk in the second half of each max_len
// stretch, then neighbours are merged while their speech fits in max_len. probs[k] covers
// [k * chunk, (k+1) * chunk).
std::vector<SpeechPiece> plan_speech_pieces(const std::vector<AudioSpan> & regions, const std::vector<float> & probs,
                                            size_t chunk, size_t max_len);

// Subtitle-sized segments of a piece's speech regions: the piece's words given to its regions in
// proportion to their durations (the decoder gives no times within a piece; where a word's middle
// character falls along the audio the model heard decides its region), then each region cut into cues
// of at most kCueChars characters and kCueMs, times in proportion to characters within the region.
constexpr int kCueChars = 42;
constexpr int kCueMs    = 7000;
std::vector<Segment> speech_segments(const Transcript & piece, const std::vector<AudioSpan> & regions,
                                     const Tokenizer & tokenizer, int sample_rate);

// The speech pieces as a plan: each piece's regions back to back (silence between pieces is never
// decoded); segments follow speech (speech_segments); no pieces give an empty transcript.
PiecePlan plan_speech(const Tokenizer & tokenizer, const float * x, std::vector<SpeechPiece> pieces, int sample_rate);

// transcribe_plan (piece_feeder.h) of plan_speech(...).
Transcript transcribe_speech(Session & session, const Tokenizer & tokenizer, const float * x,
                             const std::vector<SpeechPiece> & pieces, int sample_rate, const RunOptions & options);

} // namespace transcribe
