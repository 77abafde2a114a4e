// transcribe-cli: transcribe audio files with a converted model.
#include "transcribe.h"

#include "../common/tool_errors.h"

#include "../common/formats.h"
#include "../common/model_options.h"
#include "../common/align_option.h"
#include "../common/draft_option.h"
#include "../common/diarize_option.h"
#include "../common/task_options.h"
#include "../common/text_stream.h"
#include "../common/vad_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <iostream>
#include <string>
#include <vector>

using namespace transcribe_tools;

namespace {

void progress_bar(float fraction, void *) {
    const int width = 40, filled = int(fraction * width + 0.5f);
    std::fprintf(stderr, "\r[%s%s] %3d%%", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), ' ').c_str(), int(fraction * 100 + 0.5f));
    if (fraction >= 1.0f) {
        std::fprintf(stderr, "\n");
    }
    std::fflush(stderr);
}

int die(const std::string & message) { return tool_error("transcribe-cli", message); }
int die(transcribe_status st) { return tool_error("transcribe-cli", st); }

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-cli: speech to text with transcribe (Canary-Qwen, Canary AED, Parakeet, Whisper)"};
    std::string format_name = "txt", output_path, tokenize_text,
                timestamps_name, text_path;
    std::vector<std::string> audio_paths;
    int  max_new_tokens = 256, chunk_ms = 0, batch = 0;
    double max_audio_s = 3 * 3600;
    bool progress = false, show_version = false, as_json = false, stream = false;
    ModelOptions model_options;
    model_options.add_to(app);
    app.add_option("audio", audio_paths, "audio files (wav, flac, ogg, mp3, ...)");
    app.add_option("--format", format_name, "output format: txt, json, srt, vtt")->check(CLI::IsMember({"txt", "json", "srt", "vtt"}));
    app.add_flag("--json", as_json, "same as --format json (text, segments, token ids, timings)");
    app.add_option("--timestamps", timestamps_name,
                   "word: JSON lists words with times and subtitle cues follow words (models with word times; "
                   "their default); segment: segments only")
        ->check(CLI::IsMember({"word", "segment"}));
    app.add_flag("--stream", stream, "print the text to stdout as it is decoded (txt format)");
    app.add_option("-o,--output", output_path, "write the output to FILE instead of stdout");
    app.add_flag("--progress", progress, "show a progress bar on stderr");
    app.add_option("--max-new-tokens", max_new_tokens, "token budget per piece of audio (LLM decoders)")->check(CLI::PositiveNumber);
    app.add_option("--chunk-ms", chunk_ms, "cut longer audio into pieces of at most this many ms (default: the model's window)")
        ->check(CLI::PositiveNumber);
    app.add_option("--max-audio-s", max_audio_s, "refuse audio longer than this many seconds (default 3 h; 0: no limit)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--batch", batch,
                   "recordings (files, pieces of long audio) decoded together (default: as free memory allows, at most 8)")
        ->check(CLI::Range(1, 64));
    app.add_option("--tokenize", tokenize_text, "print the token ids of TEXT and exit");
    app.add_option("--text", text_path,
                   "align this transcript (a UTF-8 file) in the audio instead of transcribing it: -m is an aligner "
                   "(Qwen3-ForcedAligner, or a CTC model: NeMo Forced Aligner's way); --language is the text's")
        ->check(CLI::ExistingFile);
    app.add_flag("--version", show_version, "print the version and exit");
    VadOptions vad;
    vad.add_to(app);
    DraftOption draft;
    draft.add_to(app);
    TaskOptions task;
    task.add_to(app);
    DiarizeOption diarize;
    diarize.add_to(app);
    AlignOption align;
    align.add_to(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError & e) {
        return app.exit(e);
    }
    if (show_version) {
        std::printf("transcribe %s\n", transcribe_version());
        return 0;
    }
    transcribe_log_set(quiet_log, nullptr); // errors are reported once, below, from transcribe_last_error()
    const int threads = model_options.threads;
    if (model_options.path.empty()) {
        return die("no model given (-m MODEL.gguf)");
    }
    const bool tokenize_only = app.count("--tokenize") > 0;
    if (audio_paths.empty() && !tokenize_only) {
        return die("no audio file given");
    }
    std::string given_text;
    if (!text_path.empty()) {
        if (audio_paths.size() != 1 || stream || batch > 1) {
            return die("--text aligns one transcript in one audio file (no --stream, no --batch)");
        }
        std::ifstream f(text_path, std::ios::binary);
        given_text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    Format format;
    parse_format(as_json ? "json" : format_name, &format);
    if (stream && (format != Format::Txt || !output_path.empty())) {
        return die("--stream prints plain text to stdout: it takes neither --format " + format_name + " nor -o");
    }

    transcribe_load_params lp;
    if (!model_options.load_params(&lp)) {
        return die(TRANSCRIBE_ERR_INVALID_ARG);
    }
    transcribe_model * model = nullptr;
    transcribe_status  st    = TRANSCRIBE_OK;
    if ((st = model_options.load(&model)) != TRANSCRIBE_OK) {
        return die(st);
    }
    if (tokenize_only) {
        std::vector<int32_t> ids(tokenize_text.size() + 16);
        int n = 0;
        st = transcribe_tokenize(model, tokenize_text.c_str(), ids.data(), int(ids.size()), &n);
        transcribe_model_free(model);
        if (st != TRANSCRIBE_OK) {
            return die(st);
        }
        for (int i = 0; i < n; ++i) {
            std::printf("%s%d", i ? " " : "", ids[size_t(i)]);
        }
        std::printf("\n");
        return 0;
    }
    transcribe_model_info info;
    transcribe_model_get_info(model, &info);
    AlignOption::Model aligner;
    std::string align_error;
    if (!align.load(lp, &aligner, &align_error)) {
        transcribe_model_free(model);
        return die(align_error);
    }
    if (aligner || !text_path.empty()) {
        AlignOption::times_words(info);
    }
    if (timestamps_name == "word" && !info.word_timestamps && !info.timestamp_prompt) {
        const std::string message = "--timestamps word: model " + std::string(info.name) + " (" + info.architecture +
                                    ") gives no word times; use --timestamps segment";
        transcribe_model_free(model);
        return die(message);
    }
    // A model with a timestamp prompt times its words only when asked (NeMo's default is not to).
    const bool words_asked = info.timestamp_prompt && !timestamps_name.empty();
    const Timestamps timestamps = timestamps_name == "segment" || (!info.word_timestamps && !words_asked)
                                      ? Timestamps::Segment
                                      : Timestamps::Word;
    transcribe_model * draft_model = nullptr;
    std::string draft_error;
    if (!draft.load(model, lp, &draft_model, &draft_error)) {
        transcribe_model_free(model);
        return die(draft_error);
    }
    transcribe_vad_model * vad_model = nullptr;
    if (!vad.load(&vad_model)) {
        const int code = die(std::string("VAD model: ") + transcribe_last_error());
        transcribe_model_free(draft_model);
        transcribe_model_free(model);
        return code;
    }

    transcribe_session_params sp = model_options.session_params();
    sp.n_batch   = stream ? 1 : batch; // streamed tokens come in order, one recording at a time
    if (progress) {
        sp.progress_callback = progress_bar;
    }
    transcribe_session * session = nullptr;
    if ((st = transcribe_session_create(model, &sp, &session)) != TRANSCRIBE_OK) {
        const int code = die(st);
        transcribe_vad_model_free(vad_model);
        transcribe_model_free(draft_model);
        transcribe_model_free(model);
        return code;
    }
    transcribe_run_params rp = transcribe_run_params_init();
    rp.max_new_tokens = max_new_tokens;
    rp.chunk_ms       = chunk_ms;
    rp.vad            = vad_model;
    rp.vad_params     = vad.params;
    rp.draft          = draft_model;
    rp.aligner        = aligner.get();
    task.apply(rp);
    rp.timestamps     = words_asked;
    transcribe_diarizer * diarizer = nullptr;
    std::string diarize_error;
    if (!diarize.load(threads, rp, &diarizer, &diarize_error)) {
        transcribe_session_free(session);
        transcribe_vad_model_free(vad_model);
        transcribe_model_free(draft_model);
        transcribe_model_free(model);
        return die(diarize_error);
    }

    std::string output;
    int exit_code = 0;
    // Files go in groups of the session's batch size, decoded together (their audio is held until the
    // group is done); with --stream one by one, the text printed as it comes.
    const size_t group = stream ? 1 : size_t(std::max(1, transcribe_session_batch_size(session)));
    TextStream shown;
    if (stream) {
        rp.token_callback = [](int32_t, const char * text, size_t n, void * user) {
            const std::string s = static_cast<TextStream *>(user)->push(text, n);
            std::fwrite(s.data(), 1, s.size(), stdout);
            std::fflush(stdout);
        };
        rp.token_user_data = &shown;
    }
    for (size_t first = 0; first < audio_paths.size() && !exit_code; first += group) {
        const size_t n = std::min(group, audio_paths.size() - first);
        std::vector<transcribe_audio> audio(n, transcribe_audio {});
        for (size_t i = 0; i < n && !exit_code; ++i) {
            const transcribe_audio_limits limits {max_audio_s, nullptr, nullptr};
            if ((st = transcribe_audio_load_limited(audio_paths[first + i].c_str(), info.sample_rate, &limits, &audio[i])) !=
                TRANSCRIBE_OK) {
                exit_code = die(st);
            }
        }
        std::vector<const float *>       pcm;
        std::vector<size_t>              lengths;
        std::vector<transcribe_result *> results(n, nullptr);
        std::vector<transcribe_status>   statuses(n, TRANSCRIBE_OK);
        std::string                      run_error;
        for (const transcribe_audio & a : audio) {
            pcm.push_back(a.samples);
            lengths.push_back(a.n_samples);
        }
        if (!exit_code) {
            if (!text_path.empty()) {
                statuses[0] = transcribe_align(session, pcm[0], lengths[0], given_text.c_str(), rp.language, &results[0]);
                run_error   = transcribe_last_error();
            } else if (n == 1) {
                shown = TextStream {};
                statuses[0] = transcribe_run(session, pcm[0], lengths[0], &rp, &results[0]);
                run_error   = transcribe_last_error(); // before another call replaces it
                if (stream) {
                    std::fputs("\n", stdout);
                }
            } else {
                transcribe_run_batch(session, pcm.data(), lengths.data(), int(n), &rp, results.data(), statuses.data());
            }
        }
        transcribe_timings timings;
        transcribe_session_get_timings(session, &timings);
        for (size_t i = 0; i < n && !exit_code; ++i) {
            const std::string & path = audio_paths[first + i];
            if (statuses[i] != TRANSCRIBE_OK && statuses[i] != TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {
                if (n > 1) { // the batch keeps no message per file: this file alone says what went wrong
                    transcribe_result * alone = nullptr;
                    statuses[i] = transcribe_run(session, pcm[i], lengths[i], &rp, &alone);
                    run_error   = transcribe_last_error();
                    transcribe_result_free(alone);
                }
                exit_code = die(path + ": " + transcribe_status_string(statuses[i]) + ": " + run_error);
            } else if (statuses[i] == TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {
                std::fprintf(stderr, "transcribe-cli: warning: %s: truncated: the budget of %d new tokens (or the decoder's length) ran out\n",
                             path.c_str(), max_new_tokens);
            }
            if (!exit_code && !stream) {
                output += render(output_from_result(results[i]), format, &timings, info.name, timestamps);
            }
        }
        for (size_t i = 0; i < n; ++i) {
            transcribe_result_free(results[i]);
            transcribe_audio_free(&audio[i]);
        }
    }
    transcribe_session_free(session);
    transcribe_diarizer_free(diarizer);
    transcribe_vad_model_free(vad_model);
    transcribe_model_free(draft_model);
    transcribe_model_free(model);
    if (exit_code) {
        return exit_code;
    }
    if (output_path.empty()) {
        std::fwrite(output.data(), 1, output.size(), stdout);
    } else {
        std::ofstream f(output_path, std::ios::binary);
        f << output;
        if (!f) {
            return die("cannot write " + output_path);
        }
    }
    return 0;
}
