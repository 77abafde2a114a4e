// The options every tool that loads a transcription model shares (CLI, stream, server, bench): the
// model file, the backend, CPU threads and repacking, the KV cache type; and the loading itself.
#pragma once

#include "transcribe.h"

#include <CLI/CLI.hpp>

#include <string>

namespace transcribe_tools {

struct ModelOptions {
    std::string path, backend = "auto", kv_type = "f16";
    int         threads   = 0;
    bool        no_repack = false;

    void add_to(CLI::App & app) {
        app.add_option("-m,--model", path, "model file (GGUF)");
        app.add_option("--threads", threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
        app.add_option("--backend", backend, "backend: auto, cpu, cuda, vulkan, metal");
        app.add_option("--kv-type", kv_type, "KV cache type: f16 or f32")->check(CLI::IsMember({"f16", "f32"}));
        app.add_flag("--no-repack", no_repack, "CPU: keep every weight in its file layout (no interleaved Q4_K/Q4_0 copies)");
    }

    // The load parameters (false with transcribe_last_error() for an unknown backend).
    bool load_params(transcribe_load_params * out) const {
        *out            = transcribe_load_params_init();
        out->cpu_repack = !no_repack;
        return transcribe_backend_from_name(backend.c_str(), &out->backend) == TRANSCRIBE_OK;
    }

    // The model (a status other than OK, with transcribe_last_error(), where it does not load).
    transcribe_status load(transcribe_model ** out) const {
        *out = nullptr;
        if (path.empty()) {
            return TRANSCRIBE_ERR_INVALID_ARG;
        }
        transcribe_load_params lp;
        if (!load_params(&lp)) {
            return TRANSCRIBE_ERR_INVALID_ARG;
        }
        return transcribe_model_load(path.c_str(), &lp, out);
    }

    transcribe_session_params session_params() const {
        transcribe_session_params sp = transcribe_session_params_init();
        sp.n_threads = threads;
        sp.kv_type   = kv_type == "f32" ? TRANSCRIBE_KV_F32 : TRANSCRIBE_KV_F16;
        return sp;
    }
};

} // namespace transcribe_tools
