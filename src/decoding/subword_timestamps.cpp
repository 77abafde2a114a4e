#include "decoding/subword_timestamps.h"

#include <algorithm>

namespace transcribe {

namespace {

// The code point of the UTF-8 sequence at S[I], and its length in bytes (an invalid byte: itself, 1).
uint32_t code_point_at(const std::string & s, size_t i, size_t * length) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    if (n == 1 || i + n > s.size()) {
        *length = 1;
        return b;
    }
    uint32_t cp = b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    *length = n;
    return cp;
}

// What Python's regular expressions take for \s in a str pattern (str.isspace()).
bool is_python_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The last UTF-8 character of S (Python's s[-1]); "" for "".
std::string last_character(const std::string & s) {
    size_t start = s.size();
    while (start > 0 && (static_cast<unsigned char>(s[start - 1]) & 0xC0) == 0x80) {
        --start; // continuation bytes
    }
    return start > 0 ? s.substr(start - 1) : s;
}

} // namespace

bool SubwordRules::is_punctuation(const std::string & s) const {
    return std::find(punctuation.begin(), punctuation.end(), s) != punctuation.end();
}

void refine_punctuation_times(std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules) {
    // NeMo tests offset['char'][0], the first of the token's decoded texts (one text a token): the whole
    // text, so a piece that only starts with a mark ("'s", "--", ".\"") keeps its own frames.
    for (size_t i = 1; i < tokens.size(); ++i) {
        if (rules.is_punctuation(tok.decode({tokens[i].id}))) {
            tokens[i].start = tokens[i].end = tokens[i - 1].end;
        }
    }
}

void refine_ctc_punctuation_times(std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules) {
    for (size_t i = 1; i < tokens.size(); ++i) {
        const std::string text = tok.decode({tokens[i].id});
        if (!text.empty()) {
            size_t n = 1;
            code_point_at(text, 0, &n);
            if (rules.is_punctuation(text.substr(0, n))) {
                tokens[i].end = tokens[i].start;
            }
        }
    }
}

std::vector<TimedText> word_offsets(const std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules) {
    std::vector<TimedText> words;
    if (tokens.empty()) {
        return words;
    }
    std::vector<std::string> text(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        text[i] = tok.decode({tokens[i].id});
    }
    // The word being built: its tokens (their indices), in order.
    std::vector<size_t> built;
    auto emit = [&](size_t last) {
        TimedText w;
        std::vector<int32_t> ids;
        for (size_t k : built) {
            ids.push_back(tokens[k].id);
        }
        w.text        = tok.decode(ids);
        w.start       = tokens[built.front()].start;
        w.end         = tokens[last].end;
        w.first = built.front();
        w.count = last + 1 - built.front();
        words.push_back(std::move(w));
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
        const bool punct = rules.is_punctuation(text[i]) && text[i] != " ";
        std::string next; // the next token text that is not a lone space
        for (size_t j = i + 1; j < tokens.size() && next.empty(); ++j) {
            next = text[j] == " " ? "" : text[j];
        }
        const bool starts = tok.piece(tokens[i].id) != text[i] || (text[i] == " " && !rules.is_punctuation(next));
        if (starts && !punct) {
            if (!built.empty()) {
                emit(i - 1);
            }
            built.clear();
            if (text[i] != " ") {
                built.push_back(i);
            }
        } else if (punct && built.empty() && !words.empty()) {
            TimedText & last = words.back();
            last.end = tokens[i].end;
            if (!last.text.empty() && last.text.back() == ' ') {
                last.text.pop_back();
            }
            last.text += text[i];
            last.count = i + 1 - last.first;
        } else if (punct && !built.empty()) {
            const std::string p = tok.piece(tokens[built.back()].id);
            if (p == " " || p == "_" || p == "\xE2\x96\x81") {
                built.pop_back();
            }
            built.push_back(i);
        } else {
            built.push_back(i);
        }
    }
    if (words.empty()) {
        if (!built.empty()) {
            emit(tokens.size() - 1);
            words.back().start = tokens.front().start;
        }
    } else {
        words.front().start = tokens.front().start;
        if (!built.empty()) {
            emit(tokens.size() - 1);
        }
    }
    return words;
}

std::vector<TimedText> segment_offsets(const std::vector<TimedText> & words, const SubwordRules & rules) {
    std::vector<TimedText> segments;
    std::vector<std::string> parts;
    size_t first = 0;
    auto close = [&](size_t last) {
        TimedText s;
        for (size_t k = 0; k < parts.size(); ++k) {
            s.text += (k ? " " : "") + parts[k];
        }
        s.start       = words[first].start;
        s.end         = words[last].end;
        s.first = first;
        s.count = last + 1 - first;
        segments.push_back(std::move(s));
    };
    for (size_t i = 0; i < words.size(); ++i) {
        const std::string & w = words[i].text;
        if (rules.segment_gap_frames > 0 && !parts.empty()) {
            // With a gap threshold NeMo ends a segment only at a gap once it holds a word: a separator
            // then ends one only as its first word.
            if (words[i].start - words[i - 1].end >= rules.segment_gap_frames) {
                close(i - 1);
                parts = {w};
                first = i;
                continue;
            }
        } else if (!w.empty()) {
            const std::string last = last_character(w);
            bool ends = false;
            for (const std::string & sep : rules.segment_separators) {
                ends = ends || w == sep || last == sep;
            }
            if (ends) {
                parts.push_back(w);
                close(i);
                parts.clear();
                first = i + 1;
                continue;
            }
        }
        parts.push_back(w);
    }
    if (!parts.empty()) {
        close(words.size() - 1);
    }
    return segments;
}

std::string python_strip(const std::string & text) {
    size_t begin = 0, end = text.size();
    while (begin < end) {
        size_t n = 1;
        if (!is_python_space(code_point_at(text, begin, &n))) {
            break;
        }
        begin += n;
    }
    while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
            --start;
        }
        size_t n = 1;
        if (!is_python_space(code_point_at(text, start, &n)) || start + n != end) {
            break;
        }
        end = start;
    }
    return text.substr(begin, end - begin);
}

std::string strip_space_before_punctuation(const std::string & text, const SubwordRules & rules) {
    // NeMo: re.sub(r'(\s)(p1|p2|...)', r'\2', text), one whitespace character (as Python's \s sees it) before each mark.
    std::string out;
    for (size_t i = 0; i < text.size();) {
        size_t n = 1;
        const uint32_t cp = code_point_at(text, i, &n);
        bool before_punct = false;
        if (is_python_space(cp)) {
            for (const std::string & p : rules.punctuation) {
                before_punct = before_punct || (!p.empty() && text.compare(i + n, p.size(), p) == 0);
            }
        }
        if (!before_punct) {
            out.append(text, i, n);
        }
        i += n;
    }
    return out;
}

} // namespace transcribe
