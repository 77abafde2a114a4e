#include "multipart.h"

#include <algorithm>
#include <cctype>

namespace transcribe_server {

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// The value of PARAM (name=value or name="value", backslash escapes in quotes) in a header's parameters.
bool header_param(const std::string & header, const std::string & param, std::string * out) {
    size_t at = header.find(';');
    while (at != std::string::npos && at < header.size()) {
        at = header.find_first_not_of(" \t;", at);
        if (at == std::string::npos) {
            break;
        }
        const size_t eq = header.find('=', at);
        if (eq == std::string::npos) {
            break;
        }
        std::string key = header.substr(at, eq - at);
        key.erase(key.find_last_not_of(" \t") + 1);
        std::string value;
        size_t end = eq + 1;
        if (end < header.size() && header[end] == '"') {
            for (++end; end < header.size() && header[end] != '"'; ++end) {
                if (header[end] == '\\' && end + 1 < header.size()) {
                    ++end;
                }
                value += header[end];
            }
            end = header.find(';', end);
        } else {
            const size_t stop = header.find(';', end);
            value = header.substr(end, stop == std::string::npos ? std::string::npos : stop - end);
            value.erase(value.find_last_not_of(" \t") + 1);
            end = stop;
        }
        if (lower(key) == param) {
            *out = value;
            return true;
        }
        at = end;
    }
    return false;
}

} // namespace

std::string form_boundary(const std::string & content_type) {
    const std::string type = lower(content_type.substr(0, content_type.find(';')));
    std::string boundary;
    if (type.find_first_not_of(" \t") == std::string::npos ||
        type.substr(type.find_first_not_of(" \t")).rfind("multipart/form-data", 0) != 0 ||
        !header_param(content_type, "boundary", &boundary) || boundary.empty() || boundary.size() > 70) {
        return "";
    }
    return boundary;
}

bool parse_form(const std::string & body, const std::string & boundary, Form * out) {
    out->clear();
    const std::string delimiter = "--" + boundary;
    // The first delimiter may open the body or follow a preamble on a line of its own.
    size_t at = body.rfind(delimiter, 0) == 0 ? 0 : body.find("\r\n" + delimiter);
    if (at == std::string::npos) {
        return false;
    }
    at += at == 0 ? delimiter.size() : delimiter.size() + 2;
    for (;;) {
        if (body.compare(at, 2, "--") == 0) {
            return true; // the close delimiter; an epilogue after it is ignored
        }
        const size_t line_end = body.find("\r\n", at); // transport padding, then the line break
        if (line_end == std::string::npos || body.find_first_not_of(" \t", at) < line_end) {
            return false;
        }
        const size_t headers_end = body.find("\r\n\r\n", line_end);
        const size_t next        = body.find("\r\n" + delimiter, headers_end == std::string::npos ? at : headers_end + 2);
        if (headers_end == std::string::npos || next == std::string::npos) {
            return false;
        }
        std::string name, filename;
        bool named = false;
        for (size_t h = line_end + 2; h < headers_end + 2;) {
            const size_t eol = body.find("\r\n", h);
            const std::string line = body.substr(h, eol - h);
            h = eol + 2;
            const size_t colon = line.find(':');
            if (colon != std::string::npos && lower(line.substr(0, colon)) == "content-disposition") {
                const std::string value = line.substr(colon + 1);
                named = header_param(value, "name", &name);
                header_param(value, "filename", &filename);
            }
        }
        if (!named) {
            return false;
        }
        const size_t content = headers_end + 4;
        out->emplace(name, FormPart {filename, body.substr(content, next - std::min(next, content))});
        at = next + 2 + delimiter.size();
    }
}

} // namespace transcribe_server
