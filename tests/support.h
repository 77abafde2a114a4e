// Shared helpers for the tests: fixture paths, golden loading, tolerances from MANIFEST.json.
#pragma once

#include "model/family.h"
#include "core/npy.h"

#include "ggml-backend.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace test {

inline const char * kClips[] = {"jfk", "jfk_0p7s", "jfk_div8", "tone_noise_3s"};

// A reference fixture: audio/, golden/<clip>/ and MANIFEST.json with per-golden tolerances (every family's
// fixture has this layout).
class Fixture {
public:
    explicit Fixture(std::string dir) : dir_(std::move(dir)) {}
    std::string path(const std::string & rel) const { return dir_ + "/" + rel; }
    const nlohmann::json & manifest() const;
    double atol(const std::string & clip, const std::string & file) const; // MANIFEST suggested_atol
    transcribe::NpyArray golden(const std::string & clip, const std::string & file) const;
    nlohmann::json golden_json(const std::string & clip, const std::string & file) const;
    std::vector<float> wav_16k(const std::string & clip) const; // the clip through our decoder

private:
    std::string dir_;
    mutable std::unique_ptr<nlohmann::json> manifest_;
};
const Fixture & canary_fixture();
const Fixture & parakeet_fixture();
const Fixture & parakeet_ctc_fixture();
const Fixture & parakeet_rnnt_fixture(); // its encoder goldens are parakeet_fixture()'s
const Fixture & canary_aed_fixture();
const Fixture & canary_aed_v2_fixture(); // its audio and encoder goldens are canary_aed_fixture()'s
const Fixture & whisper_fixture();       // its MANIFEST keys goldens by their path (golden/<clip>/<file>)
const Fixture & qwen3_asr_fixture();     // its MANIFEST keeps tolerances per clip (clips.<clip>.suggested_atol)
const Fixture & qwen3_aligner_fixture(); // golden/<run>/; its audio is qwen3_asr_fixture()'s

std::string fixture(const std::string & rel);   // path under the tiny fixture
std::string model(const std::string & name);    // path of a converted test model
const nlohmann::json & manifest();
double golden_atol(const std::string & clip, const std::string & file); // MANIFEST suggested_atol
transcribe::NpyArray golden(const std::string & clip, const std::string & file);
std::vector<int32_t> golden_ids(const std::string & clip);
std::vector<float> read_wav_16k(const std::string & clip); // the fixture clip through our decoder
float max_abs_diff(const std::vector<float> & a, const std::vector<float> & b);
float max_abs(const std::vector<float> & v);
// Within REL of the largest |REF| (a bound for F32 results against a reference computed in double), that
// largest finite and above MIN_TOP (outputs of a size the bound means something for).
void expect_close_to(const std::vector<float> & ours, const std::vector<float> & ref, float rel, float min_top);

// An op test's F32 operands: tensors in one CPU backend buffer, filled with seeded normal values, and
// the 2-thread CPU backend that runs the op (through compute_on_cpu).
class CpuOperands {
public:
    CpuOperands(int max_tensors, unsigned seed);
    ~CpuOperands();
    CpuOperands(const CpuOperands &) = delete;
    CpuOperands & operator=(const CpuOperands &) = delete;

    ggml_tensor * add(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1); // before allocate()
    void          allocate();
    // Normal values times SPREAD into T (allocated), returned; from index NAN_FROM of dimension 2 on, NaN:
    // values an op must not read.
    std::vector<float> fill(ggml_tensor * t, float spread, int64_t nan_from = INT64_MAX);

    ggml_backend_t cpu = nullptr;

private:
    ggml_context *        ctx_ = nullptr;
    ggml_backend_buffer_t buf_ = nullptr;
    std::mt19937          rng_;
};

// Builds the graph BUILD returns the output of, runs it on the CPU backend CPU, returns that output (F32).
std::vector<float> compute_on_cpu(ggml_backend_t cpu, const std::function<ggml_tensor *(ggml_context *)> & build);
// The same, the result's bytes as they are (any type); N_NODES: the graph's node count.
std::vector<uint8_t> compute_bytes_on_cpu(ggml_backend_t cpu, const std::function<ggml_tensor *(ggml_context *)> & build,
                                          int * n_nodes = nullptr);
std::vector<float> golden_margins(const std::string & clip); // top-1 minus top-2 logit per step

std::unique_ptr<transcribe::Model> load(const std::string & model_name, bool cpu_repack = true); // CPU, mapped

struct ForcedRun {
    transcribe::Transcript          transcript;
    std::vector<std::vector<float>> step_logits; // one per generated position
};
// Teacher-forced on the golden ids: each step's logits are those the reference computed. With a dump
// directory, the run also writes its TRANSCRIBE_DUMP_DIR files there.
ForcedRun forced_run(transcribe::Model & model, const std::string & clip, ggml_type kv, const std::string & dump_dir = "");
// A fixture clip through a fresh 2-thread session of MODEL: its transcript, and what the family gives as
// step logits (joint evaluations, CTC frames' log-probabilities, LLM steps) in *STEP_LOGITS. With a dump
// directory, the run also writes its TRANSCRIBE_DUMP_DIR files there.
// (text, t0 ms, t1 ms) of a transcript's words or segments, and of NeMo's word or segment offsets
// (LIST: hypothesis timestamp entries, text under TEXT_KEY, start/end_offset in frames of FRAME_MS).
using TimeSpans = std::vector<std::tuple<std::string, int64_t, int64_t>>;
TimeSpans word_spans(const transcribe::Transcript & t);
TimeSpans segment_spans(const transcribe::Transcript & t);
TimeSpans nemo_offset_spans(const nlohmann::json & list, const char * text_key, int64_t frame_ms);

struct ClipRun {
    transcribe::Transcript          transcript;
    std::vector<std::vector<float>> step_logits;
};
ClipRun run_clip(transcribe::Model & model, const Fixture & fixture, const std::string & clip, const std::string & dump_dir = "",
                 transcribe::DecoderType decoder = transcribe::DecoderType::Default);
ClipRun run_clip(transcribe::Model & model, const Fixture & fixture, const std::string & clip, transcribe::RunOptions options,
                 const std::string & dump_dir = "");
// 16 free-running greedy ids (no stop at EOS, like the goldens).
std::vector<int32_t> greedy(transcribe::Model & model, const std::string & clip, ggml_type kv);

// The end of an attention reference in double: one query's scaled SCORES through a softmax, then
// OUT(d) = sum_j p_j * VALUE(j, d) for d < HD.
template <class Value, class Out> void softmax_weighted_sum(std::vector<double> scores, int64_t hd, Value value, Out out) {
    double top = -INFINITY;
    for (const double x : scores) {
        top = std::max(top, x);
    }
    double sum = 0;
    for (double & x : scores) {
        x = std::exp(x - top);
        sum += x;
    }
    for (int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (size_t j = 0; j < scores.size(); ++j) {
            o += scores[j] * value(int64_t(j), d);
        }
        out(d, o / sum);
    }
}

} // namespace test
