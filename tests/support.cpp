#include "support.h"

#include <cstdlib>

#include "core/audio.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

namespace test {

const nlohmann::json & Fixture::manifest() const {
    if (!manifest_) {
        std::ifstream f(path("MANIFEST.json"));
        manifest_ = std::make_unique<nlohmann::json>(nlohmann::json::parse(f));
    }
    return *manifest_;
}

double Fixture::atol(const std::string & clip, const std::string & file) const {
    return manifest()["goldens"][clip][file]["suggested_atol"].get<double>();
}

transcribe::NpyArray Fixture::golden(const std::string & clip, const std::string & file) const {
    return transcribe::npy_read(path("golden/" + clip + "/" + file));
}

nlohmann::json Fixture::golden_json(const std::string & clip, const std::string & file) const {
    std::ifstream f(path("golden/" + clip + "/" + file));
    return nlohmann::json::parse(f);
}

std::vector<float> Fixture::wav_16k(const std::string & clip) const {
    return transcribe::audio_decode_file(path("audio/" + clip + ".wav"), 16000);
}

const Fixture & canary_fixture() {
    static const Fixture f(TINY_FIXTURE);
    return f;
}

const Fixture & parakeet_ctc_fixture() {
    static const Fixture f(PARAKEET_CTC_FIXTURE);
    return f;
}

const Fixture & parakeet_rnnt_fixture() {
    static const Fixture f(std::string(PARAKEET_CTC_FIXTURE) + "/../parakeet-rnnt-tiny");
    return f;
}

const Fixture & canary_aed_fixture() {
    static const Fixture f(CANARY_AED_FIXTURE);
    return f;
}

const Fixture & whisper_fixture() {
    static const Fixture f(WHISPER_FIXTURE);
    return f;
}

const Fixture & qwen3_asr_fixture() {
    static const Fixture f(std::string(CANARY_AED_FIXTURE) + "/../qwen3-asr-tiny");
    return f;
}

const Fixture & qwen3_aligner_fixture() {
    static const Fixture f(std::string(CANARY_AED_FIXTURE) + "/../qwen3-aligner-tiny");
    return f;
}

const Fixture & canary_aed_v2_fixture() {
    static const Fixture f(std::string(CANARY_AED_FIXTURE) + "/../canary-aed-v2-tiny");
    return f;
}

const Fixture & parakeet_fixture() {
    static const Fixture f(PARAKEET_FIXTURE);
    return f;
}

std::string fixture(const std::string & rel) { return canary_fixture().path(rel); }
std::string model(const std::string & name) { return std::string(TEST_MODELS) + "/" + name; }
const nlohmann::json & manifest() { return canary_fixture().manifest(); }
double golden_atol(const std::string & clip, const std::string & file) { return canary_fixture().atol(clip, file); }
transcribe::NpyArray golden(const std::string & clip, const std::string & file) { return canary_fixture().golden(clip, file); }

std::vector<int32_t> golden_ids(const std::string & clip) {
    std::ifstream f(fixture("golden/" + clip + "/greedy_ids.json"));
    return nlohmann::json::parse(f).get<std::vector<int32_t>>();
}

std::vector<float> read_wav_16k(const std::string & clip) { return canary_fixture().wav_16k(clip); }

float max_abs_diff(const std::vector<float> & a, const std::vector<float> & b) {
    EXPECT_EQ(a.size(), b.size());
    float m = 0.0f;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const float d = std::fabs(a[i] - b[i]);
        m = std::isnan(d) ? INFINITY : std::max(m, d);
    }
    return m;
}

float max_abs(const std::vector<float> & v) {
    float m = 0.0f;
    for (float x : v) {
        m = std::isnan(x) ? INFINITY : std::max(m, std::fabs(x));
    }
    return m;
}

