#include "connection_watch.h"

#include <poll.h>

namespace transcribe_server {

bool ConnectionWatch::closed() const {
    if (fd_ < 0) {
        return false;
    }
    pollfd p {fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

} // namespace transcribe_server
