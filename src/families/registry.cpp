// The family registry: which family loads a GGUF, by its general.architecture key.
#include "core/error.h"
#include "model/family.h"
#include "core/log.h"
#include "ops/matmul.h"

#include <string>

namespace transcribe {

// Families are listed here rather than self-registered: a static library drops unreferenced
// registration objects.
std::unique_ptr<Model> load_canary_qwen(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
std::unique_ptr<Model> load_parakeet_transducer(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
std::unique_ptr<Model> load_parakeet_ctc(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
std::unique_ptr<Model> load_canary_aed(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
std::unique_ptr<Model> load_whisper(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
std::unique_ptr<Model> load_qwen3_asr(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);
std::unique_ptr<Model> load_qwen3_forced_aligner(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);

namespace {
const Family k_families[] = {
    {"canary_qwen", load_canary_qwen},
    {"parakeet_tdt", load_parakeet_transducer},
    {"parakeet_rnnt", load_parakeet_transducer},
    {"parakeet_ctc", load_parakeet_ctc},
    {"canary_aed", load_canary_aed},
    {"whisper", load_whisper},
    {"qwen3_asr", load_qwen3_asr},
    {"qwen3_forced_aligner", load_qwen3_forced_aligner},
};
} // namespace

std::unique_ptr<Model> load_model(const std::string & path, const WeightOptions & options, ggml_backend_dev_t device) {
    auto file = std::make_unique<ModelFile>(path, options);
    file->set_weight_relayout(matmul_weight_relayout());
    if (!file->has_key("general.architecture")) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: no general.architecture key", path.c_str());
    }
    const std::string arch = file->architecture();
    std::string known;
    for (const Family & f : k_families) {
        if (arch == f.architecture) {
            TLOG_INFO("loading %s as %s on %s", path.c_str(), f.architecture, ggml_backend_dev_name(device));
            return f.load(std::move(file), device);
        }
        known += std::string(known.empty() ? "" : ", ") + f.architecture;
    }
    if (arch == "sortformer") {
        fail(TRANSCRIBE_ERR_UNSUPPORTED_ARCH, "model file %s is a diarizer (Sortformer), not a transcriber: give it as the "
             "diarizer (--diarize, transcribe_run_params.diarizer)", path.c_str());
    }
    fail(TRANSCRIBE_ERR_UNSUPPORTED_ARCH, "model file %s: unsupported architecture '%s' (known: %s)", path.c_str(),
         arch.c_str(), known.c_str());
}

} // namespace transcribe
