// What a connection may send while its request is read, enforced where cpp-httplib reads the socket.
// Debian's cpp-httplib (0.11, a shared library) caps neither the size nor the number of header lines,
// has no deadline for a whole request (its read timeout is per recv, which a byte every few seconds
// never trips), and counts a chunked body against no limit. Its reads go through the C library's
// `recv` and its waits through `poll`; this file defines both for the process (the dynamic linker binds
// httplib's calls to them), which check the connection the calling server thread is serving, then read
// or wait.
#pragma once

#include <httplib.h>

#include <cstddef>

namespace transcribe_server {

struct ReadLimits {
    size_t header_bytes   = 64 << 10; // request line and headers together
    size_t header_line    = 8 << 10;
    double header_seconds = 10;       // for all of them
    size_t body_bytes     = 64 << 20; // whatever the framing (chunked, multipart)
    double body_grace_s   = 10;       // after this long, the body must have come at least this fast:
    double body_min_rate  = 16 << 10; // bytes per second, on average
};

// A thread pool whose threads read each connection under `limits` (one request per connection: the
// server turns keep-alive off, so a connection's reads are one request's).
httplib::TaskQueue * guarded_pool(size_t threads, const ReadLimits & limits);

// Whether the calling server thread's connection was refused by the read limits (which answered it and
// logged it; httplib's own error answer after that never reaches the client).
bool read_refused();

} // namespace transcribe_server
