// Canary AED's timestamps as NeMo reads them from the decoded text (timestamp_utils.
// process_aed_timestamp_outputs): the model writes <|start|>word<|end|> with offsets in encoder
// frames; each pair with text between becomes a word, the words joined by spaces become the text,
// and segments end at words ending in . ? or !. Text without such a pair is kept (stripped).
#pragma once

#include "decoding/subword_timestamps.h"

#include <string>
#include <vector>

namespace transcribe {

struct AedTimestamps {
    std::string            text;     // what NeMo's hypothesis text becomes
    std::vector<TimedText> words;    // start / end in encoder frames; empty when the text has no pair
    std::vector<TimedText> segments;
};

AedTimestamps parse_aed_timestamps(const std::string & text);

} // namespace transcribe
