// The --vad options every tool that transcribes shares (CLI, server, bench): the VAD model and the
// speech-region parameters, loaded into a transcribe_vad_model the tool owns.
#pragma once

#include "transcribe.h"

#include <CLI/CLI.hpp>

#include <string>

namespace transcribe_tools {

struct VadOptions {
    std::string           model_path;
    transcribe_vad_params params = transcribe_vad_params_init();

    void add_to(CLI::App & app) {
        app.add_option("--vad", model_path, "Silero VAD model (GGUF): decode only the speech it finds; segments follow speech");
        app.add_option("--vad-threshold", params.threshold, "VAD: speech at or above this probability (default 0.5)")
            ->check(CLI::Range(0.0, 1.0));
        app.add_option("--vad-min-speech-ms", params.min_speech_ms, "VAD: drop shorter speech (default 250)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--vad-min-silence-ms", params.min_silence_ms, "VAD: shorter silences do not end speech (default 100)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--vad-speech-pad-ms", params.speech_pad_ms, "VAD: widen speech by this on each side (default 30)")
            ->check(CLI::NonNegativeNumber);
    }

    // NULL model when no --vad was given; false (with transcribe_last_error()) when it does not load.
    bool load(transcribe_vad_model ** out) const {
        *out = nullptr;
        return model_path.empty() || transcribe_vad_model_load(model_path.c_str(), out) == TRANSCRIBE_OK;
    }
};

} // namespace transcribe_tools
