#include "decoding/aed_timestamps.h"

#include <cctype>

namespace transcribe {

namespace {

struct Mark {
    size_t  begin = 0, end = 0; // the token's bytes
    int64_t offset = 0;
};

// Every <|digits|> in TEXT, in order.
std::vector<Mark> timestamp_marks(const std::string & text) {
    std::vector<Mark> marks;
    for (size_t at = text.find("<|"); at != std::string::npos; at = text.find("<|", at + 1)) {
        size_t i = at + 2;
        int64_t value = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && value < (int64_t(1) << 40)) {
            value = value * 10 + (text[i] - '0');
            ++i;
        }
        if (i > at + 2 && text.compare(i, 2, "|>") == 0) {
            marks.push_back({at, i + 2, value});
        }
    }
    return marks;
}

} // namespace

AedTimestamps parse_aed_timestamps(const std::string & raw) {
    AedTimestamps out;
    const std::string text = python_strip(raw);
    // re.finditer(r'<\|(\d+)\|>(.*?)<\|(\d+)\|>'): an opening mark takes the next mark as its close
    // unless a newline lies between them ('.' does not match it); the search goes on after the close.
    const std::vector<Mark> marks = timestamp_marks(text);
    bool any_pair = false;
    std::string joined;
    for (size_t i = 0; i + 1 < marks.size();) {
        const Mark & open = marks[i], & close = marks[i + 1];
        const std::string content = text.substr(open.end, close.begin - open.end);
        if (content.find('\n') != std::string::npos) {
            ++i;
            continue;
        }
        any_pair = true;
        const std::string word = python_strip(content);
        if (!word.empty()) {
            TimedText w;
            w.text  = word;
            w.start = open.offset;
            w.end   = close.offset;
            w.first = out.words.size();
            w.count = 1;
            joined += (out.words.empty() ? "" : " ") + word;
            out.words.push_back(std::move(w));
        }
        i += 2;
    }
    if (!any_pair) {
        out.text = text;
        return out;
    }
    out.text = joined;
    SubwordRules rules;
    rules.segment_separators = {".", "?", "!"};
    out.segments = segment_offsets(out.words, rules);
    return out;
}

} // namespace transcribe
