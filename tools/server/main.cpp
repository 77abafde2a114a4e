// transcribe-server: an OpenAI-compatible transcription endpoint over one loaded model.
#include "transcribe.h"

#include "read_guard.h"
#include "server.h"

#include "../common/diarize_option.h"
#include "../common/draft_option.h"
#include "../common/vad_options.h"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace transcribe_server;

namespace {

// Set by SIGINT / SIGTERM. The server is stopped from a thread of its own: httplib's stop() does
// nothing before the listening loop has started, so a signal that comes early must be acted on again.
std::atomic<bool> g_stop {false};
void on_signal(int) { g_stop = true; }

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-server: OpenAI-compatible speech-to-text over HTTP"};
    std::string model_path, host = "127.0.0.1", backend_name = "auto", kv_name = "f16";
    int port = 8080, threads = 0, parallel = 1, queue = 16, max_upload_mb = 64, max_new_tokens = 256;
    app.add_option("-m,--model", model_path, "model file (GGUF)")->required();
    app.add_option("--host", host, "address to listen on");
    app.add_option("--port", port, "port to listen on (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
    app.add_option("--threads", threads,
                   "CPU threads (default: all cores, shared by the batch; divided among sessions for models that do not batch)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--parallel", parallel,
                   "requests transcribed at once: decoded together in one session's steps where the model batches "
                   "(LLM decoders), else a session each")
        ->check(CLI::Range(1, 64));
    app.add_option("--queue", queue, "requests that may wait for a session before 503")->check(CLI::NonNegativeNumber);
    app.add_option("--max-upload-mb", max_upload_mb, "largest accepted upload, in MiB (413 above)")->check(CLI::PositiveNumber);
    app.add_option("--max-new-tokens", max_new_tokens, "token budget per piece of audio")->check(CLI::PositiveNumber);
    app.add_option("--backend", backend_name, "backend: auto, cpu, cuda, vulkan, metal");
    app.add_option("--kv-type", kv_name, "KV cache type: f16 or f32")->check(CLI::IsMember({"f16", "f32"}));
    std::string api_key, cors_origin;
    double header_timeout_s = 10, body_min_kbps = 16, max_audio_s = 1800;
    app.add_option("--max-audio-s", max_audio_s, "refuse audio longer than this many seconds, 413 (default 30 min; 0: no limit)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--header-timeout-s", header_timeout_s, "time a client has to send its request headers (408 after)")
        ->check(CLI::PositiveNumber);
    app.add_option("--body-min-kbps", body_min_kbps, "slowest average upload accepted once the body has had --header-timeout-s, KiB/s (408 below)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--api-key", api_key, "require \"Authorization: Bearer KEY\" on every route but /health "
                                         "(default: $TRANSCRIBE_API_KEY)");
    app.add_option("--cors-origin", cors_origin, "allow browser requests from ORIGIN (answers CORS preflights)");
    transcribe_tools::VadOptions vad;
    vad.add_to(app);
    transcribe_tools::DraftOption draft;
    draft.add_to(app);
    transcribe_tools::DiarizeOption diarize;
    diarize.add_to(app);
    CLI11_PARSE(app, argc, argv);

    // Freed after the state: the sessions (which run them) go first.
    std::unique_ptr<transcribe_model, void (*)(transcribe_model *)> draft_model(nullptr, transcribe_model_free);
    std::unique_ptr<transcribe_diarizer, void (*)(transcribe_diarizer *)> diarizer(nullptr, transcribe_diarizer_free);
    ServerState st;
    if (api_key.empty() && std::getenv("TRANSCRIBE_API_KEY")) {
        api_key = std::getenv("TRANSCRIBE_API_KEY");
    }
    st.api_key     = api_key;
    st.cors_origin = cors_origin;
    st.max_new_tokens = max_new_tokens;
    transcribe_load_params lp = transcribe_load_params_init();
    if (transcribe_backend_from_name(backend_name.c_str(), &lp.backend) != TRANSCRIBE_OK ||
        transcribe_model_load(model_path.c_str(), &lp, &st.model) != TRANSCRIBE_OK) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", transcribe_last_error());
        return 1;
    }
    transcribe_model_get_info(st.model, &st.info);
    std::string draft_error;
    transcribe_model * loaded_draft = nullptr;
    if (!draft.load(st.model, lp, &loaded_draft, &draft_error)) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", draft_error.c_str());
        transcribe_model_free(st.model);
        return 1;
    }
    draft_model.reset(loaded_draft);
    st.draft      = loaded_draft;
    transcribe_run_params diarize_rp = transcribe_run_params_init();
    transcribe_diarizer * loaded_diarizer = nullptr;
    if (!diarize.load(threads, diarize_rp, &loaded_diarizer, &draft_error)) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", draft_error.c_str());
        transcribe_model_free(st.model);
        return 1;
    }
    diarizer.reset(loaded_diarizer);
    st.diarizer       = loaded_diarizer;
    st.diarize_params = diarize_rp.diarize_params;
    st.vad_params = vad.params;
    if (!vad.load(&st.vad)) {
        std::fprintf(stderr, "transcribe-server: error: VAD model: %s\n", transcribe_last_error());
        transcribe_model_free(st.model);
        return 1;
    }
    transcribe_session_params sp = transcribe_session_params_init();
    // The batch gets every core; sessions of a model that does not batch get a share each (the pool
    // falls back to those when the shared session reports it does not batch).
    sp.n_threads = threads > 0 ? threads : std::max(1, int(std::thread::hardware_concurrency()));
    sp.kv_type   = kv_name == "f32" ? TRANSCRIBE_KV_F32 : TRANSCRIBE_KV_F16;
    try {
        st.pool = std::make_unique<SessionPool>(st.model, parallel, queue, sp, threads <= 0);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", e.what());
        transcribe_vad_model_free(st.vad);
        transcribe_model_free(st.model);
        return 1;
    }

    httplib::Server svr;
    // HTTP workers for the running and the waiting requests, plus plenty for health checks, 503s and
    // clients too slow to finish their request (each is cut off by the read limits, meanwhile it holds
    // a thread, not the server).
    const int workers = parallel + queue + 64;
    st.max_upload_bytes = size_t(max_upload_mb) << 20;
    st.max_audio_s      = max_audio_s;
    ReadLimits limits;
    limits.header_seconds = header_timeout_s;
    limits.body_grace_s   = header_timeout_s;
    limits.body_min_rate  = body_min_kbps * 1024;
    limits.body_bytes     = st.max_upload_bytes + (64 << 10); // multipart framing and chunk sizes on top
    svr.new_task_queue = [workers, limits] { return guarded_pool(size_t(workers), limits); };
    svr.set_keep_alive_max_count(1); // one request a connection: the read limits are per connection
    install_routes(svr, st);
    int listen_fd = -1; // the socket httplib binds, to raise its backlog once it listens
    svr.set_socket_options([&listen_fd](socket_t sock) {
        httplib::default_socket_options(sock);
        listen_fd = int(sock);
    });

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    int bound = port;
    if (port == 0) {
        bound = svr.bind_to_any_port(host.c_str());
    } else if (!svr.bind_to_port(host.c_str(), port)) {
        bound = -1;
    }
    if (bound < 0) {
        std::fprintf(stderr, "transcribe-server: error: cannot listen on %s:%d\n", host.c_str(), port);
        st.pool.reset();
        transcribe_vad_model_free(st.vad);
        transcribe_model_free(st.model);
        return 1;
    }
    // httplib listens with a backlog of 5 (built into Debian's library): a burst of connections (a
    // client opening many, slow ones holding workers while others arrive) overflows it, and the kernel
    // drops their SYNs, which clients resend only after a second. Listening again on the bound socket
    // raises it (Linux adjusts a listening socket's backlog).
    if (listen_fd >= 0) {
        ::listen(listen_fd, 1024);
    }
    std::printf("transcribe-server: listening on http://%s:%d (model %s, %d parallel%s, queue %d%s%s)\n", host.c_str(),
                bound, st.info.name, parallel, st.pool->batched() ? " decoded together" : "", queue,
                st.draft ? ", drafts by " : "", st.draft ? draft.model_path.c_str() : "");
    std::fflush(stdout);
    std::atomic<bool> listening_done {false};
    std::thread stopper([&] {
        while (!listening_done) {
            if (g_stop) {
                svr.stop();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    svr.listen_after_bind();
    listening_done = true;
    stopper.join();
    std::printf("transcribe-server: stopped after %ld transcriptions (%ld aborted by clients)\n", st.served.load(),
                st.aborted.load());
    st.pool.reset();
    transcribe_vad_model_free(st.vad);
    transcribe_model_free(st.model);
    return 0;
}
