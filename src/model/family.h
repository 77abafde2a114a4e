// What a model family provides to the engine, and the registry that picks a family by the GGUF
// `general.architecture` key.
#pragma once

#include "transcribe.h"

#include "core/model_file.h"
#include "core/tokenizer.h"

#include "ggml-backend.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace transcribe {

struct SessionOptions {
    int       n_threads = 4;
    ggml_type kv_type   = GGML_TYPE_F16;
    int       n_ctx     = 0; // 0: family default
    int       n_batch   = 1; // sequences a session decodes together (families that batch); <= 0: by memory
    transcribe_abort_callback    abort_callback     = nullptr;
    void *                       abort_user_data    = nullptr;
    transcribe_progress_callback progress_callback  = nullptr;
    void *                       progress_user_data = nullptr;
};

// Which head decodes, on a model with more than one (a hybrid Parakeet: transducer and CTC).
enum class DecoderType { Default, Transducer, Ctc };

struct RunOptions {
    int  max_new_tokens     = 256;
    bool ignore_eos         = false; // decode exactly max_new_tokens (benchmarks, random weights)
    std::string language; // the speech's language (models with a language prompt); empty: the model's default
    // Canary AED's task: the language to write (empty or the source language: transcribe; another:
    // translate), punctuation and capitals, and the model's own timestamps asked for in the prompt.
    std::string target_language;
    bool        punctuation = true;
    bool        timestamps  = false;
    // Beam search over this many hypotheses (models whose info says beam_search); 0: greedy.
    int beam_size = 0;
    // Whisper: decode without timestamp tokens (<|notimestamps|>, openai-whisper's without_timestamps),
    // and whether each 30-second window's prompt holds the text before it (condition_on_previous_text).
    bool no_timestamps              = false;
    bool condition_on_previous_text = true;
    // Whisper: the temperatures decode_with_fallback tries in turn (one: no fallback), best_of samples at
    // each above 0 (0: one), and the seed of the generator they are drawn from.
    std::vector<float> temperatures {0.0f};
    int                best_of = 0;
    uint64_t           seed    = 0;
    // The head to decode with (models whose info lists it); Default: the model's first.
    DecoderType decoder_type = DecoderType::Default;
    // Hotwords (models whose info says hotwords): phrases NeMo's phrase-boosting tree favours in greedy
    // decoding, each token's logit raised by hotword_weight x its boost (NeMo's boosting_tree_alpha).
    std::vector<std::string> hotwords;
    float                    hotword_weight = 1.0f;
    // Context for the chat prompt (models whose info says text_prompt): text before the instruction.
    std::string prompt;
    // FastConformer models trained with limited attention contexts (cache-aware streaming ones): the
    // [left, right] frames each frame's attention reaches, one of the model's (NeMo's
    // set_default_att_context_size); empty: the model's default.
    std::vector<int> att_context_size;
    // Teacher forcing and inspection (tests, parity checks): feed these ids instead of the argmax, and
    // collect the logits that produced each generated position.
    const std::vector<int32_t> *      force_tokens = nullptr;
    std::vector<std::vector<float>> * step_logits  = nullptr;
    // Called with each token as it is decoded (streaming).
    std::function<void(int32_t)> on_token;
    // Polled between decode steps: true ends this run alone with ABORTED (a server's client went away),
    // where the session's abort callback stops everything.
    std::function<bool()> cancelled;
    // This run's share of the session's progress bar (long audio runs pieces).
    float progress_offset = 0.0f;
    float progress_scale  = 1.0f;
    // Speculative decoding (models whose info says speculative): the draft of this run's audio, in the
    // model's own token ids (a faster model's transcript, tokenized), which the decoder checks several
    // tokens a step. It changes how fast the ids come, not which. Ignored under force_tokens.
    std::function<std::vector<int32_t>(const float * pcm, size_t n_samples)> draft;
};

// A word with the times the model gives it (models that give word times only).
struct Word {
    std::string text;
    int64_t     t0_ms = 0;
    int64_t     t1_ms = 0;
    int         speaker = -1; // speaker-attributed transcripts: the diarizer's speaker index
};

