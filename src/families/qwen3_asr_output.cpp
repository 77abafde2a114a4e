#include "qwen3_asr_output.h"

#include "core/language_names.h"
#include "core/python_text.h"

#include <algorithm>
#include <cstdint>

namespace transcribe::qwen3_asr {

namespace {

using Text = CodePoints;

// Python's str.splitlines() boundaries.
bool is_line_break(char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}

Text strip(const Text & t) {
    size_t b = 0, e = t.size();
    while (b < e && python_isspace(t[b])) {
        ++b;
    }
    while (e > b && python_isspace(t[e - 1])) {
        --e;
    }
    return t.substr(b, e - b);
}

Text lower(Text t) {
    for (char32_t & c : t) {
        if (c >= 'A' && c <= 'Z') {
            c = c - 'A' + 'a';
        }
    }
    return t;
}

std::vector<Text> split_lines(const Text & t) {
    std::vector<Text> lines;
    size_t start = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        if (is_line_break(t[i])) {
            lines.push_back(t.substr(start, i - start));
            if (t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n') {
                ++i;
            }
            start = i + 1;
        }
    }
    if (start < t.size()) {
        lines.push_back(t.substr(start));
    }
    return lines;
}

Text fix_char_repeats(const Text & s, size_t thresh) {
    Text out;
    for (size_t i = 0; i < s.size();) {
        size_t count = 1;
        while (i + count < s.size() && s[i + count] == s[i]) {
            ++count;
        }
        out += count > thresh ? s.substr(i, 1) : s.substr(i, count);
        i += count;
    }
    return out;
}

Text fix_pattern_repeats(const Text & s, size_t thresh, size_t max_len = 20) {
    const size_t n = s.size(), min_repeat_chars = thresh * 2;
    if (n < min_repeat_chars) {
        return s;
    }
    Text result;
    size_t i = 0;
    bool found = false;
    while (i + min_repeat_chars <= n) {
        for (size_t k = 1; k <= max_len; ++k) {
            if (i + k * thresh > n) {
                break;
            }
            const Text pattern = s.substr(i, k);
            bool valid = true;
            for (size_t rep = 1; rep < thresh && valid; ++rep) {
                valid = s.compare(i + rep * k, k, pattern) == 0;
            }
            if (valid) {
                size_t end = i + thresh * k;
                while (end + k <= n && s.compare(end, k, pattern) == 0) {
                    end += k;
                }
                result += pattern;
                result += fix_pattern_repeats(s.substr(end), thresh, max_len);
                found = true;
                break;
            }
        }
        if (found) {
            break;
        }
        result += s[i];
        ++i;
    }
    if (!found) {
        result += s.substr(i);
    }
    return result;
}

std::string normalize(const Text & name) {
    Text s = strip(name);
    if (s.empty()) {
        return "";
    }
    s = lower(s);
    if (s[0] >= 'a' && s[0] <= 'z') {
        s[0] = s[0] - 'a' + 'A';
    }
    return to_utf8(s);
}

} // namespace

std::string fix_repetitions(const std::string & text, int threshold) {
    const size_t t = size_t(std::max(threshold, 1));
    return to_utf8(fix_pattern_repeats(fix_char_repeats(to_code_points(text), t), t));
}

std::string normalize_language(const std::string & name) { return normalize(to_code_points(name)); }

std::pair<std::string, std::string> parse_output(const std::string & raw, const std::string & forced) {
    const Text s0 = strip(to_code_points(raw));
    if (s0.empty()) {
        return {"", ""};
    }
    const Text s = to_code_points(fix_repetitions(to_utf8(s0)));
    if (!forced.empty()) {
        return {forced, to_utf8(s)};
    }
    static const Text tag = U"<asr_text>";
    const size_t at = s.find(tag);
    if (at == Text::npos) {
        return {"", to_utf8(strip(s))};
    }
    const Text meta = s.substr(0, at), text = s.substr(at + tag.size());
    if (lower(meta).find(U"language none") != Text::npos) {
        return {"", to_utf8(strip(text))};
    }
    std::string language;
    static const Text prefix = U"language ";
    for (const Text & line0 : split_lines(meta)) {
        const Text line = strip(line0);
        if (line.empty()) {
            continue;
        }
        if (lower(line).compare(0, prefix.size(), prefix) == 0) {
            language = normalize(line.substr(prefix.size()));
            break;
        }
    }
    return {language, to_utf8(strip(text))};
}

std::string language_name(const std::string & language, const std::vector<std::string> & supported) {
    for (const std::string & name : {normalize_language(language), language_name_of_code(to_utf8(strip(to_code_points(language))))}) {
        if (!name.empty() && std::find(supported.begin(), supported.end(), name) != supported.end()) {
            return name;
        }
    }
    return "";
}

} // namespace transcribe::qwen3_asr
