// transcribe-server's HTTP/1.1 and WebSocket layer, on Boost.Beast: a thread per connection (a request
// may run for minutes; the slow, the idle and the waiting each hold a thread, never the server), each
// phase under its own deadline (the TLS handshake and the headers, the body at a least average rate,
// every write, the idle time between keep-alive requests), the parser's header and body limits,
// Expect: 100-continue answered only for bodies within the limit, HTTPS and WSS through OpenSSL.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace transcribe_server {

struct HttpLimits {
    size_t max_header_bytes = 64 << 10; // 431 above (all header lines together; 8 KiB and 100 fields at most)
    size_t max_body_bytes   = 64 << 20; // 413 above, whatever the framing (Content-Length, chunked)
    double header_seconds   = 10;       // the TLS handshake and the request line and headers; 408 after
    double body_min_rate    = 16 << 10; // bytes/s averaged over the body once it has had header_seconds; 408 below
    double write_seconds    = 60;       // a response write the client does not take in; the connection closes
    double idle_seconds     = 5;        // between keep-alive requests
    int    max_requests     = 100;      // a connection's requests before it is closed
    int    max_connections  = 256;      // connections served at once; more are answered 503 and closed
    size_t max_ws_message   = 1 << 20;  // WebSocket messages longer than this are skipped (on_oversized)
};

struct HttpRequest {
    std::string                        method, target, path; // path: target without its query
    std::multimap<std::string, std::string> headers;         // names in lower case
    std::string                        body;
    std::string                        remote;               // address:port
    int                                fd = -1;              // the connection's socket, to watch for the peer leaving

    std::string header(const std::string & lower_name) const {
        const auto it = headers.find(lower_name);
        return it == headers.end() ? std::string() : it->second;
    }
};

// A response's body written as it is made (chunked): write() returns false once the client is gone.
class ChunkSink {
public:
    virtual ~ChunkSink() = default;
    virtual bool write(const std::string & bytes) = 0;
    // False once the peer has closed or reset the connection.
    virtual bool open() const = 0;
};

struct HttpResponse {
    int                                              status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string                                      content_type, body;
    std::function<void(ChunkSink &)>                 stream; // set: the body is streamed by it, chunked

    void set_header(const std::string & name, const std::string & value) { headers.emplace_back(name, value); }
    void set_content(std::string b, const std::string & type) { body = std::move(b), content_type = type; }
};

// A WebSocket connection as a handler sees it: messages in (text or binary), text messages out.
class WebSocketChannel {
public:
    enum class Read { Message, Oversized, Closed, Woken };
    virtual ~WebSocketChannel() = default;
    // The next whole message into OUT; Oversized when it ran past the limit (its bytes skipped); Woken
    // when wake() came first (a message half read stays in the channel for the next call).
    virtual Read read(std::string & out) = 0;
    virtual bool write(const std::string & text) = 0; // false once the connection is gone
    // Ends a read() waiting on the connection's thread; callable from any thread while the channel lives.
    virtual void wake() = 0;
};

struct HttpHandlers {
    // Before the body is read: a response here (status set) answers at once and the body is never read.
    std::function<bool(const HttpRequest &, HttpResponse &)> before_body;
    // The request with its body.
    std::function<void(const HttpRequest &, HttpResponse &)> handle;
    // A WebSocket upgrade request (after before_body let it through): true takes it, then runs the
    // connection through the channel; false leaves it to handle() (which answers it as HTTP).
    std::function<bool(const HttpRequest &)>                    accepts_websocket;
    std::function<void(const HttpRequest &, WebSocketChannel &)> websocket;
    // The subprotocol the upgrade's response names, of those the request offered ("": none named; a
    // browser that offered some refuses a response that names none).
    std::function<std::string(const HttpRequest &)>              websocket_protocol;
    // Responses the layer makes itself (400, 408, 413, 431, 503): the handlers' error shape.
    std::function<void(HttpResponse &, int status, const std::string & message)> error;
    // After each request: the request (body possibly unread), the response's status, milliseconds.
    std::function<void(const HttpRequest &, int status, double ms)> log;
};

struct TlsFiles {
    std::string cert, key; // PEM; both empty: plain HTTP
};

class HttpServer {
public:
    // Throws std::runtime_error where the certificate or key does not load.
    HttpServer(HttpLimits limits, HttpHandlers handlers, const TlsFiles & tls = {});
    ~HttpServer();

    // Binds and listens (port 0: any free port); the bound port, or -1 with *error set.
    int bind(const std::string & host, int port, std::string * error);
    // Accepts until stop(); returns once every connection has ended (or after GRACE_S more seconds).
    void run(double grace_s = 5);
    void stop(); // from any thread, a signal handler's watcher included
    bool tls() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace transcribe_server
