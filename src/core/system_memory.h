// How much memory the system could give this process now, for defaults sized by memory, and how the
// process asks for its large buffers to be backed.
#pragma once

#include <cstddef>
#include <vector>

namespace transcribe {

// Linux's MemAvailable (free memory plus what the page cache would give back), else the free pages;
// 0 when neither can be read.
size_t available_memory_bytes();

constexpr size_t kHugePageBytes = size_t(2) << 20;

// Asks for transparent huge pages over the 2 MiB-aligned interior of [p, p + n). A first touch of a page
// is a trap into the kernel, far dearer than writing the page and dearer still on virtual machines: a
// large buffer touched for the first time takes 512x fewer of them, and walking the weights for every
// token 512x fewer page-table entries. Only pages not yet touched are affected; a no-op where the
// kernel has no transparent huge pages.
void advise_huge_pages(void * p, size_t n);

// Room for N elements in the empty vector V, advised as above before anything touches it: for the long
// recordings' sample and feature buffers, each allocated fresh from the system.
template <typename T> void reserve_huge(std::vector<T> & v, size_t n) {
    v.reserve(n);
    advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

} // namespace transcribe
