#include "connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace transcribe_server {

namespace {

bool endpoint_is(const sockaddr_storage & sa, const std::string & addr, int port) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (sa.ss_family == AF_INET) {
        const auto * in = reinterpret_cast<const sockaddr_in *>(&sa);
        inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
        return ntohs(in->sin_port) == port && (addr.empty() || addr == buf);
    }
    if (sa.ss_family == AF_INET6) {
        const auto * in6 = reinterpret_cast<const sockaddr_in6 *>(&sa);
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
        return ntohs(in6->sin6_port) == port && (addr.empty() || addr == buf);
    }
    return false;
}

} // namespace

ConnectionWatch::ConnectionWatch(const std::string & remote_addr, int remote_port, int local_port) {
    DIR * dir = opendir("/proc/self/fd");
    if (!dir) {
        return;
    }
    while (dirent * e = readdir(dir)) {
        const int fd = std::atoi(e->d_name);
        struct stat st {};
        if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
            continue;
        }
        sockaddr_storage peer {}, local {};
        socklen_t pl = sizeof peer, ll = sizeof local;
        if (getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &pl) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr *>(&local), &ll) == 0 &&
            endpoint_is(peer, remote_addr, remote_port) && endpoint_is(local, "", local_port)) {
            fd_ = fd;
            break;
        }
    }
    closedir(dir);
}

bool ConnectionWatch::closed() const {
    if (fd_ < 0) {
        return false;
    }
    pollfd p {fd_, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

} // namespace transcribe_server
