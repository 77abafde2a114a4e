// How much memory the system could give this process now, for defaults sized by memory.
#pragma once

#include <cstddef>

namespace transcribe {

// Linux's MemAvailable (free memory plus what the page cache would give back), else the free pages;
// 0 when neither can be read.
size_t available_memory_bytes();

} // namespace transcribe
