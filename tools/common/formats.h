// Transcript output formats shared by the tools: plain text, JSON, SubRip, WebVTT.
#pragma once

#include "transcribe.h"

#include <string>
#include <vector>

namespace transcribe_tools {

struct OutputSegment {
    int64_t              t0_ms = 0;
    int64_t              t1_ms = 0;
    std::string          text;
    std::vector<int32_t> tokens;
    bool                 truncated = false;
};

// What the formats render: a plain copy of a transcribe_result (so formats are testable on their own).
struct Output {
    std::string                text;
    std::vector<OutputSegment> segments;
    std::vector<int32_t>       tokens;
    bool                       truncated = false;
};

Output output_from_result(const transcribe_result * result);

enum class Format { Txt, Json, Srt, Vtt };

bool parse_format(const std::string & name, Format * out);
// "HH:MM:SS,mmm" (SRT) or "HH:MM:SS.mmm" (VTT).
std::string format_timestamp(int64_t ms, char separator);
std::string render(const Output & output, Format format, const transcribe_timings * timings,
                   const std::string & model_name);

} // namespace transcribe_tools