struct Segment {
    int64_t              t0_ms = 0;
    int64_t              t1_ms = 0;
    std::string          text;
    std::vector<int32_t> tokens;
    std::vector<Word>    words;
    bool                 truncated = false; // this piece ran out of token budget
    int                  speaker   = -1;    // speaker-attributed transcripts: the diarizer's speaker index
    // Whisper: the decode of the window the segment came from (openai-whisper's verbose_json fields).
    struct Decode {
        int    seek = 0; // the window's first mel frame
        float  temperature = 0.0f, no_speech_prob = 0.0f;
        double avg_logprob = 0.0, compression_ratio = 0.0;
    };
    bool   has_decode = false;
    Decode decode;
};

struct Transcript {
    std::string          text;
    std::vector<int32_t> tokens; // generated ids, end-of-generation token excluded
    std::vector<Segment> segments;
    std::vector<Word>    words; // every segment's words in order; empty when the model gives no word times
    // Transducers: each token's encoder frame and duration in frames (empty for other models).
    std::vector<int32_t> token_frames, token_durations;
    bool                 timed = false; // segments and words carry the model's own times
    bool                 truncated = false;
    std::string          language; // the speech's language where the model tells it (given or detected)
};

struct Timings {
    double mel_ms = 0, encode_ms = 0, prefill_ms = 0, decode_ms = 0;
    double vad_ms = 0; // voice-activity detection over the whole recording, when asked for
    double draft_ms = 0; // making the drafts of speculative decoding (the draft model's runs)
    double diarize_ms = 0; // the diarizer's run over the recording (speaker-attributed transcripts)
    int    n_prefill_tokens = 0, n_decode_tokens = 0;
    int    n_decode_steps = 0; // decoder passes (with a draft, one may yield several tokens)
    int    n_drafted = 0, n_accepted = 0, n_verify_steps = 0; // draft tokens checked, kept; steps that checked any
};
// TOTAL += T, stage by stage.
void add_timings(Timings & total, const Timings & t);

// One recording for Session::run_batch: mono samples at the model's rate, with its own options.
struct BatchJob {
    const float * pcm       = nullptr;
    size_t        n_samples = 0;
    RunOptions    options;
};
// Continuous batching: the session asks NEXT for another job whenever it has room for one (false:
// none waits now; it may be asked again later). Each job ends in DONE, with its transcript or, where
// it failed, a null transcript and its error; ID numbers the jobs in the order NEXT gave them.
using JobSource = std::function<bool(BatchJob & job)>;
using JobDone   = std::function<void(size_t id, Transcript * transcript, std::exception_ptr error)>;

// One step of a model that transcribes as it hears (NeMo's cache-aware streaming): the tokens an encoder
// step decoded.
struct StreamStep {
    int                  index = 0;
    int64_t              audio_end_ms = 0; // the audio its chunk reached (the last: the whole)
    std::vector<int32_t> tokens;           // decoded in this step
    // What they add to the text, the pieces as they join (the stream's first leading space trimmed): the
    // steps' texts joined are the transcript before its clean-up (a space before punctuation dropped).
    std::string          text;
};

// A live stream through such a model: audio pushed as it comes, each chunk's step run once it is complete.
// It uses its session's executor and decoder state: one stream (and no run) at a time per session.
class NativeStream {
public:
    virtual ~NativeStream() = default;
    virtual void push(const float * pcm, size_t n_samples) = 0;
    // The audio ended: the steps left run.
    virtual void finish() = 0;
    // The steps run since the last call.
    virtual std::vector<StreamStep> take_steps() = 0;
    // Every token so far and the transcript they make (NeMo's streaming hypothesis).
    virtual const std::vector<int32_t> & tokens() const = 0;
    virtual std::string text() const = 0;
};

