// The fused epilogues and activations (ops::Epilogue, ops::layer_norm's FEEDS) against the same graphs
// with them as separate passes (TRANSCRIBE_UNFUSED=1 while the graphs are built), in one process: two
// sessions on one model, run alternately on one recording; it prints each round's encoder times, the
// medians and the median ratio (the VM's speed drifts more than the difference between runs of hours).
//   fusion-ab MODEL AUDIO [THREADS=2] [ROUNDS=15]
#include "transcribe.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

bool run(transcribe_session * s, const transcribe_audio & audio, double & encode_ms, double & total_ms) {
    transcribe_run_params rp = transcribe_run_params_init();
    transcribe_result *   result = nullptr;
    if (transcribe_run(s, audio.samples, audio.n_samples, &rp, &result) != TRANSCRIBE_OK) {
        return false;
    }
    transcribe_result_free(result);
    transcribe_timings t;
    transcribe_session_get_timings(s, &t);
    encode_ms = t.encode_ms;
    total_ms  = t.mel_ms + t.encode_ms + t.prefill_ms + t.decode_ms;
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODEL AUDIO [THREADS=2] [ROUNDS=15]\n", argv[0]);
        return 2;
    }
    const int threads = argc > 3 ? std::atoi(argv[3]) : 2, rounds = argc > 4 ? std::atoi(argv[4]) : 15;
    transcribe_model * model = nullptr;
    transcribe_load_params lp = transcribe_load_params_init();
    transcribe_audio audio {};
    if (transcribe_model_load(argv[1], &lp, &model) != TRANSCRIBE_OK || transcribe_audio_load(argv[2], 16000, &audio) != TRANSCRIBE_OK) {
        std::fprintf(stderr, "cannot load %s or %s\n", argv[1], argv[2]);
        return 1;
    }
    transcribe_session_params sp = transcribe_session_params_init();
    sp.n_threads = threads;
    transcribe_session * sessions[2] = {nullptr, nullptr}; // unfused, fused
    double enc = 0, total = 0;
    for (int i = 0; i < 2; ++i) {
        if (transcribe_session_create(model, &sp, &sessions[i]) != TRANSCRIBE_OK) {
            return 1;
        }
        setenv("TRANSCRIBE_UNFUSED", i == 0 ? "1" : "0", 1); // the graphs are built at a session's first run
        if (!run(sessions[i], audio, enc, total) || !run(sessions[i], audio, enc, total)) {
            std::fprintf(stderr, "run failed\n");
            return 1;
        }
    }
    std::vector<double> enc_ms[2], total_ms[2], ratio;
    for (int r = 0; r < rounds; ++r) {
        for (int i = 0; i < 2; ++i) {
            run(sessions[i], audio, enc, total);
            enc_ms[i].push_back(enc);
            total_ms[i].push_back(total);
        }
        ratio.push_back(enc_ms[1].back() / enc_ms[0].back());
        std::printf("round %2d: encoder unfused %7.1f ms, fused %7.1f ms\n", r + 1, enc_ms[0].back(), enc_ms[1].back());
    }
    std::printf("median encoder: unfused %.1f ms, fused %.1f ms; median fused / unfused %.3f\n", median(enc_ms[0]),
                median(enc_ms[1]), median(ratio));
    std::printf("median total (mel + encoder + decode): unfused %.1f ms, fused %.1f ms\n", median(total_ms[0]), median(total_ms[1]));
    for (transcribe_session * s : sessions) {
        transcribe_session_free(s);
    }
    transcribe_audio_free(&audio);
    transcribe_model_free(model);
    return 0;
}
