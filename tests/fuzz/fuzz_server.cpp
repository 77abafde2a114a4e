// libFuzzer: transcribe-server's request handling, multipart parsing included. The input is sent as
// the body of a multipart POST to /v1/audio/transcriptions on an in-process server on loopback; the
// server must answer every request with a well-formed HTTP status, and keep answering.
#include "transcribe.h"

#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using namespace transcribe_server;

namespace {

ServerState * g_state  = nullptr;
HttpServer *  g_server = nullptr;
int           g_port   = 0;

void quiet(transcribe_log_level, const char *, void *) {}

std::string exchange(const std::string & request) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr {};
    addr.sin_family      = AF_INET;
    addr.sin_port        = htons(uint16_t(g_port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // libFuzzer's timeout alarm (SIGALRM, installed without SA_RESTART) interrupts these calls now and
    // then: an EINTR is retried, never taken for the server's answer (the open finding of the first
    // runs was exactly that, the harness reading half a response).
    int rc;
    while ((rc = connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr)) != 0 && errno == EINTR) {
    }
    if (rc != 0 && errno != EISCONN) {
        close(fd);
        return "";
    }
    for (size_t sent = 0; sent < request.size();) {
        const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        sent += size_t(n);
    }
    // No half-close (the server takes the peer's FIN for a client gone): "Connection: close" makes the
    // server close after its response, which ends the read below.
    std::string response;
    char buf[4096];
    for (;;) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        response.append(buf, size_t(n));
    }
    close(fd);
    return response;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    transcribe_log_set(quiet, nullptr);
    const char * model = std::getenv("TRANSCRIBE_FUZZ_MODEL");
    g_state = new ServerState();
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend = TRANSCRIBE_BACKEND_CPU;
    if (transcribe_model_load(model ? model : TRANSCRIBE_FUZZ_MODEL_DEFAULT, &lp, &g_state->model) != TRANSCRIBE_OK) {
        std::abort();
    }
    transcribe_model_get_info(g_state->model, &g_state->info);
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = 1;
    g_state->pool = std::make_unique<SessionPool>(g_state->model, 1, 4, sp);
    g_state->max_new_tokens   = 4;
    g_state->max_upload_bytes = 1 << 20;
    HttpLimits limits;
    limits.max_body_bytes = g_state->max_upload_bytes + (64 << 10);
    g_server = new HttpServer(limits, make_handlers(*g_state));
    std::string error;
    g_port = g_server->bind("127.0.0.1", 0, &error);
    if (g_port < 0) {
        std::abort();
    }
    std::thread([] { g_server->run(); }).detach(); // the socket listens already: connects wait in its backlog
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string body(reinterpret_cast<const char *>(data), size);
    const std::string request = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n"
                                "Content-Type: multipart/form-data; boundary=fuzzboundary\r\n"
                                "Content-Length: " + std::to_string(size) + "\r\n\r\n" + body;
    const std::string response = exchange(request);
    if (response.compare(0, 9, "HTTP/1.1 ") != 0) {
        __builtin_trap(); // every request gets an HTTP answer
    }
    const int status = std::atoi(response.c_str() + 9);
    if (status != 200 && status != 400 && status != 413 && status != 415 && status != 503) {
        __builtin_trap(); // no 500 for bad input
    }
    return 0;
}
