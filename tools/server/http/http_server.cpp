#include "http_server.h"

#include "connection_watch.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <map>
#include <stdexcept>
#include <thread>

namespace transcribe_server {

namespace net       = boost::asio;
namespace beast     = boost::beast;
namespace http      = beast::http;
namespace websocket = beast::websocket;
using tcp           = net::ip::tcp;
using Clock         = std::chrono::steady_clock;

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// One connection on a thread of its own: STREAM (TCP, or TLS over TCP) driven by this thread's own
// io_context, each operation under a deadline that cancels it (so a 408 can still be written).
template <typename Stream> class Connection {
public:
    static constexpr size_t kMaxFields = 100, kMaxLine = 8 << 10;

    Connection(net::io_context & ioc, Stream & stream, const HttpLimits & limits, const HttpHandlers & h, int fd,
               std::string remote)
        : ioc_(ioc), stream_(stream), limits_(limits), h_(h), fd_(fd), remote_(std::move(remote)) {}

    // Runs ASYNC_OP (which takes a completion handler) to completion or until SECONDS have passed.
    template <typename Op> beast::error_code timed(double seconds, Op && async_op) {
        net::steady_timer timer(ioc_);
        bool done = false, expired = false;
        beast::error_code result;
        timer.expires_after(std::chrono::microseconds(int64_t(std::max(0.0, seconds) * 1e6)));
        timer.async_wait([&](beast::error_code ec) {
            if (!ec && !done) {
                expired = true;
                beast::error_code ignored;
                beast::get_lowest_layer(stream_).socket().cancel(ignored);
            }
        });
        async_op([&](beast::error_code ec, std::size_t) {
            result = ec;
            done   = true;
            timer.cancel();
        });
        ioc_.restart();
        ioc_.run();
        return expired ? beast::error_code(beast::error::timeout) : result;
    }

    template <typename Message> bool send(Message & m) {
        return !timed(limits_.write_seconds, [&](auto && done) { http::async_write(stream_, m, done); });
    }

    bool send(HttpResponse & res, bool keep_alive) {
        http::response<http::string_body> m {http::int_to_status(unsigned(res.status)), 11};
        m.set(http::field::server, "transcribe");
        for (const auto & [k, v] : res.headers) {
            m.insert(k, v);
        }
        if (!res.content_type.empty()) {
            m.set(http::field::content_type, res.content_type);
        }
        m.body() = std::move(res.body);
        m.keep_alive(keep_alive);
        m.prepare_payload();
        return send(m);
    }

    void answer_error(int status, const std::string & message, const HttpRequest & req, Clock::time_point start) {
        HttpResponse res;
        h_.error(res, status, message);
        send(res, false);
        if (h_.log) {
            h_.log(req, status, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        }
    }

    // Requests until the client or a limit closes the connection.
    template <typename Upgrade> void serve(bool over_capacity, Upgrade && upgrade) {
        beast::flat_buffer buffer;
        for (int n = 0; n < limits_.max_requests; ++n) {
            http::request_parser<http::string_body> parser;
            parser.header_limit(std::uint32_t(std::min<size_t>(limits_.max_header_bytes, UINT32_MAX)));
            parser.body_limit(limits_.max_body_bytes);
            HttpRequest req;
            req.remote = remote_;
            req.fd     = fd_;
            const double header_s = limits_.header_seconds + (n > 0 ? limits_.idle_seconds : 0.0);
            beast::error_code ec = timed(header_s, [&](auto && done) { http::async_read_header(stream_, buffer, parser, done); });
            const Clock::time_point start = Clock::now();
            if (ec) {
                if (ec == http::error::body_limit) { // a Content-Length over the limit
                    answer_error(413, "upload larger than the limit", req, start);
                    drain(parser.content_length() ? *parser.content_length() : 0);
                } else if (ec == http::error::header_limit) {
                    answer_error(431, "request headers larger than " + std::to_string(limits_.max_header_bytes >> 10) + " KiB", req, start);
                } else if (ec == beast::error::timeout && parser.got_some()) {
                    answer_error(408, "request headers not received in time", req, start);
                } else if (ec == beast::error::timeout && n == 0) {
                    answer_error(408, "no request received in time", req, start);
                } else if (ec != http::error::end_of_stream && ec != beast::error::timeout && parser.got_some()) {
                    answer_error(400, "malformed request: " + ec.message(), req, start);
                }
                return;
            }
            const auto & head = parser.get();
            // Beast checks its header limit only while the header is incomplete in its buffer: a header
            // that arrives whole in one read is measured here.
            size_t header_bytes = head.target().size() + head.method_string().size() + 12, n_fields = 0, longest = 0;
            for (const auto & f : head) {
                const size_t line = f.name_string().size() + f.value().size() + 4;
                header_bytes += line;
                longest = std::max(longest, line);
                ++n_fields;
            }
            if (header_bytes > limits_.max_header_bytes || n_fields > kMaxFields || longest > kMaxLine) {
                answer_error(431, "request headers over " + std::to_string(limits_.max_header_bytes >> 10) + " KiB, a line over " +
                                      std::to_string(kMaxLine >> 10) + " KiB or more than " + std::to_string(kMaxFields) + " fields",
                             req, start);
                return;
            }
            req.method = std::string(head.method_string());
            req.target = std::string(head.target());
            req.path   = req.target.substr(0, req.target.find('?'));
            for (const auto & f : head) {
                req.headers.emplace(lower(std::string(f.name_string())), std::string(f.value()));
            }
            if (over_capacity) {
                answer_error(503, "server busy: too many connections, retry later", req, start);
                return;
            }
            HttpResponse res;
            if (h_.before_body && h_.before_body(req, res)) {
                const int status = res.status;
                send(res, false); // the body, if any, is never parsed: the connection cannot go on
                if (h_.log) {
                    h_.log(req, status, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
                }
                drain(unread(parser, buffer));
                return;
            }
            if (websocket::is_upgrade(head) && h_.accepts_websocket && h_.accepts_websocket(req)) {
                upgrade(parser.release(), req, buffer);
                return;
            }
            if (head.has_content_length() && *parser.content_length() > limits_.max_body_bytes) {
                answer_error(413, "upload larger than the limit", req, start);
                drain(unread(parser, buffer));
                return;
            }
            if (lower(req.header("expect")) == "100-continue" && !parser.is_done()) {
                http::response<http::empty_body> cont {http::status::continue_, 11};
                if (!send(cont)) {
                    return;
                }
            }
            if (!read_body(parser, buffer, req, start)) {
                return;
            }
            req.body = std::move(parser.get().body());
            const bool keep_alive = parser.get().keep_alive() && n + 1 < limits_.max_requests;
            h_.handle(req, res);
            const int status = res.status;
            bool ok;
            if (res.stream) {
                ok = stream_response(res);
            } else {
                ok = send(res, keep_alive);
            }
            if (h_.log) {
                h_.log(req, status, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
            }
            if (!ok || !keep_alive || res.stream) {
                return;
            }
        }
    }

private:
    // Bytes of the body not yet received (a chunked body: as much as the limit allows).
    size_t unread(http::request_parser<http::string_body> & parser, const beast::flat_buffer & buffer) const {
        if (parser.is_done()) {
            return 0;
        }
        const size_t have = buffer.size();
        if (parser.content_length()) {
            return *parser.content_length() > have ? size_t(*parser.content_length()) - have : 0;
        }
        return parser.chunked() ? limits_.max_body_bytes : 0;
    }

    // After an answer given before the body: up to N more bytes read and dropped (for a short while),
    // so a client still sending gets to read the answer instead of a reset.
    void drain(size_t n) {
        if (n == 0 || n > 4 * limits_.max_body_bytes) {
            return;
        }
        std::vector<char> scratch(64 << 10);
        const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                          std::chrono::duration<double>(limits_.header_seconds));
        while (n > 0 && Clock::now() < until) {
            size_t got = 0;
            const double left = std::chrono::duration<double>(until - Clock::now()).count();
            const beast::error_code ec = timed(left, [&](auto && done) {
                stream_.async_read_some(net::buffer(scratch.data(), std::min(n, scratch.size())),
                                        [&got, done](beast::error_code e, std::size_t k) mutable {
                                            got = k;
                                            done(e, k);
                                        });
            });
            n -= std::min(n, got);
            if (ec) {
                return;
            }
        }
    }

    // The body, piece by piece: once it has had header_seconds, its average rate must stay above the
    // least one (the time left grows with every byte that comes).
    bool read_body(http::request_parser<http::string_body> & parser, beast::flat_buffer & buffer, const HttpRequest & req,
                   Clock::time_point start) {
        const Clock::time_point begin = Clock::now();
        size_t received = 0;
        while (!parser.is_done()) {
            double allowed = 3600.0 * 24;
            if (limits_.body_min_rate > 0) {
                allowed = std::max(limits_.header_seconds, double(received) / limits_.body_min_rate);
            }
            const double left = allowed - std::chrono::duration<double>(Clock::now() - begin).count();
            size_t got = 0;
            const beast::error_code ec = left <= 0 ? beast::error_code(beast::error::timeout) : timed(left, [&](auto && done) {
                http::async_read_some(stream_, buffer, parser, [&got, done](beast::error_code e, std::size_t n) mutable {
                    got = n;
                    done(e, n);
                });
            });
            received += got;
            if (ec == http::error::body_limit) {
                answer_error(413, "upload larger than the limit", req, start);
                drain(unread(parser, buffer));
                return false;
            }
            if (ec == beast::error::timeout) {
                answer_error(408, "request body too slow", req, start);
                return false;
            }
            if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) {
                return false; // the client went away mid-body
            }
            if (ec) {
                answer_error(400, "malformed request body: " + ec.message(), req, start);
                return false;
            }
        }
        return true;
    }

    class Sink final : public ChunkSink {
    public:
        explicit Sink(Connection & c) : c_(c) {}
        bool write(const std::string & bytes) override {
            if (bytes.empty()) {
                return open();
            }
            return !c_.timed(c_.limits_.write_seconds, [&](auto && done) {
                net::async_write(c_.stream_, http::make_chunk(net::buffer(bytes)), done);
            });
        }
        bool open() const override { return !ConnectionWatch(c_.fd_).closed(); }

    private:
        Connection & c_;
    };

    bool stream_response(HttpResponse & res) {
        http::response<http::empty_body> head {http::int_to_status(unsigned(res.status)), 11};
        head.set(http::field::server, "transcribe");
        for (const auto & [k, v] : res.headers) {
            head.insert(k, v);
        }
        head.set(http::field::content_type, res.content_type);
        head.chunked(true);
        head.keep_alive(false);
        http::response_serializer<http::empty_body> sr {head};
        if (timed(limits_.write_seconds, [&](auto && done) { http::async_write_header(stream_, sr, done); })) {
            return false;
        }
        Sink sink(*this);
        res.stream(sink);
        return !timed(limits_.write_seconds, [&](auto && done) { net::async_write(stream_, http::make_chunk_last(), done); });
    }

    net::io_context &    ioc_;
    Stream &             stream_;
    const HttpLimits &   limits_;
    const HttpHandlers & h_;
    int                  fd_;
    std::string          remote_;
};

// The WebSocket channel over a connection's stream, after the upgrade. One read stays outstanding
// across read() calls, so wake() (from any thread) can end a read() without disturbing the frame it
// waits for; writes go out beside it (Beast allows one read and one write at once on a stream).
template <typename Stream> class Channel final : public WebSocketChannel {
public:
    Channel(net::io_context & ioc, websocket::stream<Stream &> & ws, size_t max_message, double write_seconds)
        : ioc_(ioc), ws_(ws), max_(max_message), write_seconds_(write_seconds) {}

    ~Channel() override {
        // An outstanding read and posted wakes hold references into this object: let them finish.
        if (reading_) {
            beast::error_code ignored;
            beast::get_lowest_layer(ws_).socket().cancel(ignored);
            run_until([&] { return read_done_; });
        }
        ioc_.restart();
        ioc_.poll();
    }

    Read read(std::string & out) override {
        for (;;) {
            if (!reading_) {
                // No deadline: a realtime client may be silent for as long as it likes (pings keep it honest).
                reading_ = true, read_done_ = false;
                piece_.clear();
                ws_.async_read_some(piece_, max_ + 1, [this](beast::error_code ec, std::size_t) {
                    read_ec_ = ec, read_done_ = true;
                });
            }
            run_until([&] { return read_done_ || woken_; });
            if (!read_done_) {
                woken_ = false; // the read stays outstanding for the next call
                return Read::Woken;
            }
            reading_ = false;
            if (read_ec_) {
                return Read::Closed;
            }
            if (!oversized_) {
                if (message_.size() + piece_.size() > max_) {
                    oversized_ = true;
                    message_.clear();
                } else {
                    message_.append(static_cast<const char *>(piece_.data().data()), piece_.size());
                }
            }
            if (ws_.is_message_done()) {
                const bool oversized = oversized_;
                oversized_ = false;
                out = std::move(message_);
                message_.clear();
                return oversized ? Read::Oversized : Read::Message;
            }
        }
    }

    // Its own deadline rather than Connection::timed: that one runs the io_context until nothing is left to
    // do, and here the channel's read stays outstanding, so it would wait for the client's next message.
    bool write(const std::string & text) override {
        if (broken_) {
            return false;
        }
        bool done = false, timer_done = false, expired = false;
        beast::error_code result;
        net::steady_timer timer(ioc_);
        timer.expires_after(std::chrono::microseconds(int64_t(write_seconds_ * 1e6)));
        timer.async_wait([&](beast::error_code ec) {
            timer_done = true;
            if (!ec && !done) {
                expired = true;
                beast::error_code ignored;
                beast::get_lowest_layer(ws_).socket().cancel(ignored); // the outstanding read ends with it
            }
        });
        ws_.text(true);
        ws_.async_write(net::buffer(text), [&](beast::error_code ec, std::size_t) {
            result = ec;
            done   = true;
            timer.cancel();
        });
        run_until([&] { return done && timer_done; });
        broken_ = expired || result;
        return !broken_;
    }

    void wake() override {
        net::post(ioc_, [this] { woken_ = true; });
    }

private:
    // Runs this thread's io_context until DONE() holds.
    template <typename Done> void run_until(Done && done) {
        while (!done()) {
            if (ioc_.stopped()) {
                ioc_.restart();
            }
            ioc_.run_one();
        }
    }

    net::io_context &             ioc_;
    websocket::stream<Stream &> & ws_;
    size_t                        max_;
    double                        write_seconds_;
    beast::flat_buffer            piece_;
    beast::error_code             read_ec_;
    std::string                   message_; // the pieces of the message being read
    bool                          reading_ = false, read_done_ = false, woken_ = false, oversized_ = false, broken_ = false;
};

template <typename Stream>
void serve_stream(net::io_context & ioc, Stream & stream, const HttpLimits & limits, const HttpHandlers & h, int fd,
                  const std::string & remote, bool over_capacity) {
    Connection<Stream> c(ioc, stream, limits, h, fd, remote);
    c.serve(over_capacity, [&](http::request<http::string_body> && head, const HttpRequest & req, beast::flat_buffer & buffer) {
        (void) buffer; // a client waits for the 101 before its first frame
        websocket::stream<Stream &> ws(stream);
        ws.read_message_max(0); // unlimited here: Channel::read skips what runs past max_ws_message
        ws.auto_fragment(false);
        const std::string protocol = h.websocket_protocol ? h.websocket_protocol(req) : std::string();
        if (!protocol.empty()) {
            ws.set_option(websocket::stream_base::decorator([protocol](websocket::response_type & r) {
                r.set(http::field::sec_websocket_protocol, protocol);
            }));
        }
        if (c.timed(limits.header_seconds, [&](auto && done) { ws.async_accept(head, [done](beast::error_code e) mutable { done(e, 0); }); })) {
            return;
        }
        {
            Channel<Stream> channel(ioc, ws, limits.max_ws_message, limits.write_seconds);
            h.websocket(req, channel);
        }
        c.timed(limits.write_seconds, [&](auto && done) { ws.async_close(websocket::close_code::normal, [done](beast::error_code e) mutable { done(e, 0); }); });
    });
}

} // namespace

struct HttpServer::Impl {
    HttpLimits                         limits;
    HttpHandlers                       handlers;
    std::unique_ptr<net::ssl::context> ssl;
    net::io_context                    ioc;
    tcp::acceptor                      acceptor {ioc};
    std::mutex                         mutex;
    std::condition_variable            ended;
    int                                live = 0;
    uint64_t                           next_id = 0;
    std::map<uint64_t, int>            fds; // the live connections' sockets, shut down when stopping

