// Streamed token texts (transcribe_run_params.token_callback) turned into text to show: whole UTF-8
// characters only (a token may end inside one), the transcript's leading spaces dropped.
#pragma once

#include <cstddef>
#include <string>

namespace transcribe_tools {

class TextStream {
public:
    // The text that can be shown now, given the next token's bytes.
    std::string push(const char * bytes, size_t n) {
        pending_.append(bytes, n);
        size_t cut = pending_.size(); // keep back an incomplete last character
        for (size_t back = 1; back <= 4 && back <= pending_.size(); ++back) {
            const unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
            if ((c & 0xC0) == 0x80) {
                continue; // a continuation byte: look further back for the lead byte
            }
            const size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (len > back) {
                cut = pending_.size() - back;
            }
            break;
        }
        std::string out = pending_.substr(0, cut);
        pending_.erase(0, cut);
        if (!started_) {
            const size_t b = out.find_first_not_of(" \t\n");
            out     = b == std::string::npos ? std::string() : out.substr(b);
            started_ = !out.empty();
        }
        return out;
    }

private:
    std::string pending_;
    bool        started_ = false;
};

} // namespace transcribe_tools