std::vector<uint8_t> compute_bytes_on_cpu(ggml_backend_t cpu, const std::function<ggml_tensor *(ggml_context *)> & build,
                                          int * n_nodes) {
    ggml_init_params p = {ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_cgraph *  gf  = ggml_new_graph(ctx);
    ggml_tensor *  y   = build(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_gallocr_t alloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    EXPECT_TRUE(ggml_gallocr_alloc_graph(alloc, gf));
    EXPECT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
    std::vector<uint8_t> out(ggml_nbytes(y));
    ggml_backend_tensor_get(y, out.data(), 0, out.size());
    if (n_nodes) {
        *n_nodes = ggml_graph_n_nodes(gf);
    }
    ggml_gallocr_free(alloc);
    ggml_free(ctx);
    return out;
}

std::vector<float> compute_on_cpu(ggml_backend_t cpu, const std::function<ggml_tensor *(ggml_context *)> & build) {
    const std::vector<uint8_t> bytes = compute_bytes_on_cpu(cpu, build);
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

void expect_close_to(const std::vector<float> & ours, const std::vector<float> & ref, float rel, float min_top) {
    ASSERT_EQ(ours.size(), ref.size());
    const float top = max_abs(ref), diff = max_abs_diff(ours, ref);
    EXPECT_TRUE(std::isfinite(top)) << "the reference holds NaN or inf";
    EXPECT_GT(top, min_top);
    EXPECT_LE(diff, rel * top) << "max |diff| " << diff << " of max |ref| " << top;
}

CpuOperands::CpuOperands(int max_tensors, unsigned seed) : cpu(ggml_backend_cpu_init()), rng_(seed) {
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_init_params p = {ggml_tensor_overhead() * size_t(max_tensors), nullptr, true};
    ctx_ = ggml_init(p);
}

CpuOperands::~CpuOperands() {
    ggml_backend_buffer_free(buf_);
    ggml_free(ctx_);
    ggml_backend_free(cpu);
}

ggml_tensor * CpuOperands::add(int64_t ne0, int64_t ne1, int64_t ne2) {
    return ggml_new_tensor_3d(ctx_, GGML_TYPE_F32, ne0, ne1, ne2);
}

void CpuOperands::allocate() {
    buf_ = ggml_backend_alloc_ctx_tensors(ctx_, cpu);
    EXPECT_TRUE(buf_);
}

std::vector<float> CpuOperands::fill(ggml_tensor * t, float spread, int64_t nan_from) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> f(size_t(ggml_nelements(t)));
    const int64_t slice = t->ne[0] * t->ne[1];
    for (size_t i = 0; i < f.size(); ++i) {
        f[i] = int64_t(i) / slice >= nan_from ? NAN : spread * normal(rng_);
    }
    ggml_backend_tensor_set(t, f.data(), 0, f.size() * sizeof(float));
    return f;
}

std::vector<float> golden_margins(const std::string & clip) {
    std::ifstream f(fixture("golden/" + clip + "/top2_margin.json"));
    return nlohmann::json::parse(f).get<std::vector<float>>();
}

std::unique_ptr<transcribe::Model> load(const std::string & model_name, bool cpu_repack) {
    transcribe::WeightOptions options;
    options.use_mmap   = true;
    options.cpu_repack = cpu_repack;
    return transcribe::load_model(model(model_name), options, ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
}

ForcedRun forced_run(transcribe::Model & m, const std::string & clip, ggml_type kv, const std::string & dump_dir) {
    transcribe::SessionOptions so;
    so.n_threads = 2;
    so.kv_type   = kv;
    auto session = m.new_session(so);
    const auto ids = golden_ids(clip);
    ForcedRun r;
    transcribe::RunOptions ro;
    ro.max_new_tokens = int(ids.size());
    ro.ignore_eos     = true;
    ro.force_tokens   = &ids;
    ro.step_logits    = &r.step_logits;
    if (!dump_dir.empty()) {
        setenv("TRANSCRIBE_DUMP_DIR", dump_dir.c_str(), 1);
    }
    const auto pcm = read_wav_16k(clip);
    r.transcript = session->run(pcm.data(), pcm.size(), ro);
    unsetenv("TRANSCRIBE_DUMP_DIR");
    return r;
}

TimeSpans word_spans(const transcribe::Transcript & t) {
    TimeSpans out;
    for (const transcribe::Word & w : t.words) {
        out.emplace_back(w.text, w.t0_ms, w.t1_ms);
    }
    return out;
}

TimeSpans segment_spans(const transcribe::Transcript & t) {
    TimeSpans out;
    for (const transcribe::Segment & s : t.segments) {
        out.emplace_back(s.text, s.t0_ms, s.t1_ms);
    }
    return out;
}

TimeSpans nemo_offset_spans(const nlohmann::json & list, const char * text_key, int64_t frame_ms) {
    TimeSpans out;
    for (const auto & w : list) {
        out.emplace_back(w[text_key].get<std::string>(), w["start_offset"].get<int64_t>() * frame_ms,
                         w["end_offset"].get<int64_t>() * frame_ms);
    }
    return out;
}

ClipRun run_clip(transcribe::Model & model, const Fixture & fixture, const std::string & clip, const std::string & dump_dir,
                 transcribe::DecoderType decoder) {
    transcribe::RunOptions ro;
    ro.decoder_type = decoder;
    return run_clip(model, fixture, clip, ro, dump_dir);
}

ClipRun run_clip(transcribe::Model & model, const Fixture & fixture, const std::string & clip, transcribe::RunOptions ro,
                 const std::string & dump_dir) {
    transcribe::SessionOptions so;
    so.n_threads = 2;
    auto session = model.new_session(so);
    ClipRun r;
    ro.step_logits = &r.step_logits;
    if (!dump_dir.empty()) {
        setenv("TRANSCRIBE_DUMP_DIR", dump_dir.c_str(), 1);
    }
    const std::vector<float> pcm = fixture.wav_16k(clip);
    r.transcript = session->run(pcm.data(), pcm.size(), ro);
    unsetenv("TRANSCRIBE_DUMP_DIR");
    return r;
}

std::vector<int32_t> greedy(transcribe::Model & m, const std::string & clip, ggml_type kv) {
    transcribe::SessionOptions so;
    so.n_threads = 2;
    so.kv_type   = kv;
    auto session = m.new_session(so);
    transcribe::RunOptions ro;
    ro.max_new_tokens = 16;
    ro.ignore_eos     = true;
    const auto pcm = read_wav_16k(clip);
    return session->run(pcm.data(), pcm.size(), ro).tokens;
}

} // namespace test