class Session {
public:
    virtual ~Session() = default;
    // A stream through a model whose info says native_streaming (OPTIONS: its attention context, head);
    // INVALID_ARG for any other.
    virtual std::unique_ptr<NativeStream> open_stream(const RunOptions & options);
    // The words of TEXT (someone's transcript of this audio) with their times, in the model's units (models
    // whose info says forced_aligner; INVALID_ARG for any other). LANGUAGE: the text's, where the model
    // splits some languages its own way.
    virtual std::vector<Word> align_text(const float * pcm, size_t n_samples, const std::string & text,
                                         const std::string & language, const RunOptions & options);
    // pcm: mono samples at the model's rate. Throws Error (ABORTED, INPUT_TOO_LONG, ...).
    virtual Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) = 0;
    // Jobs from NEXT until it has none and none is running, up to max_batch() of them decoded together
    // (the default runs them one by one). The session's abort callback throws ABORTED out of it, every
    // unfinished job abandoned; any other error ends only the job that raised it. timings() then sums
    // the stages over the jobs, decode_ms being the time of the decode steps (shared by the jobs).
    virtual void run_batch(const JobSource & next, const JobDone & done);
    virtual int  max_batch() const { return 1; }
    const Timings & timings() const { return timings_; }
    void set_timings(const Timings & t) { timings_ = t; }

protected:
    Timings timings_;
};

// What a model can do, for tools and callers to ask rather than assume.
struct ModelInfo {
    std::string architecture;
    std::string name;
    int sample_rate  = 16000;
    int max_audio_ms = 0;                // per run; longer audio is cut into pieces
    std::vector<std::string> languages;
    bool word_timestamps  = false;       // Transcript::words carries model-given times
    bool language_prompt  = false;       // RunOptions::language changes what the model does
    bool token_budget     = true;        // decoding is bounded by max_new_tokens (a token decoder); false: by the audio
    bool speculative      = false;       // decoding checks a draft (RunOptions::draft) several tokens a step
    bool translation      = false;       // RunOptions::target_language may differ from the source
    bool beam_search      = false;       // RunOptions::beam_size is honoured
    bool timestamp_prompt = false;       // RunOptions::timestamps asks the model for its own word times
    bool transducer_head  = false;       // RunOptions::decoder_type Transducer runs (Parakeet TDT, a hybrid)
    bool ctc_head         = false;       // RunOptions::decoder_type Ctc runs (Parakeet CTC, a hybrid)
    bool hotwords         = false;       // RunOptions::hotwords honoured (Parakeet: boosted in greedy decoding; Qwen3-ASR: its context)
    bool text_prompt      = false;       // RunOptions::prompt is read as context (Canary-Qwen)
    bool language_detection = false;     // RunOptions::language "auto" (or empty) detects it (Whisper)
    int  frame_ms         = 0;           // its output frames' duration (frame-level heads: Parakeet), else 0
    // The attention contexts a FastConformer was trained with, [left, right] pairs flat, the default
    // first (RunOptions::att_context_size); empty: full attention only.
    std::vector<int32_t> att_contexts;
    bool    native_streaming = false;    // Session::open_stream: it transcribes as it hears (cache-aware models)
    int32_t end_of_turn_token = -1;      // its token that ends a speaker's turn (<EOU>), or -1
    bool    forced_aligner = false;      // Session::align_text times a given text's words (it transcribes nothing)
};

class Model {
public:
    virtual ~Model() = default;
    virtual std::unique_ptr<Session> new_session(const SessionOptions & options) = 0;
    const ModelInfo & info() const { return info_; }
    const Tokenizer & tokenizer() const { return *tokenizer_; }

protected:
    ModelInfo info_;
    std::unique_ptr<Tokenizer> tokenizer_;
};

// Each family: builds a Model from a parsed file, looking up and checking its tensors, then loading
// them onto `device`.
using FamilyLoader = std::unique_ptr<Model> (*)(std::unique_ptr<ModelFile> file, ggml_backend_dev_t device);

struct Family {
    const char * architecture;
    FamilyLoader load;
};

// UNSUPPORTED_ARCH naming the architecture when no family claims it.
std::unique_ptr<Model> load_model(const std::string & path, const WeightOptions & options, ggml_backend_dev_t device);

} // namespace transcribe
