#include "read_guard.h"

#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace transcribe_server {

namespace {

using Clock = std::chrono::steady_clock;
using RecvFn = ssize_t (*)(int, void *, size_t, int);
using PollFn = int (*)(pollfd *, nfds_t, int);

RecvFn real_recv() {
    static const auto fn = reinterpret_cast<RecvFn>(dlsym(RTLD_NEXT, "recv"));
    return fn;
}
PollFn real_poll() {
    static const auto fn = reinterpret_cast<PollFn>(dlsym(RTLD_NEXT, "poll"));
    return fn;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One connection's reading, on the thread serving it.
class Guard {
public:
    explicit Guard(const ReadLimits & limits) : limits_(limits) {}

    bool refused() const { return refused_; }

    // httplib waits for each read of a request with poll, for its own read timeout: a client that stops
    // in the middle of its headers would have httplib's 400 after that timeout, whatever
    // --header-timeout-s says. Once the headers have begun, the wait runs to the headers' deadline
    // instead, and a client silent until then has its 408. (Before the first byte the waits are
    // httplib's keep-alive polling, which closes a connection that never speaks; after the headers,
    // the body's reads keep httplib's timeout and the rate check below.)
    int wait(pollfd * fds, int timeout_ms) {
        if (refused_ || !in_header_ || header_ == 0 || timeout_ms <= 0) {
            return real_poll()(fds, 1, timeout_ms);
        }
        const double left = limits_.header_seconds - seconds_since(start_);
        const int    r    = real_poll()(fds, 1, std::max(0, int(std::ceil(left * 1000.0))));
        if (r != 0) {
            return r;
        }
        refuse_slow_headers(fds[0].fd);
        return 0; // httplib's read then fails; its own answer goes nowhere (see read_refused)
    }

    ssize_t read(int fd, void * buf, size_t n) {
        if (refused_) {
            errno = ECONNRESET;
            return -1;
        }
        if (!started_) {
            started_ = true;
            start_   = Clock::now();
        }
        if (in_header_ && seconds_since(start_) > limits_.header_seconds) {
            return refuse_slow_headers(fd);
        }
        if (!in_header_) {
            const double t = seconds_since(body_start_);
            if (t > limits_.body_grace_s && double(body_) / t < limits_.body_min_rate) {
                return refuse(fd, 408, "Request Timeout", "the request body is arriving too slowly");
            }
        }
        const ssize_t k = real_recv()(fd, buf, n, 0);
        if (k <= 0) {
            return k;
        }
        const char * p = static_cast<const char *>(buf);
        for (ssize_t i = 0; i < k; ++i) {
            if (!in_header_) {
                body_ += size_t(k - i);
                break;
            }
            ++header_;
            if (p[i] == '\n') {
                if (line_ == 0) { // an empty line: the headers end here
                    in_header_  = false;
                    body_start_ = Clock::now();
                }
                line_ = 0;
            } else if (p[i] != '\r') {
                ++line_;
            }
            if (line_ > limits_.header_line || header_ > limits_.header_bytes) {
                return refuse(fd, 431, "Request Header Fields Too Large",
                              "request headers over " + std::to_string(limits_.header_bytes >> 10) + " KiB in all or " +
                                  std::to_string(limits_.header_line >> 10) + " KiB a line");
            }
        }
        if (body_ > limits_.body_bytes) {
            return refuse(fd, 413, "Payload Too Large",
                          "upload larger than " + std::to_string(limits_.body_bytes >> 20) + " MiB");
        }
        return k;
    }

private:
    ssize_t refuse_slow_headers(int fd) {
        return refuse(fd, 408, "Request Timeout", "the request headers took longer than the server allows");
    }

    // Answers with STATUS in OpenAI's error shape, lets the client read it, and fails the read (httplib
    // then drops the connection without answering again).
    ssize_t refuse(int fd, int status, const char * reason, const std::string & message) {
        refused_ = true;
        const std::string body = "{\"error\":{\"message\":\"" + message + "\",\"type\":\"invalid_request_error\",\"param\":null,"
                                 "\"code\":" + std::to_string(status) + "}}";
        const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                                 "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n";
        const std::string all = head + body;
        (void) send(fd, all.data(), all.size(), MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        // Read what the client still sends for a moment, so closing does not reset the connection before
        // it has read the answer.
        char sink[4096];
        const auto until = Clock::now() + std::chrono::milliseconds(300);
        timeval tv {0, 50000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        while (Clock::now() < until && real_recv()(fd, sink, sizeof sink, 0) > 0) {
        }
        std::fprintf(stderr, "transcribe-server: - - %d in=%zu audio_s=- ms=%.1f (%s)\n", status, header_ + body_,
                     1000.0 * seconds_since(start_), message.c_str());
        errno = ECONNRESET;
        return -1;
    }

    ReadLimits        limits_;
    bool              started_ = false, in_header_ = true, refused_ = false;
    Clock::time_point start_, body_start_;
    size_t            header_ = 0, line_ = 0, body_ = 0;
};

thread_local Guard * t_guard = nullptr;

class GuardedPool final : public httplib::TaskQueue {
public:
    GuardedPool(size_t threads, const ReadLimits & limits) : pool_(threads), limits_(limits) {}
    void enqueue(std::function<void()> fn) override {
        const ReadLimits limits = limits_;
        pool_.enqueue([fn = std::move(fn), limits] {
            Guard guard(limits);
            t_guard = &guard;
            fn();
            t_guard = nullptr;
        });
    }
    void shutdown() override { pool_.shutdown(); }

private:
    httplib::ThreadPool pool_;
    ReadLimits          limits_;
};

} // namespace

httplib::TaskQueue * guarded_pool(size_t threads, const ReadLimits & limits) { return new GuardedPool(threads, limits); }

bool read_refused() { return t_guard && t_guard->refused(); }

} // namespace transcribe_server

// The process's recv and poll: a server thread's plain reads of its connection, and its waits to read
// one socket, go through the guard; everything else (other threads, peeks, flags, other waits) goes
// straight to the C library.
extern "C" ssize_t recv(int fd, void * buf, size_t n, int flags) {
    if (transcribe_server::t_guard && flags == 0) {
        return transcribe_server::t_guard->read(fd, buf, n);
    }
    return transcribe_server::real_recv()(fd, buf, n, flags);
}

// glibc declares poll's FDS write-only (for _FORTIFY_SOURCE), so GCC takes reading the caller's events
// for a read of uninitialised memory.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
extern "C" int poll(pollfd * fds, nfds_t n, int timeout_ms) {
    if (transcribe_server::t_guard && n == 1 && fds[0].events == POLLIN) {
        return transcribe_server::t_guard->wait(fds, timeout_ms);
    }
    return transcribe_server::real_poll()(fds, n, timeout_ms);
}
