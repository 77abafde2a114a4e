#include "language_names.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace transcribe {

std::string language_name_of_code(const std::string & code) {
    static const std::map<std::string, std::string> names = {
        {"ar", "Arabic"},   {"cs", "Czech"},    {"da", "Danish"},     {"de", "German"},    {"el", "Greek"},
        {"en", "English"},  {"es", "Spanish"},  {"fa", "Persian"},    {"fi", "Finnish"},   {"fil", "Filipino"},
        {"fr", "French"},   {"hi", "Hindi"},    {"hu", "Hungarian"},  {"id", "Indonesian"}, {"it", "Italian"},
        {"ja", "Japanese"}, {"ko", "Korean"},   {"mk", "Macedonian"}, {"ms", "Malay"},     {"nl", "Dutch"},
        {"pl", "Polish"},   {"pt", "Portuguese"}, {"ro", "Romanian"}, {"ru", "Russian"},   {"sv", "Swedish"},
        {"th", "Thai"},     {"tl", "Filipino"}, {"tr", "Turkish"},    {"vi", "Vietnamese"}, {"yue", "Cantonese"},
        {"zh", "Chinese"},
    };
    std::string key = code;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    const auto it = names.find(key);
    return it == names.end() ? "" : it->second;
}

} // namespace transcribe
