// Internal error type: thrown inside the engine, turned into a transcribe_status at the C API.
#pragma once

#include "transcribe.h"

#include <stdexcept>
#include <string>

namespace transcribe {

class Error : public std::runtime_error {
public:
    Error(transcribe_status status, const std::string & message) : std::runtime_error(message), status_(status) {}
    transcribe_status status() const { return status_; }

private:
    transcribe_status status_;
};

// printf-style formatting into a std::string.
std::string format(const char * fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(transcribe_status status, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

} // namespace transcribe
