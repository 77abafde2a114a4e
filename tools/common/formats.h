// Transcript output formats shared by the tools: plain text, JSON, SubRip, WebVTT.
#pragma once

#include "transcribe.h"

#include <string>
#include <vector>

namespace transcribe_tools {

struct OutputWord {
    std::string text;
    int64_t     t0_ms = 0;
    int64_t     t1_ms = 0;
    int         speaker = -1; // with a diarizer
};

struct OutputSegment {
    int64_t                 t0_ms = 0;
    int64_t                 t1_ms = 0;
    std::string             text;
    std::vector<int32_t>    tokens;
    bool                    truncated = false;
    std::vector<OutputWord> words;
    int                     speaker = -1; // with a diarizer
    bool                    has_decode = false; // Whisper: its window's decode (JSON: openai-whisper's segment fields)
    transcribe_segment_decode decode {};
};

// What the formats render: a plain copy of a transcribe_result (so formats are testable on their own).
struct Output {
    std::string                text;
    std::vector<OutputSegment> segments;
    std::vector<int32_t>       tokens;
    bool                       truncated = false;
    std::vector<OutputWord>    words; // empty unless the model gives word times
    std::string                language; // where the model tells it (Whisper)
};

Output output_from_result(const transcribe_result * result);

// The double the shortest decimal of F reads as (a temperature of 0.4f is written 0.4, as openai-whisper
// writes the Python float it was given).
double shortest_decimal(float f);

enum class Format { Txt, Json, Srt, Vtt };
// Speaker-attributed output (a diarizer's speakers): JSON `speaker` ("speaker_<k>", NeMo's names) on every
// segment and word; SRT "[Speaker k+1] " before a cue's text; VTT "<v Speaker k+1>"; txt a line per
// segment ("[Speaker k+1] text").
// segment: JSON segments, subtitles cue per segment. word: JSON also lists words (top level and per
// segment) and subtitle cues are built from words.
enum class Timestamps { Segment, Word };

// Subtitle cues from words: at most kCueChars characters and kCueMs each, never across a segment.
constexpr int kCueChars = 42;
constexpr int kCueMs    = 7000;
std::vector<OutputSegment> word_cues(const Output & output);

bool parse_format(const std::string & name, Format * out);
// "HH:MM:SS,mmm" (SRT) or "HH:MM:SS.mmm" (VTT).
std::string format_timestamp(int64_t ms, char separator);
std::string render(const Output & output, Format format, const transcribe_timings * timings,
                   const std::string & model_name, Timestamps timestamps = Timestamps::Segment);

} // namespace transcribe_tools
