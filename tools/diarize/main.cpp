// transcribe-diarize: who spoke when in an audio file, by Sortformer, as NeMo's diarize() prints it.
#include "transcribe.h"

#include "../common/tool_errors.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace transcribe_tools;

namespace {

int die(transcribe_status st) { return tool_error("transcribe-diarize", st); }
int die(const std::string & message) { return tool_error("transcribe-diarize", message); }

// A time as NeMo prints it (%.3f), and that text read back (what its segments.json and RTTM hold).
std::string three(double t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", t);
    return buf;
}

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-diarize: speaker segments of an audio file (Sortformer)"};
    std::string model_path, audio_path, yaml_path;
    bool as_json = false, as_rttm = false, streaming = false;
    int threads = 0;
    app.add_option("-m,--model", model_path, "diarizer (GGUF from scripts/convert-sortformer.py)")->required();
    app.add_option("audio", audio_path, "audio file (wav, flac, ogg, mp3, ...)")->required();
    auto * json_flag = app.add_flag("--json", as_json, "print {\"probs\": [[p0, p1, ...] per 80 ms frame], \"segments\": [...]}");
    app.add_flag("--rttm", as_rttm, "print RTTM lines (SPEAKER <file> 1 <start> <duration> <NA> <NA> speaker_<k> <NA> <NA>)")
        ->excludes(json_flag);
    app.add_option("--postprocessing", yaml_path, "NeMo's post-processing YAML (onset, offset, pads, minimum durations)");
    bool offline = false;
    transcribe_diarize_params params = transcribe_diarize_params_init();
    auto * streaming_flag = app.add_flag("--streaming", streaming,
                                         "NeMo's streaming path (speaker cache and FIFO, any length) with the model's "
                                         "streaming sizes (default: offline up to the model's limit, past it streaming "
                                         "on a streaming-trained model)");
    app.add_flag("--offline", offline, "the offline path only (an error past the model's limit)")->excludes(streaming_flag);
    const std::pair<const char *, int *> sizes[] = {
        {"--spkcache-len", &params.spkcache_len},
        {"--fifo-len", &params.fifo_len},
        {"--spkcache-update-period", &params.spkcache_update_period},
        {"--chunk-len", &params.chunk_len},
        {"--chunk-left-context", &params.chunk_left_context},
        {"--chunk-right-context", &params.chunk_right_context}};
    for (const auto & [flag, field] : sizes) {
        app.add_option(flag, *field, "streaming size in 80 ms frames (NeMo's parameter of that name; default: the model's)")
            ->check(CLI::NonNegativeNumber);
    }
    app.add_option("--threads", threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError & e) {
        return app.exit(e);
    }
    transcribe_log_set(quiet_log, nullptr); // errors are reported once, from transcribe_last_error()
    params.mode = streaming ? TRANSCRIBE_DIARIZE_STREAMING : offline ? TRANSCRIBE_DIARIZE_OFFLINE : TRANSCRIBE_DIARIZE_AUTO;
    if (!yaml_path.empty() && transcribe_diarize_params_from_yaml(yaml_path.c_str(), &params) != TRANSCRIBE_OK) {
        return die(std::string("--postprocessing: ") + transcribe_last_error());
    }
    transcribe_diarizer * diarizer = nullptr;
    if (transcribe_status st = transcribe_diarizer_load(model_path.c_str(), threads, &diarizer); st != TRANSCRIBE_OK) {
        return die(st);
    }
    transcribe_audio audio {};
    if (transcribe_status st = transcribe_audio_load(audio_path.c_str(), transcribe_diarizer_sample_rate(diarizer), &audio);
        st != TRANSCRIBE_OK) {
        transcribe_diarizer_free(diarizer);
        return die(st);
    }
    transcribe_diarization * r = nullptr;
    const transcribe_status st = transcribe_diarize(diarizer, audio.samples, audio.n_samples, &params, &r);
    transcribe_audio_free(&audio);
    if (st != TRANSCRIBE_OK) {
        transcribe_diarizer_free(diarizer);
        return die(st);
    }
    const int n_seg = transcribe_diarization_n_segments(r);
    auto speaker = [&](int i) { return "speaker_" + std::to_string(transcribe_diarization_segment_speaker(r, i)); };
    if (as_json) {
        nlohmann::json probs = nlohmann::json::array(), segments = nlohmann::json::array();
        const int T = transcribe_diarization_n_frames(r), S = transcribe_diarization_n_speakers(r);
        const float * p = transcribe_diarization_probs(r);
        for (int t = 0; t < T; ++t) {
            probs.push_back(std::vector<float>(p + size_t(t) * size_t(S), p + size_t(t + 1) * size_t(S)));
        }
        for (int i = 0; i < n_seg; ++i) {
            segments.push_back({{"start", std::stod(three(transcribe_diarization_segment_start(r, i)))},
                                {"end", std::stod(three(transcribe_diarization_segment_end(r, i)))},
                                {"speaker", speaker(i)}});
        }
        std::printf("%s\n", nlohmann::json({{"probs", probs}, {"segments", segments}}).dump().c_str());
    } else {
        std::string uniq = audio_path.substr(audio_path.find_last_of('/') + 1);
        uniq = uniq.substr(0, uniq.find_last_of('.'));
        for (int i = 0; i < n_seg; ++i) {
            const std::string start = three(transcribe_diarization_segment_start(r, i)),
                              end   = three(transcribe_diarization_segment_end(r, i));
            if (as_rttm) {
                std::printf("SPEAKER %s 1 %s %s <NA> <NA> %s <NA> <NA>\n", uniq.c_str(), start.c_str(),
                            three(std::stod(end) - std::stod(start)).c_str(), speaker(i).c_str());
            } else {
                std::printf("%s %s %s\n", start.c_str(), end.c_str(), speaker(i).c_str());
            }
        }
    }
    transcribe_diarization_free(r);
    transcribe_diarizer_free(diarizer);
    return 0;
}
