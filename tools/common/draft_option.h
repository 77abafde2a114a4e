// The --draft option every tool that transcribes shares (CLI, server, bench): speculative decoding
// with a faster model's transcript as the draft, loaded into a transcribe_model the tool owns.
#pragma once

#include "transcribe.h"

#include <CLI/CLI.hpp>

#include <string>

namespace transcribe_tools {

struct DraftOption {
    std::string model_path;

    void add_to(CLI::App & app) {
        app.add_option("--draft", model_path,
                       "speculative decoding: a faster model (GGUF, e.g. Parakeet-TDT) drafts each piece and the "
                       "decoder checks its tokens several a step; the same ids, sooner (models that decode with a draft)");
    }

    // NULL model when no --draft was given. False with *ERROR set when MODEL cannot decode with a draft
    // or the draft does not load.
    bool load(const transcribe_model * model, const transcribe_load_params & params, transcribe_model ** out,
              std::string * error) const {
        *out = nullptr;
        if (model_path.empty()) {
            return true;
        }
        transcribe_model_info info;
        transcribe_model_get_info(model, &info);
        if (!info.speculative) {
            *error = std::string("--draft: model ") + info.name + " (" + info.architecture + ") does not decode with a draft";
            return false;
        }
        if (transcribe_model_load(model_path.c_str(), &params, out) != TRANSCRIBE_OK) {
            *error = "--draft: " + model_path + ": " + transcribe_last_error();
            return false;
        }
        return true;
    }
};

} // namespace transcribe_tools
