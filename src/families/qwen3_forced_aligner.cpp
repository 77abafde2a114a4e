// Qwen3-ForcedAligner (QwenLM/Qwen3-ASR's qwen3_forced_aligner.py): Qwen3-ASR's audio encoder and Qwen3
// decoder with a head of timestamp classes instead of the vocabulary. It transcribes nothing: given a
// transcript, its input is the audio rows between <|audio_start|> and <|audio_end|>, then each unit of the
// text followed by two <timestamp> slots (its start and end); one causal pass classifies every slot into a
// multiple of the segment time, and fix_timestamp repairs the slots that run backwards.
#include "blocks/qwen3.h"
#include "blocks/windowed_audio_encoder.h"
#include "families/qwen3_aligner_text.h"
#include "model/session_base.h"
#include "core/npy.h"

#include <algorithm>

namespace transcribe {

namespace {

constexpr const char * ARCH       = "qwen3_forced_aligner";
constexpr int MIN_SAMPLES_DIVISOR = 2;      // transcribe() pads chunks shorter than half a second (MIN_ASR_INPUT_SECONDS)
constexpr int MAX_PIECE_MS        = 180000; // MAX_FORCE_ALIGN_INPUT_SECONDS

class Qwen3ForcedAlignerModel;

class Qwen3ForcedAlignerSession final : public SessionBase {
public:
    Qwen3ForcedAlignerSession(const Qwen3ForcedAlignerModel & model, const SessionOptions & opt);

    Transcript run(const float *, size_t, const RunOptions &) override {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "a forced aligner (Qwen3-ForcedAligner) transcribes nothing: it times a "
             "transcript's words; give it with --align-with beside a model that transcribes");
    }
    std::vector<Word> align_text(const float * pcm, size_t n, const std::string & text, const std::string & language,
                                 const RunOptions & options) override;

private:
    const Qwen3ForcedAlignerModel & model_;
    WindowedAudioEncoder::Run       encode_;
    Qwen3Decoder                    decoder_; // its one causal pass keeps nothing: a cache of one row
};

class Qwen3ForcedAlignerModel final : public Model {
public:
    Qwen3ForcedAlignerModel(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device)
        : file_(std::move(file)),
          device_(device),
          encoder_(*file_, ARCH),
          lm_hp_(Qwen3HParams::from_file(*file_)),
          lm_(*file_, lm_hp_, "llm", "token_embd.weight") {
        const std::string a = std::string(ARCH) + ".";
        if (encoder_.hparams().out_dim != lm_hp_.hidden) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: audio encoder output %d != decoder width %d", file_->path().c_str(),
                 encoder_.hparams().out_dim, lm_hp_.hidden);
        }
        audio_id_     = token_id(a + "audio_token_id");
        start_id_     = token_id(a + "audio_start_token_id");
        end_id_       = token_id(a + "audio_end_token_id");
        timestamp_id_ = token_id(a + "timestamp_token_id");
        segment_ms_   = file_->get_f32(a + "timestamp_segment_ms");
        if (!(segment_ms_ > 0.0f)) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: timestamp segment of %g ms", file_->path().c_str(), double(segment_ms_));
        }
        tokenizer_ = Tokenizer::from_file(*file_);
        info_.architecture   = ARCH;
        info_.name           = file_->get_str("general.name", "qwen3-forced-aligner");
        info_.forced_aligner = true;
        info_.token_budget   = false;
        info_.max_audio_ms   = std::min(int(file_->get_u32(a + "max_audio_ms", MAX_PIECE_MS)), MAX_PIECE_MS);

        file_->load_weights(device_);
        encoder_.prepare(*file_);
        info_.sample_rate = encoder_.sample_rate();
    }

    std::unique_ptr<Session> new_session(const SessionOptions & options) override {
        return std::make_unique<Qwen3ForcedAlignerSession>(*this, options);
    }

    // encode_timestamp's input after the processor: the audio placeholders, then each unit's tokens and its
    // two slots (the text between added tokens tokenized on its own, NFC first, as the slow tokenizer does).
    std::vector<int32_t> input_ids(const std::vector<std::string> & units, int n_audio, std::vector<int32_t> & slots) const {
        std::vector<int32_t> ids {start_id_};
        ids.insert(ids.end(), size_t(n_audio), audio_id_);
        ids.push_back(end_id_);
        auto add_slots = [&] {
            for (int k = 0; k < 2; ++k) {
                slots.push_back(int32_t(ids.size()));
                ids.push_back(timestamp_id_);
            }
        };
        for (const std::string & u : units) {
            const std::vector<int32_t> t = tokenizer_->encode(utf8_nfc(u, "transcript"));
            ids.insert(ids.end(), t.begin(), t.end());
            add_slots();
        }
        if (units.empty()) { // "<timestamp><timestamp>".join([]) + "<timestamp><timestamp>"
            add_slots();
        }
        return ids;
    }

    int32_t token_id(const std::string & key) const {
        const auto id = int32_t(file_->get_u32(key));
        if (id < 0 || id >= lm_hp_.vocab) {
            fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: %s %d outside the vocabulary", file_->path().c_str(), key.c_str(), id);
        }
        return id;
    }

    std::unique_ptr<ModelFile> file_;
    ggml_backend_dev_t         device_;
    WindowedAudioEncoder       encoder_;
    Qwen3HParams               lm_hp_;
    Qwen3                      lm_;
    int32_t                    audio_id_ = 0, start_id_ = 0, end_id_ = 0, timestamp_id_ = 0;
    float                      segment_ms_ = 0.0f;
};

