#include "system_memory.h"

#include <cstdio>
#include <cstdint>
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <unistd.h>

namespace transcribe {

size_t available_memory_bytes() {
    if (FILE * f = std::fopen("/proc/meminfo", "r")) {
        char line[256];
        unsigned long long kb = 0;
        bool found = false;
        while (!found && std::fgets(line, sizeof(line), f)) {
            found = std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
        }
        std::fclose(f);
        if (found) {
            return size_t(kb) * 1024;
        }
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

void advise_huge_pages(void * p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t lo = (uintptr_t(p) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    const uintptr_t hi = (uintptr_t(p) + n) / kHugePageBytes * kHugePageBytes;
    if (hi > lo) {
        madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);
    }
#else
    (void) p;
    (void) n;
#endif
}

} // namespace transcribe
