// transcribe-bench: load, mel, encoder, prefill and decode timings of one model on one audio file
// (or on --batch N copies of it decoded together).
#include "transcribe.h"

#include "../common/diarize_option.h"
#include "../common/draft_option.h"
#include "../common/model_options.h"
#include "../common/task_options.h"
#include "../common/tool_errors.h"
#include "../common/vad_options.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Stat {
    double median = 0, min = 0, max = 0;
};

Stat stat_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    Stat s;
    if (v.empty()) {
        return s;
    }
    s.min    = v.front();
    s.max    = v.back();
    s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    return s;
}

double peak_rss_mb() {
    rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_maxrss) / 1024.0;
}

int die(const std::string & what) {
    std::fprintf(stderr, "transcribe-bench: error: %s: %s\n", what.c_str(), transcribe_last_error());
    return 1;
}

void quiet(transcribe_log_level level, const char * msg, void *) {
    if (level >= TRANSCRIBE_LOG_ERROR) {
        std::fprintf(stderr, "transcribe-bench: %s\n", msg);
    }
}

} // namespace

// --native-stream: each run pushes the audio a packet at a time; the push that completes a chunk runs its
// step, so a push's time is the step's (or a few steps', counted apart: the time shared among them).
int bench_native_stream(transcribe_model * model, transcribe_session * session, const transcribe_run_params & rp,
                        const transcribe_audio & audio, int warmup, int runs, int packet_ms, bool as_json, int threads) {
    transcribe_model_info info;
    transcribe_model_get_info(model, &info);
    const size_t packet = size_t(info.sample_rate) * size_t(packet_ms) / 1000;
    std::vector<double> totals, step_ms;
    int n_steps = 0;
    for (int i = 0; i < warmup + runs; ++i) {
        transcribe_native_stream * stream = nullptr;
        if (transcribe_native_stream_open(session, &rp, &stream) != TRANSCRIBE_OK) {
            return die(std::string("opening a native stream: ") + transcribe_last_error());
        }
        double total = 0;
        int steps = 0;
        auto timed = [&](auto && f) {
            const auto t0 = std::chrono::steady_clock::now();
            const transcribe_status st = f();
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            int n = 0;
            transcribe_stream_step s;
            while (transcribe_native_stream_next_step(stream, &s)) {
                ++n;
            }
            if (i >= warmup) {
                for (int k = 0; k < n; ++k) {
                    step_ms.push_back(ms / n);
                }
            }
            total += ms, steps += n;
            return st;
        };
        for (size_t at = 0; at < audio.n_samples; at += packet) {
            const size_t n = std::min(packet, audio.n_samples - at);
            if (timed([&] { return transcribe_native_stream_push(stream, audio.samples + at, n); }) != TRANSCRIBE_OK) {
                return die(std::string("pushing: ") + transcribe_last_error());
            }
        }
        if (timed([&] { return transcribe_native_stream_finish(stream); }) != TRANSCRIBE_OK) {
            return die(std::string("finishing: ") + transcribe_last_error());
        }
        transcribe_native_stream_free(stream);
        if (i >= warmup) {
            totals.push_back(total);
            n_steps = steps;
        }
    }
    const double audio_s = double(audio.n_samples) / info.sample_rate;
    const Stat   st = stat_of(totals);
    std::sort(step_ms.begin(), step_ms.end());
    auto pct = [&](double p) { return step_ms.empty() ? 0.0 : step_ms[size_t(p * double(step_ms.size() - 1))]; };
    const double per_s = st.median / 1000.0 / audio_s;
    if (as_json) {
        nlohmann::ordered_json j = {{"model", info.name}, {"architecture", info.architecture}, {"threads", threads},
                                    {"audio_s", audio_s}, {"runs", runs}, {"steps", n_steps}, {"total_ms", st.median},
                                    {"compute_s_per_audio_s", per_s}, {"step_ms_p50", pct(0.5)}, {"step_ms_p95", pct(0.95)},
                                    {"step_ms_max", pct(1.0)}, {"x_realtime", per_s > 0 ? 1.0 / per_s : 0.0},
                                    {"peak_rss_mb", peak_rss_mb()}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("model %s: %.2f s of audio streamed in %d steps, %d runs after %d warm-up\n", info.name, audio_s, n_steps,
                    runs, warmup);
        std::printf("compute   %9.4f s a second of audio (%.1f x real time)\n", per_s, per_s > 0 ? 1.0 / per_s : 0.0);
        std::printf("step      %9.1f ms median, %.1f ms p95, %.1f ms max\n", pct(0.5), pct(0.95), pct(1.0));
        std::printf("peak RSS  %9.1f MB\n", peak_rss_mb());
    }
    return 0;
}

int main(int argc, char ** argv) {
    CLI::App app {"transcribe-bench: timings of one model on one audio file"};
    transcribe_tools::ModelOptions model_options;
    model_options.add_to(app);
    app.get_option("--model")->required();
    std::string audio_path, draft_ids_path;
    int warmup = 1, runs = 5, fixed_new_tokens = 0, max_new_tokens = 256, batch = 1;
    bool as_json = false, use_mmap = false, native_stream = false;
    int  packet_ms = 20;
    app.add_option("-f,--file", audio_path, "audio file")->required();
    app.add_option("--warmup", warmup, "untimed runs first")->check(CLI::NonNegativeNumber);
    app.add_option("--runs", runs, "timed runs")->check(CLI::PositiveNumber);
    app.add_option("--fixed-new-tokens", fixed_new_tokens, "decode exactly N tokens, ignoring end of generation")
        ->check(CLI::PositiveNumber);
    app.add_option("--max-new-tokens", max_new_tokens, "token budget when not fixed")->check(CLI::PositiveNumber);
    app.add_option("--batch", batch, "decode N copies of the audio together (aggregate_decode_tokens_per_s: all of them)")
        ->check(CLI::Range(1, 64));
    app.add_flag("--json", as_json, "print one JSON object with the medians");
    app.add_flag("--native-stream", native_stream,
                 "stream the audio through a model that transcribes as it hears, a packet at a time as fast as it "
                 "goes: the compute a second of audio takes and each encoder step's time");
    app.add_option("--packet-ms", packet_ms, "--native-stream: the audio pushed at a time (default 20)")->check(CLI::Range(1, 10000));
    app.add_flag("--mmap", use_mmap, "use the weights from the mapped file instead of reading them into memory");
    transcribe_tools::DraftOption draft_option;
    draft_option.add_to(app);
    transcribe_tools::TaskOptions task;
    task.add_to(app);
    app.add_option("--draft-ids", draft_ids_path,
                   "speculative decoding with these ids as the draft (a file of whitespace-separated ids)")
        ->excludes("--draft");
    transcribe_tools::VadOptions vad;
    vad.add_to(app);
    transcribe_tools::DiarizeOption diarize_option;
    diarize_option.add_to(app);
    CLI11_PARSE(app, argc, argv);
    transcribe_log_set(quiet, nullptr);

    transcribe_load_params lp;
    if (!model_options.load_params(&lp)) {
        return die("--backend");
    }
    lp.use_mmap = use_mmap;
    transcribe_model * model = nullptr;
    if (transcribe_model_load(model_options.path.c_str(), &lp, &model) != TRANSCRIBE_OK) {
        return die("loading " + model_options.path);
    }
    transcribe_model_info info;
    transcribe_model_get_info(model, &info);
    transcribe_audio audio {};
    if (transcribe_audio_load(audio_path.c_str(), info.sample_rate, &audio) != TRANSCRIBE_OK) {
        return die("reading " + audio_path);
    }
    transcribe_session_params sp = model_options.session_params();
    sp.n_batch                   = batch;
    transcribe_session * session = nullptr;
    if (transcribe_session_create(model, &sp, &session) != TRANSCRIBE_OK) {
        return die("creating a session");
    }
    transcribe_vad_model * vad_model = nullptr;
    if (!vad.load(&vad_model)) {
        return die("loading " + vad.model_path);
    }
    // Prefill and a token budget are an LLM decoder's; a transducer's decoding is bounded by the audio.
    const bool llm = info.token_budget;
    if (!llm && fixed_new_tokens > 0) {
        return transcribe_tools::tool_error("transcribe-bench", std::string("--fixed-new-tokens: model ") + info.name + " (" + info.architecture +
                   ") decodes as far as the audio goes, not to a token budget");
    }
    transcribe_model * draft = nullptr;
    std::string draft_error;
    if (!draft_option.load(model, lp, &draft, &draft_error)) {
        return transcribe_tools::tool_error("transcribe-bench", draft_error);
    }
    if (!draft_ids_path.empty() && !info.speculative) {
        return transcribe_tools::tool_error("transcribe-bench", std::string("--draft-ids: model ") + info.name + " (" +
                                            info.architecture + ") does not decode with a draft");
    }
    std::vector<int32_t> draft_ids;
    if (!draft_ids_path.empty()) {
        std::ifstream f(draft_ids_path);
        long long id = 0;
        while (f >> id) {
            if (id < 0 || id >= info.n_vocab) {
                return transcribe_tools::tool_error("transcribe-bench", "--draft-ids: id " + std::to_string(id) +
                                                    " outside the vocabulary of " + std::to_string(info.n_vocab));
            }
            draft_ids.push_back(int32_t(id));
        }
        if (!f.eof()) {
            return transcribe_tools::tool_error("transcribe-bench", "--draft-ids: " + draft_ids_path +
                                                " is not a list of whitespace-separated ids");
        }
    }
    const bool drafted = draft || !draft_ids.empty();
    transcribe_run_params rp = transcribe_run_params_init();
    rp.draft          = draft;
    rp.draft_ids      = draft_ids.data();
    rp.n_draft_ids    = int(draft_ids.size());
    rp.max_new_tokens = fixed_new_tokens > 0 ? fixed_new_tokens : max_new_tokens;
    rp.ignore_eos     = fixed_new_tokens > 0;
    rp.vad            = vad_model;
    rp.vad_params     = vad.params;
    task.apply(rp);
    transcribe_diarizer * diarizer = nullptr;
    std::string diarize_error;
    if (!diarize_option.load(model_options.threads, rp, &diarizer, &diarize_error)) {
        return transcribe_tools::tool_error("transcribe-bench", diarize_error);
    }

    if (native_stream) {
        return bench_native_stream(model, session, rp, audio, warmup, runs, packet_ms, as_json, model_options.threads);
    }
    if (batch > 1 && transcribe_session_batch_size(session) < batch) {
        return transcribe_tools::tool_error("transcribe-bench", std::string("--batch: model ") + info.name + " (" +
                                            info.architecture + ") decodes one recording at a time");
    }

    std::vector<double> diar_t, vad_t, draft_t, mel, enc, pre, dec, pre_tps, dec_tps, agg_tps, total;
    int n_prefill = 0, n_decode = 0;
    transcribe_timings last {};
    std::vector<int32_t> tokens; // the first recording's ids, last run
    const std::vector<const float *> copies(size_t(batch), audio.samples);
    const std::vector<size_t>        lengths(size_t(batch), audio.n_samples);
    std::vector<transcribe_result *> results(static_cast<size_t>(batch));
    std::vector<transcribe_status>   statuses(static_cast<size_t>(batch));
    for (int i = 0; i < warmup + runs; ++i) {
        const transcribe_status st =
            transcribe_run_batch(session, copies.data(), lengths.data(), batch, &rp, results.data(), statuses.data());
        if (results[0]) {
            const int32_t * ids = transcribe_result_tokens(results[0]);
            tokens.assign(ids, ids + transcribe_result_n_tokens(results[0]));
        }
        for (transcribe_result *& r : results) {
            transcribe_result_free(r);
            r = nullptr;
        }
        if (st != TRANSCRIBE_OK && st != TRANSCRIBE_ERR_OUTPUT_TRUNCATED) {
            return die("run");
        }
        if (i < warmup) {
            continue;
        }
        transcribe_timings t;
        transcribe_session_get_timings(session, &t);
        vad_t.push_back(t.vad_ms);
        diar_t.push_back(t.diarize_ms);
        draft_t.push_back(t.draft_ms);
        last = t;
        mel.push_back(t.mel_ms);
        enc.push_back(t.encode_ms);
        pre.push_back(t.prefill_ms);
        dec.push_back(t.decode_ms);
        pre_tps.push_back(t.prefill_ms > 0 ? 1000.0 * t.n_prefill_tokens / t.prefill_ms : 0);
        // Per sequence: each of the batch's sequences got a token per step.
        dec_tps.push_back(t.decode_ms > 0 ? 1000.0 * t.n_decode_tokens / batch / t.decode_ms : 0);
        agg_tps.push_back(t.decode_ms > 0 ? 1000.0 * t.n_decode_tokens / t.decode_ms : 0);
        total.push_back(t.diarize_ms + t.vad_ms + t.draft_ms + t.mel_ms + t.encode_ms + t.prefill_ms + t.decode_ms);
        n_prefill = t.n_prefill_tokens / batch;
        n_decode  = t.n_decode_tokens / batch;
    }
    const double audio_s = double(audio.n_samples) / info.sample_rate * batch;
    const Stat sdr = stat_of(draft_t), sdi = stat_of(diar_t);
    const Stat sv = stat_of(vad_t), sm = stat_of(mel), se = stat_of(enc), sp_ = stat_of(pre), sd = stat_of(dec), stot = stat_of(total);
    const Stat spt = stat_of(pre_tps), sdt = stat_of(dec_tps), sat = stat_of(agg_tps);
    const double x_rt = stot.median > 0 ? audio_s / (stot.median / 1000.0) : 0;
    const double rss  = peak_rss_mb();
    if (as_json) {
        nlohmann::ordered_json j = {{"model", info.name}, {"architecture", info.architecture}, {"backend", info.backend},
                                    {"threads", model_options.threads}, {"batch", batch}, {"audio_s", audio_s}, {"runs", runs}};
        if (llm) {
            j["prefill_tokens"] = n_prefill;
        }
        j["decode_tokens"] = n_decode;
        j["load_ms"]       = info.load_ms;
        j["mel_ms"]        = sm.median;
        j["encoder_ms"]    = se.median;
        if (llm) {
            j["prefill_ms"] = sp_.median;
        }
        j["decode_ms"] = sd.median;
        if (llm) {
            j["prefill_tokens_per_s"] = spt.median;
        }
        j["decode_tokens_per_s"] = sdt.median;
        j["aggregate_decode_tokens_per_s"] = sat.median;
        j["x_realtime"]          = x_rt;
        j["peak_rss_mb"]         = rss;
        if (vad_model) {
            j["vad_ms"] = sv.median;
        }
        if (diarizer) {
            j["diarize_ms"] = sdi.median;
        }
        if (drafted) {
            // Counts of the last timed run (every run decodes the same ids, so the same counts).
            j["draft_ms"]        = sdr.median;
            j["decode_steps"]    = last.n_decode_steps / batch;
            j["drafted_tokens"]  = last.n_drafted_tokens;
            j["accepted_tokens"] = last.n_accepted_tokens;
            j["verify_steps"]    = last.n_verify_steps;
            j["acceptance_rate"] = last.n_drafted_tokens > 0 ? double(last.n_accepted_tokens) / last.n_drafted_tokens : 0.0;
        }
        j["tokens"] = tokens;
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("model %s on %s, %s (%.2f s of audio), %d runs after %d warm-up\n", info.name, info.backend,
                    audio_path.c_str(), audio_s, runs, warmup);
        std::printf("load      %9.1f ms\n", info.load_ms);
        std::printf("%-9s %9s %9s %9s\n", "stage", "median", "min", "max");
        if (vad_model) {
            std::printf("%-9s %9.1f %9.1f %9.1f ms\n", "vad", sv.median, sv.min, sv.max);
        }
        if (diarizer) {
            std::printf("%-9s %9.1f %9.1f %9.1f ms\n", "diarize", sdi.median, sdi.min, sdi.max);
        }
        if (drafted) {
            std::printf("%-9s %9.1f %9.1f %9.1f ms\n", "draft", sdr.median, sdr.min, sdr.max);
        }
        const std::pair<const char *, Stat> rows[] = {{"mel", sm}, {"encoder", se}, {"prefill", sp_}, {"decode", sd}, {"total", stot}};
        for (const auto & [name, s] : rows) {
            if (llm || std::string(name) != "prefill") {
                std::printf("%-9s %9.1f %9.1f %9.1f ms\n", name, s.median, s.min, s.max);
            }
        }
        if (llm) {
            std::printf("prefill   %9.1f tokens/s (%d tokens)\n", spt.median, n_prefill);
        }
        std::printf("decode    %9.1f tokens/s (%d tokens)\n", sdt.median, n_decode);
        if (drafted) {
            std::printf("draft     %d of %d proposed tokens kept, in %d of %d steps\n", last.n_accepted_tokens,
                        last.n_drafted_tokens, last.n_verify_steps, last.n_decode_steps);
        }
        if (batch > 1) {
            std::printf("decode    %9.1f tokens/s over the batch of %d\n", sat.median, batch);
        }
        std::printf("speed     %9.2f x real time (audio seconds / processing seconds)\n", x_rt);
        std::printf("peak RSS  %9.1f MB\n", rss);
    }
    transcribe_session_free(session);
    transcribe_audio_free(&audio);
    transcribe_vad_model_free(vad_model);
    transcribe_model_free(draft);
    transcribe_model_free(model);
    transcribe_diarizer_free(diarizer);
    return 0;
}
