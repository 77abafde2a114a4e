// libFuzzer: the model load path (GGUF parse, family registry, tensor lookup and shape checks, weight
// placement, tokenizer, mel front end, BatchNorm folding), up to but not including inference.
#include "transcribe.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace {
void quiet(transcribe_log_level, const char *, void *) {}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static const std::string path = "/tmp/transcribe-fuzz-model-" + std::to_string(getpid()) + ".gguf";
    static bool init = [] {
        transcribe_log_set(quiet, nullptr);
        return true;
    }();
    (void) init;
    FILE * f = std::fopen(path.c_str(), "wb");
    if (!f) {
        return 0;
    }
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    transcribe_load_params lp = transcribe_load_params_init();
    lp.backend = TRANSCRIBE_BACKEND_CPU;
    transcribe_model * model = nullptr;
    if (transcribe_model_load(path.c_str(), &lp, &model) == TRANSCRIBE_OK) {
        transcribe_model_info info;
        transcribe_model_get_info(model, &info);
        int32_t ids[64];
        int n = 0;
        transcribe_tokenize(model, "hello world", ids, 64, &n);
        transcribe_model_free(model);
    }
    return 0;
}
