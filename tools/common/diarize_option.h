// The --diarize option the tools that transcribe share: speaker-attributed transcripts from a
// Sortformer diarizer, loaded into a transcribe_diarizer the tool owns.
#pragma once

#include "transcribe.h"

#include <CLI/CLI.hpp>

#include <string>

namespace transcribe_tools {

struct DiarizeOption {
    std::string model_path, yaml_path;

    void add_to(CLI::App & app) {
        app.add_option("--diarize", model_path,
                       "speaker-attributed transcript from a diarizer (Sortformer GGUF): word-timed models give each word "
                       "its speaker and break segments where it changes; others are transcribed speaker turn by turn");
        app.add_option("--diarize-postprocessing", yaml_path, "NeMo's post-processing YAML for the diarizer's segments");
    }

    // Sets RP's diarizer (owned by *OUT; NULL when no --diarize). False with *ERROR set when it does not load.
    bool load(int n_threads, transcribe_run_params & rp, transcribe_diarizer ** out, std::string * error) const {
        *out = nullptr;
        if (model_path.empty()) {
            return true;
        }
        if (!yaml_path.empty() && transcribe_diarize_params_from_yaml(yaml_path.c_str(), &rp.diarize_params) != TRANSCRIBE_OK) {
            *error = std::string("--diarize-postprocessing: ") + transcribe_last_error();
            return false;
        }
        if (transcribe_diarizer_load(model_path.c_str(), n_threads, out) != TRANSCRIBE_OK) {
            *error = "--diarize: " + std::string(transcribe_last_error());
            return false;
        }
        rp.diarizer = *out;
        return true;
    }
};

} // namespace transcribe_tools
