// Process-wide log sink shared by every part of the engine.
#pragma once

#include "transcribe.h"

namespace transcribe {

void log_set(transcribe_log_callback callback, void * user_data);
void log(transcribe_log_level level, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

#define TLOG_DEBUG(...) ::transcribe::log(TRANSCRIBE_LOG_DEBUG, __VA_ARGS__)
#define TLOG_INFO(...)  ::transcribe::log(TRANSCRIBE_LOG_INFO, __VA_ARGS__)
#define TLOG_WARN(...)  ::transcribe::log(TRANSCRIBE_LOG_WARN, __VA_ARGS__)
#define TLOG_ERROR(...) ::transcribe::log(TRANSCRIBE_LOG_ERROR, __VA_ARGS__)

} // namespace transcribe
