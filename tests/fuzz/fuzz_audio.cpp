// libFuzzer: audio decode from memory (every container libsndfile reads), downmix and resampling.
#include "transcribe.h"

#include <cstdint>

namespace {
void quiet(transcribe_log_level, const char *, void *) {}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static bool init = [] {
        transcribe_log_set(quiet, nullptr);
        return true;
    }();
    (void) init;
    transcribe_audio audio {};
    // The target rate comes from the input too, so resampling paths vary.
    const int rates[] = {16000, 8000, 22050, 44100};
    const int rate = size ? rates[data[0] % 4] : 16000;
    if (transcribe_audio_load_memory(data, size, rate, &audio) == TRANSCRIBE_OK) {
        if (audio.n_samples == 0 || audio.samples == nullptr || audio.sample_rate != rate) {
            __builtin_trap(); // success must mean samples at the requested rate
        }
        transcribe_audio_free(&audio);
    }
    return 0;
}
