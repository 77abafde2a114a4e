// transcribe-vad: where the speech is in an audio file, by Silero VAD.
#include "transcribe.h"

#include "../common/tool_errors.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <string>

using namespace transcribe_tools;

namespace {

int die(transcribe_status st) { return tool_error("transcribe-vad", st); }

} // namespace

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-vad: speech regions of an audio file (Silero VAD)"};
    std::string model_path, audio_path;
    bool as_json = false;
    int threads = 1, sample_rate = 16000;
    transcribe_vad_params vp = transcribe_vad_params_init();
    app.add_option("-m,--model", model_path, "VAD model (GGUF from scripts/convert-silero-vad.py)")->required();
    app.add_option("audio", audio_path, "audio file (wav, flac, ogg, mp3, ...)")->required();
    app.add_flag("--json", as_json, "print {\"probs\": [...], \"segments\": [...]} instead of one region a line");
    app.add_option("--threshold", vp.threshold, "speech at or above this probability")->check(CLI::Range(0.0, 1.0));
    app.add_option("--neg-threshold", vp.neg_threshold, "speech ends below this (default: threshold - 0.15)");
    app.add_option("--min-speech-ms", vp.min_speech_ms, "drop shorter regions")->check(CLI::NonNegativeNumber);
    app.add_option("--min-silence-ms", vp.min_silence_ms, "shorter silences do not end a region")->check(CLI::NonNegativeNumber);
    app.add_option("--speech-pad-ms", vp.speech_pad_ms, "widen regions by this on each side")->check(CLI::NonNegativeNumber);
    app.add_option("--max-speech-s", vp.max_speech_s, "cut longer regions (0: no limit)")->check(CLI::NonNegativeNumber);
    app.add_option("--sample-rate", sample_rate, "run the model's 16000 or 8000 Hz branch")->check(CLI::IsMember({16000, 8000}));
    app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError & e) {
        return app.exit(e);
    }
    transcribe_log_set(quiet_log, nullptr);

    transcribe_vad_model * model = nullptr;
    transcribe_status st = transcribe_vad_model_load(model_path.c_str(), &model);
    if (st != TRANSCRIBE_OK) {
        return die(st);
    }
    transcribe_vad_session * session = nullptr;
    transcribe_audio audio {};
    transcribe_vad_result * result = nullptr;
    double detect_ms = 0;
    if ((st = transcribe_vad_session_create(model, threads, &session)) == TRANSCRIBE_OK &&
        (st = transcribe_audio_load(audio_path.c_str(), sample_rate, &audio)) == TRANSCRIBE_OK) {
        const auto t0 = std::chrono::steady_clock::now();
        st = transcribe_vad_detect(session, audio.samples, audio.n_samples, sample_rate, &vp, &result);
        detect_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    const int code = st == TRANSCRIBE_OK ? 0 : die(st);
    if (result) {
        const double ms_per_sample = 1000.0 / sample_rate;
        nlohmann::ordered_json segments = nlohmann::json::array();
        for (int i = 0; i < transcribe_vad_result_n_segments(result); ++i) {
            const int64_t b = transcribe_vad_result_segment_begin(result, i), e = transcribe_vad_result_segment_end(result, i);
            if (as_json) {
                segments.push_back({{"start_ms", double(b) * ms_per_sample}, {"end_ms", double(e) * ms_per_sample},
                                    {"start_sample", b}, {"end_sample", e}});
            } else {
                std::printf("%.3f\t%.3f\n", double(b) * ms_per_sample / 1000.0, double(e) * ms_per_sample / 1000.0);
            }
        }
        if (as_json) {
            const float * p = transcribe_vad_result_probs(result);
            nlohmann::ordered_json j;
            j["probs"]    = std::vector<float>(p, p + transcribe_vad_result_n_probs(result));
            j["segments"] = segments;
            j["chunk_samples"] = transcribe_vad_result_chunk_samples(result);
            j["sample_rate"]   = sample_rate;
            j["vad_ms"]        = detect_ms; // the model and segmentation, without loading or decoding audio
            std::printf("%s\n", j.dump().c_str());
        }
    }
    transcribe_vad_result_free(result);
    transcribe_audio_free(&audio);
    transcribe_vad_session_free(session);
    transcribe_vad_model_free(model);
    return code;
}
