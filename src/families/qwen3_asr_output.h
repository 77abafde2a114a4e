// What Qwen3-ASR's text means (qwen_asr/inference/utils.py): "language X<asr_text>transcript", parsed as
// parse_asr_output does it, after detect_and_fix_repetitions; and the names its language prompt takes.
// Strings are UTF-8 and handled by code point, as Python's str is (strip: Python's whitespace set;
// lower/upper: ASCII letters only, which is all a language name or the "language " prefix has).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace transcribe::qwen3_asr {

// Runs of one character longer than THRESHOLD collapsed to one, then the first pattern of up to 20
// characters repeated THRESHOLD times or more kept once (recursively after it).
std::string fix_repetitions(const std::string & text, int threshold = 20);

// (language, text) of the model's raw output; FORCED (the language the prompt gave, non-empty): the output
// is all text and the language is FORCED.
std::pair<std::string, std::string> parse_output(const std::string & raw, const std::string & forced = "");

// normalize_language_name: first character upper-case, the rest lower-case, surrounding whitespace gone.
std::string normalize_language(const std::string & name);

// The model's name for LANGUAGE: a name it lists (any case) or an ISO 639 code of one ("en", "zh",
// "yue", ...); empty where it lists none.
std::string language_name(const std::string & language, const std::vector<std::string> & supported);

} // namespace transcribe::qwen3_asr
