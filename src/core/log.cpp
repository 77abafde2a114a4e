#include "log.h"
#include "error.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace transcribe {

namespace {

void default_sink(transcribe_log_level level, const char * message, void *) {
    if (level < TRANSCRIBE_LOG_WARN) {
        return;
    }
    static const char * names[] = {"debug", "info", "warning", "error"};
    std::fprintf(stderr, "transcribe: %s: %s\n", names[level], message);
}

std::mutex              g_mutex;
transcribe_log_callback g_callback = default_sink;
void *                  g_user     = nullptr;

std::string vformat(const char * fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string out(n > 0 ? size_t(n) : 0, '\0');
    if (n > 0) {
        std::vsnprintf(out.data(), out.size() + 1, fmt, args);
    }
    return out;
}

} // namespace

std::string format(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    return s;
}

void fail(transcribe_status status, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    throw Error(status, s);
}

void log_set(transcribe_log_callback callback, void * user_data) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_callback = callback ? callback : default_sink;
    g_user     = callback ? user_data : nullptr;
}

void log(transcribe_log_level level, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_callback(level, s.c_str(), g_user);
}

} // namespace transcribe
