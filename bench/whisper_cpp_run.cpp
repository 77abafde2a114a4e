// whisper.cpp (libwhisper, built from its own source) timed as transcribe-bench times us: the log-mel,
// one 30 s encoder pass, the prompt, then exactly NEW greedy decoder steps (the argmax of each step's
// logits; no logit rules, so whisper.cpp does a little less work per step than we do). Medians of RUNS
// after one warm-up run; one JSON line, the field names transcribe-bench --json uses.
// Built by bench/whisper_compare.sh against the whisper.cpp tree it is given; not part of our build.
//   usage: whisper_cpp_run MODEL.bin AUDIO.wav THREADS NEW RUNS
#include "whisper.h"

#include <sndfile.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s MODEL.bin AUDIO.wav THREADS NEW RUNS\n", argv[0]);
        return 2;
    }
    const int threads = std::atoi(argv[3]), n_new = std::atoi(argv[4]), runs = std::atoi(argv[5]);
    SF_INFO info {};
    SNDFILE * f = sf_open(argv[2], SFM_READ, &info);
    if (!f || info.samplerate != WHISPER_SAMPLE_RATE || info.channels != 1) {
        std::fprintf(stderr, "%s: need 16 kHz mono audio\n", argv[2]);
        return 1;
    }
    std::vector<float> pcm(size_t(info.frames));
    sf_readf_float(f, pcm.data(), info.frames);
    sf_close(f);

    whisper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    whisper_context_params cparams = whisper_context_default_params();
    cparams.use_gpu = false;
    const double t_load = now_ms();
    whisper_context * ctx = whisper_init_from_file_with_params(argv[1], cparams);
    if (!ctx) {
        std::fprintf(stderr, "%s: not loaded\n", argv[1]);
        return 1;
    }
    const double load_ms = now_ms() - t_load;
    const int n_vocab = whisper_n_vocab(ctx);
    std::vector<double> mel, enc, prefill, decode;
    for (int run = 0; run <= runs; ++run) {
        const double t0 = now_ms();
        if (whisper_pcm_to_mel(ctx, pcm.data(), int(pcm.size()), threads) != 0) return 1;
        const double t1 = now_ms();
        if (whisper_encode(ctx, 0, threads) != 0) return 1;
        const double t2 = now_ms();
        std::vector<whisper_token> prompt = {whisper_token_sot(ctx), whisper_token_lang(ctx, whisper_lang_id("en")),
                                             whisper_token_transcribe(ctx), whisper_token_not(ctx)};
        if (whisper_decode(ctx, prompt.data(), int(prompt.size()), 0, threads) != 0) return 1;
        const double t3 = now_ms();
        const float * row = whisper_get_logits(ctx) + size_t(prompt.size() - 1) * size_t(n_vocab);
        int n_past = int(prompt.size());
        for (int step = 0; step < n_new; ++step) {
            whisper_token next = whisper_token(std::max_element(row, row + n_vocab) - row);
            if (whisper_decode(ctx, &next, 1, n_past++, threads) != 0) return 1;
            row = whisper_get_logits(ctx);
        }
        const double t4 = now_ms();
        if (run > 0) { // the first is the warm-up
            mel.push_back(t1 - t0);
            enc.push_back(t2 - t1);
            prefill.push_back(t3 - t2);
            decode.push_back(t4 - t3);
        }
    }
    rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("{\"load_ms\": %.1f, \"mel_ms\": %.1f, \"encoder_ms\": %.1f, \"prefill_ms\": %.1f, \"decode_ms\": %.1f, "
                "\"decode_tokens\": %d, \"peak_rss_mb\": %.1f}\n",
                load_ms, median(mel), median(enc), median(prefill), median(decode), n_new, ru.ru_maxrss / 1024.0);
    whisper_free(ctx);
    return 0;
}
