// The --align-with option of the tools that transcribe: word times for any model's transcript from a
// CTC model (Parakeet CTC or a hybrid), NeMo Forced Aligner's way, or from a forced aligner
// (Qwen3-ForcedAligner); the tool owns the loaded model.
#pragma once

#include "transcribe.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace transcribe_tools {

struct AlignOption {
    std::string model_path;

    struct Free {
        void operator()(transcribe_model * m) const { transcribe_model_free(m); }
    };
    using Model = std::unique_ptr<transcribe_model, Free>;

    void add_to(CLI::App & app) {
        app.add_option("--align-with", model_path,
                       "word and segment times for the transcript from this CTC model (GGUF: Parakeet CTC or a hybrid), "
                       "aligned as NeMo Forced Aligner does, or from Qwen3-ForcedAligner, as Qwen3-ASR's transcribe() "
                       "aligns (any model; replaces a model's own word times)");
    }

    // Null when no --align-with was given. False with *ERROR set when the model does not load or can align
    // nothing.
    bool load(const transcribe_load_params & params, Model * out, std::string * error) const {
        out->reset();
        if (model_path.empty()) {
            return true;
        }
        transcribe_model * m = nullptr;
        if (transcribe_model_load(model_path.c_str(), &params, &m) != TRANSCRIBE_OK) {
            *error = "--align-with: " + model_path + ": " + transcribe_last_error();
            return false;
        }
        out->reset(m);
        transcribe_model_info info;
        transcribe_model_get_info(m, &info);
        if (!info.ctc_head && !info.forced_aligner) {
            *error = "--align-with: model " + std::string(info.name) + " (" + info.architecture +
                     ") neither has a CTC head nor is a forced aligner (align with a Parakeet CTC or hybrid model, "
                     "or Qwen3-ForcedAligner)";
            return false;
        }
        return true;
    }

    // What a tool tells of its model once an aligner is loaded: every transcript's words are timed (by the
    // aligner, with no timestamp prompt to ask for them).
    static void times_words(transcribe_model_info & info) {
        info.word_timestamps  = true;
        info.timestamp_prompt = false;
    }
};

} // namespace transcribe_tools