Qwen3ForcedAlignerSession::Qwen3ForcedAlignerSession(const Qwen3ForcedAlignerModel & model, const SessionOptions & opt)
    : SessionBase(model.device_, opt), model_(model), encode_(model.encoder_), decoder_(model.lm_, exec_, opt.kv_type, 1) {}

std::vector<Word> Qwen3ForcedAlignerSession::align_text(const float * pcm, size_t n, const std::string & text,
                                                        const std::string & language, const RunOptions & o) {
    (void) language; // only Japanese and Korean are split another way by the reference (qwen3_aligner_text.h)
    check_audio_length(n, model_.info());
    const std::vector<std::string> units = qwen3_aligner::split_units(text);
    const size_t min_samples = size_t(model_.info().sample_rate / MIN_SAMPLES_DIVISOR);
    std::vector<float> padded;
    if (n < min_samples) {
        padded.assign(min_samples, 0.0f);
        std::copy_n(pcm, n, padded.begin());
        pcm = padded.data();
        n   = min_samples;
    }
    const int n_audio = model_.encoder_.tokens(n);
    std::vector<int32_t> slots;
    const std::vector<int32_t> ids = model_.input_ids(units, n_audio, slots);
    const int T = int(ids.size());
    if (T > model_.lm_hp_.n_ctx_train) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d aligner positions (%d audio, %zu units) exceed the model's %d", T, n_audio,
             units.size(), model_.lm_hp_.n_ctx_train);
    }
    dump_ids("input_ids", ids);
    check_abort("start");
    check_cancelled(o, "start");
    progress(o, 0.0f);

    timings_ = Timings {};
    const std::vector<float> audio_rows = encode_(exec_, pcm, n, opt_.n_threads, timings_);
    check_abort("encoder");
    check_cancelled(o, "encoder");
    progress(o, 0.5f);

    StageTimer timer;
    Qwen3Decoder::Piece before, audio, after;
    before.ids = {ids.front()};
    audio.rows   = audio_rows.data();
    audio.n_rows = n_audio;
    after.ids.assign(ids.begin() + 1 + n_audio, ids.end());
    const std::vector<float> logits = decoder_.logits_at({before, audio, after}, slots);
    timings_.prefill_ms       = timer.ms();
    timings_.n_prefill_tokens = T;
    const int n_classes = model_.lm_hp_.head_rows;
    dump_f32("timestamp_logits", logits, {int64_t(slots.size()), n_classes});

    // The slots' classes times the segment (float32, as torch multiplies them), repaired, two per unit.
    std::vector<double> ms(slots.size());
    for (size_t s = 0; s < slots.size(); ++s) {
        const float * row = logits.data() + s * size_t(n_classes);
        const auto cls = float(std::max_element(row, row + n_classes) - row);
        ms[s] = double(cls * model_.segment_ms_);
    }
    const std::vector<int64_t> fixed = qwen3_aligner::fix_timestamps(ms);
    std::vector<Word> words;
    for (size_t i = 0; i < units.size(); ++i) {
        words.push_back({units[i], fixed[2 * i], fixed[2 * i + 1]});
    }
    progress(o, 1.0f);
    return words;
}

} // namespace

std::unique_ptr<Model> load_qwen3_forced_aligner(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device) {
    return std::make_unique<Qwen3ForcedAlignerModel>(std::move(file), device);
}

} // namespace transcribe