    void accept_next() {
        acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
            if (ec) {
                if (acceptor.is_open()) {
                    accept_next();
                }
                return;
            }
            beast::error_code ignored;
            const tcp::endpoint peer = socket.remote_endpoint(ignored);
            const std::string remote = peer.address().to_string(ignored) + ":" + std::to_string(peer.port());
            const auto protocol = acceptor.local_endpoint(ignored).protocol();
            const int fd = socket.release(ignored);
            bool over;
            uint64_t id;
            {
                std::lock_guard<std::mutex> lock(mutex);
                over = live >= limits.max_connections;
                ++live;
                id = ++next_id;
                fds[id] = fd;
            }
            std::thread([this, id, fd, protocol, remote, over] {
                connection(fd, protocol, remote, over);
                finish(id);
            }).detach();
            accept_next();
        });
    }

    void connection(int fd, tcp protocol, const std::string & remote, bool over) {
        try {
            net::io_context ioc1;
            beast::tcp_stream tcp_stream(ioc1);
            tcp_stream.socket().assign(protocol, fd);
            if (ssl) {
                beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp_stream), *ssl);
                Connection<beast::ssl_stream<beast::tcp_stream>> c(ioc1, tls, limits, handlers, fd, remote);
                if (!c.timed(limits.header_seconds,
                             [&](auto && done) { tls.async_handshake(net::ssl::stream_base::server, [done](beast::error_code e) mutable { done(e, 0); }); })) {
                    serve_stream(ioc1, tls, limits, handlers, fd, remote, over);
                    // close_notify, waiting a moment for the peer's (a client that never answers is not waited for)
                    c.timed(2, [&](auto && done) { tls.async_shutdown([done](beast::error_code e) mutable { done(e, 0); }); });
                }
                return;
            }
            serve_stream(ioc1, tcp_stream, limits, handlers, fd, remote, over);
            beast::error_code ignored;
            tcp_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
        } catch (const std::exception &) {
            // a connection's failure ends that connection only
        }
    }

    void finish(uint64_t id) {
        std::lock_guard<std::mutex> lock(mutex);
        fds.erase(id);
        --live;
        ended.notify_all();
    }
};

