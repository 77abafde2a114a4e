#include "system_memory.h"

#include <cstdio>
#include <cstring>
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

} // namespace transcribe
