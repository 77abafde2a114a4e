// transcribe-server: an OpenAI-compatible transcription endpoint over one loaded model.
#include "transcribe.h"

#include "../common/formats.h"
#include "connection_watch.h"
#include "session_pool.h"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

using namespace transcribe_tools;
using namespace transcribe_server;
using json = nlohmann::ordered_json;

namespace {

void send_error(httplib::Response & res, int status, const std::string & message, const char * param = nullptr) {
    const char * type = status >= 500 ? (status == 503 ? "server_busy" : "server_error") : "invalid_request_error";
    json err = {{"message", message}, {"type", type}, {"param", param ? json(param) : json(nullptr)}, {"code", status}};
    res.status = status;
    res.set_content(json({{"error", err}}).dump(), "application/json");
}

std::string form_field(const httplib::Request & req, const char * name, const std::string & fallback) {
    return req.has_file(name) ? req.get_file_value(name).content : fallback;
}

struct ServerState {
    transcribe_model *           model = nullptr;
    transcribe_model_info        info {};
    std::unique_ptr<SessionPool> pool;
    int                          max_new_tokens = 256;
    std::atomic<long>            served {0};
    std::atomic<long>            aborted {0}; // runs stopped because the client went away
};

void handle_transcription(ServerState & st, const httplib::Request & req, httplib::Response & res) {
    if (!req.is_multipart_form_data()) {
        send_error(res, 415, "Content-Type must be multipart/form-data (got '" + req.get_header_value("Content-Type") + "')");
        return;
    }
    if (!req.has_file("file")) {
        send_error(res, 400, "missing form field 'file'", "file");
        return;
    }
    const std::string format_name = form_field(req, "response_format", "json");
    const bool verbose = format_name == "verbose_json";
    Format format = Format::Json;
    if (!verbose && format_name != "text" && !parse_format(format_name, &format)) {
        send_error(res, 400, "unsupported response_format '" + format_name + "' (json, text, srt, vtt, verbose_json)",
                   "response_format");
        return;
    }
    const std::string language = form_field(req, "language", "");
    // `model` and `prompt` are accepted for compatibility; the loaded model answers every request.

    const std::string & bytes = req.get_file_value("file").content;
    transcribe_audio audio {};
    if (transcribe_audio_load_memory(bytes.data(), bytes.size(), st.info.sample_rate, &audio) != TRANSCRIBE_OK) {
        send_error(res, 400, std::string("could not decode the uploaded audio: ") + transcribe_last_error(), "file");
        return;
    }
    SessionPool::Lease lease = st.pool->acquire();
    if (!lease) {
        transcribe_audio_free(&audio);
        send_error(res, 503, "server busy: too many requests are waiting, retry later");
        return;
    }
    ConnectionWatch watch(req.remote_addr, req.remote_port, req.local_port);
    lease.set_abort_check([&watch] { return watch.closed(); });

    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = st.max_new_tokens;
    rp.language       = language.empty() ? nullptr : language.c_str();
    transcribe_result * result = nullptr;
    const transcribe_status status = transcribe_run(lease.session(), audio.samples, audio.n_samples, &rp, &result);
    const double duration = double(audio.n_samples) / st.info.sample_rate;
    transcribe_audio_free(&audio);
    if (status == TRANSCRIBE_ERR_ABORTED) {
        ++st.aborted;
    }
    if (status != TRANSCRIBE_OK && status != TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {
        const std::string why = transcribe_last_error();
        const bool client_side = status == TRANSCRIBE_ERR_INVALID_ARG || status == TRANSCRIBE_ERR_AUDIO_DECODE ||
                                 status == TRANSCRIBE_ERR_INPUT_TOO_LONG || status == TRANSCRIBE_ERR_ABORTED;
        send_error(res, client_side ? 400 : 500, std::string(transcribe_status_string(status)) + ": " + why);
        return;
    }
    const Output out = output_from_result(result);
    transcribe_result_free(result);
    ++st.served;
    if (verbose) {
        json segs = json::array();
        for (size_t i = 0; i < out.segments.size(); ++i) {
            const OutputSegment & s = out.segments[i];
            segs.push_back({{"id", i}, {"start", s.t0_ms / 1000.0}, {"end", s.t1_ms / 1000.0}, {"text", s.text},
                            {"tokens", s.tokens}, {"truncated", s.truncated}});
        }
        json j = {{"task", "transcribe"},
                  {"language", language.empty() ? (st.info.n_languages ? st.info.languages[0] : "en") : language},
                  {"duration", duration}, {"text", out.text}, {"segments", segs}};
        res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    } else if (format_name == "text") {
        res.set_content(render(out, Format::Txt, nullptr, st.info.name), "text/plain; charset=utf-8");
    } else if (format == Format::Srt) {
        res.set_content(render(out, Format::Srt, nullptr, st.info.name), "application/x-subrip; charset=utf-8");
    } else if (format == Format::Vtt) {
        res.set_content(render(out, Format::Vtt, nullptr, st.info.name), "text/vtt; charset=utf-8");
    } else {
        res.set_content(json({{"text", out.text}}).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    }
}

httplib::Server * g_server = nullptr;
void on_signal(int) {
    if (g_server) {
        g_server->stop();
    }
}

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-server: OpenAI-compatible speech-to-text over HTTP"};
    std::string model_path, host = "127.0.0.1", backend_name = "auto", kv_name = "f16";
    int port = 8080, threads = 0, parallel = 1, queue = 16, max_upload_mb = 64, max_new_tokens = 256;
    app.add_option("-m,--model", model_path, "model file (GGUF)")->required();
    app.add_option("--host", host, "address to listen on");
    app.add_option("--port", port, "port to listen on (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
    app.add_option("--threads", threads, "CPU threads per request (default: all cores / parallel)")->check(CLI::NonNegativeNumber);
    app.add_option("--parallel", parallel, "requests transcribed at once (sessions on the one model)")->check(CLI::PositiveNumber);
    app.add_option("--queue", queue, "requests that may wait for a session before 503")->check(CLI::NonNegativeNumber);
    app.add_option("--max-upload-mb", max_upload_mb, "largest accepted upload, in MiB (413 above)")->check(CLI::PositiveNumber);
    app.add_option("--max-new-tokens", max_new_tokens, "token budget per piece of audio")->check(CLI::PositiveNumber);
    app.add_option("--backend", backend_name, "backend: auto, cpu, cuda, vulkan, metal");
    app.add_option("--kv-type", kv_name, "KV cache type: f16 or f32")->check(CLI::IsMember({"f16", "f32"}));
    CLI11_PARSE(app, argc, argv);

    ServerState st;
    st.max_new_tokens = max_new_tokens;
    transcribe_load_params lp = transcribe_load_params_init();
    if (transcribe_backend_from_name(backend_name.c_str(), &lp.backend) != TRANSCRIBE_OK ||
        transcribe_model_load(model_path.c_str(), &lp, &st.model) != TRANSCRIBE_OK) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", transcribe_last_error());
        return 1;
    }
    transcribe_model_get_info(st.model, &st.info);
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = threads > 0 ? threads : std::max(1, int(std::thread::hardware_concurrency()) / parallel);
    sp.kv_type   = kv_name == "f32" ? TRANSCRIBE_KV_F32 : TRANSCRIBE_KV_F16;
    try {
        st.pool = std::make_unique<SessionPool>(st.model, parallel, queue, sp);
    } catch (const std::exception & e) {
        std::fprintf(stderr, "transcribe-server: error: %s\n", e.what());
        transcribe_model_free(st.model);
        return 1;
    }

    httplib::Server svr;
    g_server = &svr;
    // Enough HTTP workers for the running and the waiting requests, plus a few for health checks and
    // for answering 503 once the queue is full.
    const int workers = parallel + queue + 4;
    svr.new_task_queue = [workers] { return new httplib::ThreadPool(size_t(workers)); };
    svr.set_payload_max_length(size_t(max_upload_mb) * 1024 * 1024);
    svr.set_error_handler([max_upload_mb](const httplib::Request &, httplib::Response & res) {
        if (!res.body.empty()) {
            return;
        }
        if (res.status == 413) {
            send_error(res, 413, "upload larger than " + std::to_string(max_upload_mb) + " MiB");
        } else if (res.status == 404) {
            send_error(res, 404, "no such endpoint");
        } else {
            send_error(res, res.status, "request failed with HTTP status " + std::to_string(res.status));
        }
    });
    svr.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what += std::string(": ") + e.what();
        } catch (...) {
        }
        send_error(res, 500, what);
    });
    svr.Get("/health", [](const httplib::Request &, httplib::Response & res) {
        res.set_content(R"({"status":"ok"})", "application/json");
    });
    svr.Get("/v1/models", [&st](const httplib::Request &, httplib::Response & res) {
        json j = {{"object", "list"},
                  {"data", json::array({{{"id", st.info.name}, {"object", "model"}, {"owned_by", "transcribe"},
                                         {"architecture", st.info.architecture}}})}};
        res.set_content(j.dump(), "application/json");
    });
    svr.Post("/v1/audio/transcriptions",
             [&st](const httplib::Request & req, httplib::Response & res) { handle_transcription(st, req, res); });

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
        transcribe_model_free(st.model);
        return 1;
    }
    std::printf("transcribe-server: listening on http://%s:%d (model %s, %d parallel, queue %d)\n", host.c_str(), bound,
                st.info.name, parallel, queue);
    std::fflush(stdout);
    svr.listen_after_bind();
    std::printf("transcribe-server: stopped after %ld transcriptions (%ld aborted by clients)\n", st.served.load(),
                st.aborted.load());
    st.pool.reset();
    transcribe_model_free(st.model);
    return 0;
}