HttpServer::HttpServer(HttpLimits limits, HttpHandlers handlers, const TlsFiles & tls) : impl_(std::make_unique<Impl>()) {
    impl_->limits   = limits;
    impl_->handlers = std::move(handlers);
    if (!tls.cert.empty() || !tls.key.empty()) {
        impl_->ssl = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
        impl_->ssl->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                                net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
        beast::error_code ec;
        impl_->ssl->use_certificate_chain_file(tls.cert, ec);
        if (ec) {
            throw std::runtime_error("TLS certificate " + tls.cert + ": " + ec.message());
        }
        impl_->ssl->use_private_key_file(tls.key, net::ssl::context::pem, ec);
        if (ec) {
            throw std::runtime_error("TLS key " + tls.key + ": " + ec.message());
        }
    }
}

HttpServer::~HttpServer() = default;

bool HttpServer::tls() const { return impl_->ssl != nullptr; }

int HttpServer::bind(const std::string & host, int port, std::string * error) {
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(host, ec);
    if (ec) {
        *error = "bad address " + host + ": " + ec.message();
        return -1;
    }
    const tcp::endpoint at(address, std::uint16_t(port));
    tcp::acceptor & a = impl_->acceptor;
    if (a.open(at.protocol(), ec) || a.set_option(net::socket_base::reuse_address(true), ec) || a.bind(at, ec) ||
        a.listen(1024, ec)) {
        *error = "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message();
        return -1;
    }
    return a.local_endpoint().port();
}

void HttpServer::run(double grace_s) {
    impl_->accept_next();
    impl_->ioc.run();
    std::unique_lock<std::mutex> lock(impl_->mutex);
    // Requests in flight get GRACE_S to finish; then every connection is shut down (a run notices its
    // client gone and stops) and ends.
    if (!impl_->ended.wait_for(lock, std::chrono::duration<double>(grace_s), [&] { return impl_->live == 0; })) {
        for (const auto & [id, fd] : impl_->fds) {
            ::shutdown(fd, SHUT_RDWR);
        }
        impl_->ended.wait(lock, [&] { return impl_->live == 0; });
    }
}

void HttpServer::stop() {
    net::post(impl_->ioc, [this] {
        beast::error_code ignored;
        impl_->acceptor.close(ignored);
    });
}

} // namespace transcribe_server
