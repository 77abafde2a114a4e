// ISO 639 codes and the English names of languages, for models that list their languages by name
// (Qwen3-ASR: "English", "Cantonese") while callers such as OpenAI's API send codes ("en", "yue").
#pragma once

#include <string>

namespace transcribe {

// The English name of an ISO 639-1 (or -3, where a model's language has no two-letter code) code, any
// case ("en" -> "English", "yue" -> "Cantonese"); empty where the table has none.
std::string language_name_of_code(const std::string & code);

} // namespace transcribe
