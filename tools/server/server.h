// transcribe-server's handlers over the HTTP layer (http/http_server.h): OpenAI's
// /v1/audio/transcriptions and /translations (transcription.cpp), the Realtime API's transcription
// sessions at /v1/realtime (realtime.cpp), /v1/models, /health, and the middleware every request passes
// (routes.cpp).
#pragma once

#include "transcribe.h"

#include "http/http_server.h"
#include "openai_formats.h"
#include "session_pool.h"

#include <atomic>
#include <memory>
#include <string>

namespace transcribe_server {

struct ServerState {
    transcribe_model *           model = nullptr;
    transcribe_model_info        info {};
    std::unique_ptr<SessionPool> pool;
    transcribe_session_params    session_params {}; // of the pool's: a realtime session's own, where the model streams natively
    int                          max_new_tokens = 256;
    transcribe_vad_model *       vad = nullptr; // --vad: speech-aware long audio for every request, realtime turns
    transcribe_vad_params        vad_params = transcribe_vad_params_init();
    transcribe_model *           draft = nullptr; // --draft: speculative decoding (a request's draft=false opts out)
    transcribe_model *           aligner = nullptr; // --align-with: every transcript's words timed by this CTC model
    transcribe_diarizer *        diarizer = nullptr; // --diarize: speakers for response_format=diarized_json
    transcribe_diarize_params    diarize_params = transcribe_diarize_params_init();
    size_t                       max_upload_bytes = 64u << 20;
    double                       max_audio_s      = 1800; // --max-audio-s: longer uploads get 413 (0: no limit)
    std::string                  api_key;     // --api-key: required as "Authorization: Bearer KEY" (not on /health)
    std::string                  cors_origin; // --cors-origin: allowed browser origin ("" = no CORS headers)
    int                          max_realtime = 16; // --max-realtime: realtime sessions at once
    bool                         web = true;        // the page at / (--no-web: off)
    std::atomic<int>             realtime {0};
    std::atomic<long>            served {0};
    std::atomic<long>            aborted {0}; // runs stopped because the client went away
};

// What a transcription request asks for beyond its audio and format.
struct RunRequest {
    std::string language;        // "" = the model's
    std::string target_language; // "" = the speech's own (transcription)
    bool        draft     = true;  // with the server's draft model, where it has one
    bool        timestamps = false; // words asked of a model that times them only when asked
    bool        no_timestamps = false; // Whisper: decoded without timestamp tokens
    std::vector<float> temperatures {0.0f}; // Whisper: the fallback's sequence (one: none)
    int         beam_size = 0;
    bool        diarize   = false; // diarized_json: the server's diarizer attributes speakers
    transcribe_decoder_type decoder_type = TRANSCRIBE_DECODER_DEFAULT; // a hybrid Parakeet's head
    std::string hotwords;              // one phrase a line
    float       hotword_weight = 1.0f;
    // OpenAI's prompt: context for a model with a text prompt (Canary-Qwen); other models ignore it, as
    // clients written for Whisper send one.
    std::string prompt;
    // OpenAI's chunking_strategy: NO_VAD cuts long audio at pauses by energy, not with the server's VAD;
    // SPEECH (where SPEECH_SET) replaces the server's --vad-* parameters.
    bool                  no_vad = false;
    bool                  speech_set = false;
    transcribe_vad_params speech = transcribe_vad_params_init();
};


// What every transcription runs with (REST and realtime alike); R must outlive the run.
transcribe_run_params run_params(const ServerState & st, const RunRequest & r);

// OpenAI's error shape ({"error": {message, type, param, code}}), Retry-After with a 503.
void send_error(HttpResponse & res, int status, const std::string & message, const char * param = nullptr,
                const char * code = nullptr);
// The audio seconds of the request this thread serves, for the access log.
void note_audio_seconds(double seconds);

void handle_transcription(ServerState & st, const HttpRequest & req, HttpResponse & res, bool translate);
void handle_realtime(ServerState & st, const HttpRequest & req, WebSocketChannel & channel);

// The page (web_page.cpp): true when REQ asked for one of its files and RES now holds it.
bool is_web_path(const std::string & path);
bool serve_web_page(const ServerState & st, const HttpRequest & req, HttpResponse & res);
// What /v1/models says of the loaded model beyond OpenAI's fields: what a request may ask of it.
json model_capabilities(const ServerState & st);

// Every route and the middleware, for the HTTP layer.
HttpHandlers make_handlers(ServerState & state);

} // namespace transcribe_server
