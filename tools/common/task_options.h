// The task options every tool that transcribes shares (CLI, bench): the speech's language, a language
// to translate into, punctuation, beam search (models with a task prompt: Canary AED); the head that
// decodes (a hybrid Parakeet); hotwords (Parakeet, Qwen3-ASR); a text prompt (Canary-Qwen, Qwen3-ASR, Whisper).
#pragma once

#include "decoder_type.h"
#include "transcribe.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/stat.h>

namespace transcribe_tools {

struct TaskOptions {
    std::string language, translate_to;
    int         beam   = 0;
    bool        no_pnc = false;
    std::string decoder_type;
    std::string hotwords; // one phrase a line
    float       hotword_weight = 1.0f;
    std::string prompt;
    bool        no_timestamps = false, no_condition_on_previous_text = false;
    std::vector<float> temperatures {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f}; // openai-whisper's CLI: 0, falling back by 0.2
    int         best_of = 5;
    uint64_t    seed    = 0;
    std::vector<int32_t> att_context_size; // [left, right]; empty: the model's default

    void add_to(CLI::App & app) {
        app.add_option("--language", language,
                       "the speech's language (models that know several, by name or ISO code; default: the model's "
                       "first; auto: detected, models that detect it: Whisper's and Qwen3-ASR's default)");
        app.add_option("--translate-to", translate_to, "write the text in this language (models that translate)");
        app.add_option("--beam", beam, "beam search over N hypotheses (models with beam search; default: greedy)")
            ->check(CLI::Range(0, 8));
        app.add_flag("--no-pnc", no_pnc, "text without punctuation and capitals (models with a task prompt)");
        app.add_option("--decoder-type", decoder_type,
                       "the head that decodes, as NeMo's decoder_type: tdt (or rnnt: the transducer) or ctc (a hybrid "
                       "Parakeet has both; default: the transducer)")
            ->check(CLI::IsMember({"tdt", "rnnt", "ctc"}));
        app.add_option_function<std::string>(
            "--hotwords", [this](const std::string & arg) { hotwords = hotword_lines(arg); },
            "phrases to favour (Parakeet: boosted in decoding; Qwen3-ASR: added to its context after --prompt, "
            "space-separated): a file of one phrase a line, or a comma-separated list \"a,b,c\"");
        app.add_option("--hotword-weight", hotword_weight,
                       "how strongly (NeMo's boosting_tree_alpha: logit + W x boost; default 1)")
            ->check(CLI::Range(0.0f, 100.0f));
        app.add_option("--prompt", prompt,
                       "context for the model (Canary-Qwen: text its chat prompt carries before the instruction, "
                       "e.g. names or the conversation so far; Qwen3-ASR: its system context; Whisper: openai-whisper's "
                       "initial_prompt; as OpenAI's prompt)");
        app.add_flag("--no-timestamps", no_timestamps,
                     "Whisper: decode without timestamp tokens (openai-whisper's without_timestamps)");
        app.add_flag("--no-condition-on-previous-text", no_condition_on_previous_text,
                     "Whisper: no window's prompt holds the text before it (condition_on_previous_text=False)");
        app.add_option("--temperature", temperatures,
                       "Whisper: the temperatures a window falls back to in turn when its text is too repetitive or "
                       "unlikely (default 0,0.2,0.4,0.6,0.8,1; a single 0: no fallback)")
            ->delimiter(',');
        app.add_option("--best-of", best_of, "Whisper: samples drawn at each temperature above 0 (default 5)")->check(CLI::Range(1, 8));
        app.add_option("--seed", seed, "Whisper: the seed of the sampling generator (default 0)");
        app.add_option_function<std::string>(
            "--att-context-size",
            [this](const std::string & arg) {
                int left = 0, right = 0;
                char end = 0;
                if (std::sscanf(arg.c_str(), "%d,%d%c", &left, &right, &end) != 2) {
                    throw CLI::ValidationError("--att-context-size", "expects L,R (two integers), got " + arg);
                }
                att_context_size = {left, right};
            },
            "L,R: the encoder frames each frame's attention reaches, left and right (cache-aware streaming models: "
            "one of the contexts they were trained with, NeMo's att_context_size; default: the model's first)");
    }

    // --hotwords as the C API takes it, one phrase a line: the file's lines where a file is at that path
    // (which must then be readable), else the list's comma-separated items.
    static std::string hotword_lines(const std::string & arg) {
        struct stat st {};
        std::string out;
        if (::stat(arg.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
            std::ifstream f(arg);
            if (!f) {
                throw CLI::ValidationError("--hotwords", "cannot read " + arg);
            }
            for (std::string line; std::getline(f, line);) {
                out += line + "\n";
            }
            return out;
        }
        for (char c : arg) {
            out += c == ',' ? '\n' : c;
        }
        return out;
    }

    // Into RP; the strings must outlive it.
    void apply(transcribe_run_params & rp) const {
        rp.hotwords       = hotwords.empty() ? nullptr : hotwords.c_str();
        rp.hotword_weight = hotword_weight;
        rp.prompt         = prompt.empty() ? nullptr : prompt.c_str();
        rp.language        = language.empty() ? nullptr : language.c_str();
        rp.target_language = translate_to.empty() ? nullptr : translate_to.c_str();
        rp.beam_size       = beam;
        rp.no_timestamps   = no_timestamps;
        rp.no_condition_on_previous_text = no_condition_on_previous_text;
        rp.temperatures   = temperatures.data();
        rp.n_temperatures = int(temperatures.size());
        rp.best_of        = best_of;
        rp.seed           = seed;
        rp.att_context_size = att_context_size.empty() ? nullptr : att_context_size.data();
        rp.no_punctuation  = no_pnc;
        decoder_type_from_name(decoder_type, &rp.decoder_type); // CLI11 let only the known names through
    }
};

} // namespace transcribe_tools
