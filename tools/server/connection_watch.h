// Notices when an HTTP client has gone away while its request is still being processed.
// cpp-httplib (0.11) does not expose the connection's socket, so the socket is found once per request
// by matching the peer and local addresses among the process's open sockets.
#pragma once

#include <string>

namespace transcribe_server {

class ConnectionWatch {
public:
    ConnectionWatch(const std::string & remote_addr, int remote_port, int local_port);
    // True once the peer closed or reset the connection.
    bool closed() const;

private:
    int fd_ = -1;
};

} // namespace transcribe_server
