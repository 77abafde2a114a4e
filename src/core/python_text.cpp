#include "core/python_text.h"

namespace transcribe {

CodePoints to_code_points(const std::string & s) {
    CodePoints out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (int k = 1; k < n && i + size_t(k) < s.size(); ++k) {
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
        }
        out.push_back(cp);
        i += size_t(n);
    }
    return out;
}

std::string to_utf8(const CodePoints & t) {
    std::string out;
    for (char32_t cp : t) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    }
    return out;
}

bool python_isspace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<CodePoints> python_split(const CodePoints & t) {
    std::vector<CodePoints> out;
    CodePoints run;
    for (char32_t c : t) {
        if (python_isspace(c)) {
            if (!run.empty()) {
                out.push_back(std::move(run));
                run.clear();
            }
        } else {
            run.push_back(c);
        }
    }
    if (!run.empty()) {
        out.push_back(std::move(run));
    }
    return out;
}

} // namespace transcribe
