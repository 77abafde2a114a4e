#include "subword_timestamps.h"

#include <algorithm>

namespace transcribe {

namespace {

bool is_space_char(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

} // namespace

bool SubwordRules::is_punctuation(const std::string & s) const {
    return std::find(punctuation.begin(), punctuation.end(), s) != punctuation.end();
}

void refine_punctuation_times(std::vector<TimedToken> & tokens, const Tokenizer & tok, const SubwordRules & rules) {
    for (size_t i = 1; i < tokens.size(); ++i) {
        const std::string text = tok.decode({tokens[i].id});
        if (!text.empty() && rules.is_punctuation(text.substr(0, 1))) {
            tokens[i].start = tokens[i].end = tokens[i - 1].end;
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
        bool ends = false;
        for (const std::string & sep : rules.segment_separators) {
            ends = ends || w == sep || (!w.empty() && sep.size() == 1 && w.back() == sep[0]);
        }
        parts.push_back(w);
        if (ends && !w.empty()) {
            close(i);
            parts.clear();
            first = i + 1;
        }
    }
    if (!parts.empty()) {
        close(words.size() - 1);
    }
    return segments;
}

std::string strip_space_before_punctuation(const std::string & text, const SubwordRules & rules) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (is_space_char(text[i])) {
            bool before_punct = false;
            for (const std::string & p : rules.punctuation) {
                before_punct = before_punct || text.compare(i + 1, p.size(), p) == 0;
            }
            if (before_punct) {
                continue;
            }
        }
        out += text[i];
    }
    return out;
}

} // namespace transcribe
