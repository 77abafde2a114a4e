// How the command-line tools report a failure: one line on stderr, "TOOL: error: STATUS: cause", and
// exit code 1; the library's own log stays quiet so each error is said once.
#pragma once

#include "transcribe.h"

#include <cstdio>
#include <string>

namespace transcribe_tools {

inline int tool_error(const char * tool, const std::string & message) {
    std::fprintf(stderr, "%s: error: %s\n", tool, message.c_str());
    return 1;
}

inline int tool_error(const char * tool, transcribe_status st) {
    const std::string detail = transcribe_last_error();
    return tool_error(tool, std::string(transcribe_status_string(st)) + (detail.empty() ? "" : ": " + detail));
}

inline void quiet_log(transcribe_log_level, const char *, void *) {}

} // namespace transcribe_tools
