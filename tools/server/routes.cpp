// The middleware every request passes before its body is read (CORS and preflights, 405 with Allow,
// encoded bodies refused, the API key), the small routes, the access log, and the error shape.
#include "server.h"

#include "openai_formats.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace transcribe_server {

namespace {

// The audio seconds of the request this thread is serving (-1: none), for the access log.
thread_local double t_audio_s = -1;

// The routes and the methods each takes (405 with Allow for any other).
const std::map<std::string, std::string> k_routes = {{"/health", "GET, HEAD"},
                                                     {"/v1/models", "GET, HEAD"},
                                                     {"/v1/audio/transcriptions", "POST"},
                                                     {"/v1/audio/translations", "POST"},
                                                     {"/v1/realtime", "GET"}};

bool method_allowed(const std::string & allow, const std::string & method) {
    size_t at = 0;
    while (at < allow.size()) {
        const size_t end = std::min(allow.find(',', at), allow.size());
        if (allow.compare(at, end - at, method) == 0) {
            return true;
        }
        at = allow.find_first_not_of(' ', end + 1);
    }
    return false;
}

// Equal strings in time that depends on their lengths only.
bool same_secret(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

// The WebSocket subprotocols a request offers (Sec-WebSocket-Protocol, comma-separated), trimmed.
std::vector<std::string> offered_protocols(const HttpRequest & req) {
    const std::string protocols = req.header("sec-websocket-protocol");
    std::vector<std::string> out;
    for (size_t at = 0; at < protocols.size();) {
        const size_t end = std::min(protocols.find(',', at), protocols.size());
        std::string p = protocols.substr(at, end - at);
        p.erase(0, p.find_first_not_of(' '));
        p.erase(p.find_last_not_of(' ') + 1);
        out.push_back(std::move(p));
        at = end + 1;
    }
    return out;
}

// The API key as OpenAI's clients send it: "Authorization: Bearer KEY", or, from a browser (which cannot
// set headers on a WebSocket), the subprotocol "openai-insecure-api-key.KEY".
bool authorized(const ServerState & st, const HttpRequest & req) {
    if (same_secret(req.header("authorization"), "Bearer " + st.api_key)) {
        return true;
    }
    const std::string prefix = "openai-insecure-api-key.";
    for (const std::string & p : offered_protocols(req)) {
        if (p.rfind(prefix, 0) == 0 && same_secret(p.substr(prefix.size()), st.api_key)) {
            return true;
        }
    }
    return false;
}

// Before the body is read: CORS, preflight, 405, 415 for encoded bodies, the API key. True: answered.
bool before_body(const ServerState & st, const HttpRequest & req, HttpResponse & res) {
    t_audio_s = -1;
    const auto route = k_routes.find(req.path);
    const bool page  = st.web && is_web_path(req.path);
    if (!st.cors_origin.empty()) {
        res.set_header("Access-Control-Allow-Origin", st.cors_origin);
        res.set_header("Vary", "Origin");
        if (req.method == "OPTIONS" && route != k_routes.end()) {
            res.status = 204;
            res.set_header("Access-Control-Allow-Methods", route->second);
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
            res.set_header("Access-Control-Max-Age", "600");
            return true;
        }
    }
    const std::string allow = route != k_routes.end() ? route->second : page ? "GET, HEAD" : "";
    if (!allow.empty() && !method_allowed(allow, req.method)) {
        res.set_header("Allow", allow);
        send_error(res, 405, "method " + req.method + " not allowed on " + req.path + " (allowed: " + allow + ")");
        return true;
    }
    const std::string encoding = req.header("content-encoding");
    if (!encoding.empty() && encoding != "identity") {
        // Inflating would take the upload limit off the decoded size: the audio is compressed already.
        send_error(res, 415, "Content-Encoding " + encoding + " is not accepted: send the audio file as it is");
        return true;
    }
    // The page's files are public (it asks for the key itself); what it shows comes through the API.
    if (!st.api_key.empty() && req.path != "/health" && !page && !authorized(st, req)) {
        send_error(res, 401, "missing or incorrect API key (Authorization: Bearer KEY)", nullptr, "invalid_api_key");
        return true;
    }
    return false;
}

// One line per request on stderr: method, path, status, bytes in, audio seconds, milliseconds.
void access_log(const HttpRequest & req, int status, double ms) {
    const std::string length = req.header("content-length");
    const size_t bytes_in = length.empty() ? req.body.size() : size_t(std::strtoull(length.c_str(), nullptr, 10));
    char audio[32] = "-";
    if (t_audio_s >= 0) {
        std::snprintf(audio, sizeof audio, "%.2f", t_audio_s);
    }
    std::fprintf(stderr, "transcribe-server: %s %s %d in=%zu audio_s=%s ms=%.1f\n",
                 req.method.empty() ? "-" : req.method.c_str(), req.path.empty() ? "-" : req.path.c_str(), status,
                 bytes_in, audio, ms);
    t_audio_s = -1;
}

void handle(ServerState & st, const HttpRequest & req, HttpResponse & res) {
    if (req.path == "/health") {
        res.set_content(R"({"status":"ok"})", "application/json");
    } else if (req.path == "/v1/models") {
        json j = {{"object", "list"},
                  {"data", json::array({{{"id", st.info.name}, {"object", "model"}, {"owned_by", "transcribe"},
                                         {"architecture", st.info.architecture},
                                         {"capabilities", model_capabilities(st)}}})}};
        res.set_content(j.dump(), "application/json");
    } else if (req.path == "/v1/audio/transcriptions" || req.path == "/v1/audio/translations") {
        handle_transcription(st, req, res, req.path == "/v1/audio/translations");
    } else if (req.path == "/v1/realtime") {
        res.set_header("Upgrade", "websocket");
        send_error(res, 426, "/v1/realtime is a WebSocket: send an Upgrade request");
    } else if (!serve_web_page(st, req, res)) {
        send_error(res, 404, "no such endpoint");
    }
    if (req.method == "HEAD") {
        res.body.clear();
    }
}

} // namespace

void send_error(HttpResponse & res, int status, const std::string & message, const char * param, const char * code) {
    const char * type = status >= 500 ? (status == 503 ? "server_busy" : "server_error") : "invalid_request_error";
    json err = {{"message", message}, {"type", type}, {"param", param ? json(param) : json(nullptr)},
                {"code", code ? json(code) : json(status)}};
    res.status = status;
    if (status == 503) {
        res.set_header("Retry-After", "1"); // a session frees up within a transcription
    }
    // Messages can echo client input (a form value): never let invalid UTF-8 there turn into a 500.
    res.set_content(json({{"error", err}}).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void note_audio_seconds(double seconds) { t_audio_s = seconds; }

json model_capabilities(const ServerState & st) {
    const transcribe_model_info & m = st.info;
    json languages = json::array();
    for (int i = 0; i < m.n_languages; ++i) {
        languages.push_back(m.languages[i]);
    }
    return {{"sample_rate", m.sample_rate},
            {"max_audio_s", st.max_audio_s},
            {"max_upload_mb", st.max_upload_bytes >> 20},
            {"languages", languages},
            {"language_choice", m.language_prompt},
            {"language_detection", m.language_detection},
            {"translation", m.translation},
            {"beam_search", m.beam_search},
            {"word_timestamps", m.word_timestamps || m.timestamp_prompt},
            {"hotwords", m.hotwords},
            {"prompt", m.text_prompt},
            {"transducer_head", m.transducer_head},
            {"ctc_head", m.ctc_head},
            {"diarization", st.diarizer != nullptr},
            {"vad", st.vad != nullptr},
            {"realtime", st.max_realtime > 0},
            {"web", st.web}};
}

HttpHandlers make_handlers(ServerState & state) {
    HttpHandlers h;
    h.before_body = [&state](const HttpRequest & req, HttpResponse & res) { return before_body(state, req, res); };
    h.handle = [&state](const HttpRequest & req, HttpResponse & res) {
        try {
            handle(state, req, res);
        } catch (const std::exception & e) {
            res = HttpResponse {};
            send_error(res, 500, std::string("internal error: ") + e.what());
        }
    };
    h.accepts_websocket = [](const HttpRequest & req) { return req.path == "/v1/realtime"; };
    // OpenAI's browser clients offer "realtime" (beside the key's "openai-insecure-api-key.KEY"): named
    // back, or the browser drops the connection.
    h.websocket_protocol = [](const HttpRequest & req) {
        const std::vector<std::string> offered = offered_protocols(req);
        return std::find(offered.begin(), offered.end(), "realtime") != offered.end() ? std::string("realtime") : std::string();
    };
    h.websocket = [&state](const HttpRequest & req, WebSocketChannel & channel) { handle_realtime(state, req, channel); };
    const size_t limit_mib = state.max_upload_bytes >> 20;
    h.error = [limit_mib](HttpResponse & res, int status, const std::string & message) {
        send_error(res, status, status == 413 ? "upload larger than " + std::to_string(limit_mib) + " MiB" : message);
    };
    h.log = access_log;
    return h;
}

} // namespace transcribe_server
