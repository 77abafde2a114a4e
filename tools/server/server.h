// The HTTP routes of transcribe-server: OpenAI's /v1/audio/transcriptions, /v1/models, /health.
#pragma once

#include "transcribe.h"

#include "session_pool.h"

#include <httplib.h>

#include <atomic>
#include <memory>

namespace transcribe_server {

struct ServerState {
    transcribe_model *           model = nullptr;
    transcribe_model_info        info {};
    std::unique_ptr<SessionPool> pool;
    int                          max_new_tokens = 256;
    transcribe_vad_model *       vad = nullptr; // --vad: speech-aware long audio for every request
    transcribe_vad_params        vad_params = transcribe_vad_params_init();
    transcribe_model *           draft = nullptr; // --draft: speculative decoding (a request's draft=false opts out)
    transcribe_diarizer *        diarizer = nullptr; // --diarize: speakers for response_format=diarized_json
    transcribe_diarize_params    diarize_params = transcribe_diarize_params_init();
    size_t                       max_upload_bytes = 64u << 20;
    double                       max_audio_s      = 1800; // --max-audio-s: longer uploads get 413 (0: no limit)
    std::string                  api_key;     // --api-key: required as "Authorization: Bearer KEY" (not on /health)
    std::string                  cors_origin; // --cors-origin: allowed browser origin ("" = no CORS headers)
    std::atomic<long>            served {0};
    std::atomic<long>            aborted {0}; // runs stopped because the client went away
};

// Routes, error handlers (OpenAI's error shape) and the upload limit.
void install_routes(httplib::Server & server, ServerState & state);

} // namespace transcribe_server
