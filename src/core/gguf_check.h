// A bounds check of a GGUF header before ggml parses it: every count, length and dimension read from
// the file is held against the file's size and sane limits, so that a malformed or hostile header
// gets a named BAD_GGUF error instead of a huge allocation (or an overflow inside the parser).
#pragma once

#include <cstddef>
#include <string>

namespace transcribe {

// Throws Error(BAD_GGUF) naming the first problem; reads only the header.
void gguf_check_header(const std::string & path, size_t file_size);

} // namespace transcribe
