// OpenAI's response shapes for a transcript: verbose_json, diarized_json and the server-sent events of a
// streamed transcription.
#pragma once

#include "../common/formats.h"

#include <nlohmann/json.hpp>

#include <string>

namespace transcribe_server {

using json = nlohmann::ordered_json;

// One SSE event ("data: {...}\n\n"); invalid UTF-8 in the payload is replaced, never an exception.
std::string sse_event(const json & data);
std::string trimmed(const std::string & s);

json words_json(const std::vector<transcribe_tools::OutputWord> & words);

// verbose_json: task, language, duration, text, and the segments and/or words asked for.
json verbose_json(const transcribe_tools::Output & out, const std::string & task, const std::string & language,
                  double duration, bool with_segments, bool with_words);

// diarized_json's segments (TranscriptionDiarizedSegment): type "transcript.text.segment", id "seg_<i>",
// start, end, text, speaker. Speakers are labelled A, B, ... in order of their first segment, as OpenAI
// labels speakers it was not given names for (a Sortformer's speakers are already in arrival order).
json diarized_segments(const transcribe_tools::Output & out);
// TranscriptionDiarized: task "transcribe", duration, text, segments, usage {type "duration", seconds}.
json diarized_json(const transcribe_tools::Output & out, double duration);

} // namespace transcribe_server
