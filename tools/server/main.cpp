// transcribe-server: an OpenAI-compatible transcription endpoint over one loaded model.
#include "transcribe.h"

#include "server.h"

#include "../common/align_option.h"
#include "../common/diarize_option.h"
#include "../common/draft_option.h"
#include "../common/model_options.h"
#include "../common/vad_options.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace transcribe_server;

namespace {

// Set by SIGINT / SIGTERM; a thread of main's stops the server (nothing else is safe in a handler).
std::atomic<bool> g_stop {false};
void on_signal(int) { g_stop = true; }

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-server: OpenAI-compatible speech-to-text over HTTP"};
    std::string host = "127.0.0.1", tls_cert, tls_key;
    int port = 8080, parallel = 1, queue = 16, max_upload_mb = 64, max_new_tokens = 256, max_realtime = 16;
    transcribe_tools::ModelOptions model_options;
    model_options.add_to(app);
    app.get_option("-m")->required();
    app.get_option("--threads")->description(
        "CPU threads (default: all cores, shared by the batch; divided among sessions for models that do not batch)");
    app.add_option("--host", host, "address to listen on");
    app.add_option("--port", port, "port to listen on (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
    app.add_option("--tls-cert", tls_cert, "serve HTTPS and WSS with this certificate chain (PEM; with --tls-key)")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-key", tls_key, "the certificate's private key (PEM)")->check(CLI::ExistingFile);
    app.add_option("--max-realtime", max_realtime, "realtime transcription sessions (WebSockets) at once")
        ->check(CLI::Range(0, 1024));
    app.add_option("--parallel", parallel,
                   "requests transcribed at once: decoded together in one session's steps where the model batches "
                   "(LLM decoders), else a session each")
        ->check(CLI::Range(1, 64));
    app.add_option("--queue", queue, "requests that may wait for a session before 503")->check(CLI::NonNegativeNumber);
    app.add_option("--max-upload-mb", max_upload_mb, "largest accepted upload, in MiB (413 above)")->check(CLI::PositiveNumber);
    app.add_option("--max-new-tokens", max_new_tokens, "token budget per piece of audio")->check(CLI::PositiveNumber);
    std::string api_key, cors_origin;
    bool no_web = false;
    app.add_flag("--no-web", no_web, "serve no web page at / (the API routes only)");
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
    transcribe_tools::AlignOption align;
    align.add_to(app);
    CLI11_PARSE(app, argc, argv);
    if (tls_cert.empty() != tls_key.empty()) {
        std::fprintf(stderr, "transcribe-server: error: --tls-cert and --tls-key go together\n");
        return 1;
    }
    const int threads = model_options.threads;

    // Freed after the state: the sessions (which run them) go first.
    std::unique_ptr<transcribe_model, void (*)(transcribe_model *)> draft_model(nullptr, transcribe_model_free);
    std::unique_ptr<transcribe_diarizer, void (*)(transcribe_diarizer *)> diarizer(nullptr, transcribe_diarizer_free);
    transcribe_tools::AlignOption::Model aligner;
    ServerState st;
    if (api_key.empty() && std::getenv("TRANSCRIBE_API_KEY")) {
        api_key = std::getenv("TRANSCRIBE_API_KEY");
    }
    st.api_key     = api_key;
    st.cors_origin = cors_origin;
    st.web         = !no_web;
    st.max_new_tokens = max_new_tokens;
    transcribe_load_params lp;
    if (!model_options.load_params(&lp) || model_options.load(&st.model) != TRANSCRIBE_OK) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", transcribe_last_error());
        return 1;
    }
    // Whatever the way out: the sessions first, then what they run.
    struct Release {
        ServerState & st;
        ~Release() {
            st.pool.reset();
            transcribe_vad_model_free(st.vad);
            transcribe_model_free(st.model);
        }
    } release {st};
    transcribe_model_get_info(st.model, &st.info);
    if (st.info.forced_aligner) {
        std::fprintf(stderr, "transcribe-server: error: %s is a forced aligner: it transcribes nothing; serve a model that "
                     "transcribes and give it with --align-with\n", model_options.path.c_str());
        return 1;
    }
    std::string load_error;
    transcribe_model * loaded_draft = nullptr;
    if (!draft.load(st.model, lp, &loaded_draft, &load_error)) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", load_error.c_str());
        return 1;
    }
    draft_model.reset(loaded_draft);
    st.draft      = loaded_draft;
    if (!align.load(lp, &aligner, &load_error)) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", load_error.c_str());
        return 1;
    }
    if (aligner) {
        st.aligner = aligner.get();
        transcribe_tools::AlignOption::times_words(st.info);
    }
    transcribe_run_params diarize_rp = transcribe_run_params_init();
    transcribe_diarizer * loaded_diarizer = nullptr;
    if (!diarize.load(threads, diarize_rp, &loaded_diarizer, &load_error)) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", load_error.c_str());
        return 1;
    }
    diarizer.reset(loaded_diarizer);
    st.diarizer       = loaded_diarizer;
    st.diarize_params = diarize_rp.diarize_params;
    st.vad_params = vad.params;
    if (!vad.load(&st.vad)) {
        std::fprintf(stderr, "transcribe-server: error: VAD model: %s\n", transcribe_last_error());
        return 1;
    }
    transcribe_session_params sp = model_options.session_params();
    // The batch gets every core; sessions of a model that does not batch get a share each (the pool
    // falls back to those when the shared session reports it does not batch).
    sp.n_threads = threads > 0 ? threads : std::max(1, int(std::thread::hardware_concurrency()));
    st.session_params = sp;
    try {
        st.pool = std::make_unique<SessionPool>(st.model, parallel, queue, sp, threads <= 0);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", e.what());
        return 1;
    }

    st.max_upload_bytes = size_t(max_upload_mb) << 20;
    st.max_audio_s      = max_audio_s;
    st.max_realtime     = max_realtime;
    HttpLimits limits;
    limits.header_seconds   = header_timeout_s;
    limits.body_min_rate    = body_min_kbps * 1024;
    limits.max_body_bytes   = st.max_upload_bytes + (64 << 10); // multipart framing on top of the file
    limits.max_connections  = parallel + queue + max_realtime + 64; // the waiting, the slow, health checks
    std::unique_ptr<HttpServer> server;
    try {
        server = std::make_unique<HttpServer>(limits, make_handlers(st), TlsFiles {tls_cert, tls_key});
    } catch (const std::exception & e) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", e.what());
        return 1;
    }
    std::string bind_error;
    const int bound = server->bind(host, port, &bind_error);
    if (bound < 0) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", bind_error.c_str());
        return 1;
    }
    std::signal(SIGPIPE, SIG_IGN); // a client gone mid-write is an error return, not the end of the server
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::printf("transcribe-server: listening on %s://%s:%d (model %s, %d parallel%s, queue %d%s%s%s%s%s)\n",
                server->tls() ? "https" : "http", host.c_str(), bound, st.info.name, parallel,
                st.pool->batched() ? " decoded together" : "", queue, st.draft ? ", drafts by " : "",
                st.draft ? draft.model_path.c_str() : "", st.aligner ? ", words aligned by " : "",
                st.aligner ? align.model_path.c_str() : "", st.web ? "; the page at /" : "");
    std::fflush(stdout);
    std::atomic<bool> running {true};
    std::thread stopper([&] {
        while (running && !g_stop) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        server->stop();
    });
    server->run();
    running = false;
    stopper.join();
    std::printf("transcribe-server: stopped after %ld transcriptions (%ld aborted by clients)\n", st.served.load(),
                st.aborted.load());
    return 0;
}
