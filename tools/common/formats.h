// Transcript output formats shared by the tools: plain text, JSON, SubRip, WebVTT.
#pragma once

#include "transcribe.h"

#include <string>

namespace transcribe_tools {

enum class Format { Txt, Json, Srt, Vtt };

bool parse_format(const std::string & name, Format * out);
// "HH:MM:SS,mmm" (SRT) or "HH:MM:SS.mmm" (VTT).
std::string format_timestamp(int64_t ms, char separator);
std::string render(const transcribe_result * result, Format format, const transcribe_timings * timings,
                   const std::string & model_name);

} // namespace transcribe_tools
