// Notices when an HTTP client has gone away while its request is still being processed: the peer's
// FIN or RST on the connection's socket (poll's POLLRDHUP / POLLHUP), whatever is still unread.
#pragma once

namespace transcribe_server {

class ConnectionWatch {
public:
    explicit ConnectionWatch(int fd) : fd_(fd) {}
    // True once the peer closed or reset the connection.
    bool closed() const;

private:
    int fd_;
};

} // namespace transcribe_server
