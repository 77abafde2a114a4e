/* transcribe: speech-to-text on ggml. Public C API.
 *
 * Conventions: every function that can fail returns a transcribe_status; objects come out through
 * pointer arguments and are released by the matching *_free. No C++ exception crosses this API.
 * After a failure, transcribe_last_error() holds one line naming the cause for the calling thread. */
#ifndef TRANSCRIBE_H
#define TRANSCRIBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(TRANSCRIBE_SHARED)
#  define TRANSCRIBE_API __declspec(dllexport)
#else
#  define TRANSCRIBE_API __attribute__((visibility("default")))
#endif

typedef enum transcribe_status {
    TRANSCRIBE_OK = 0,
    TRANSCRIBE_ERR_INVALID_ARG,
    TRANSCRIBE_ERR_FILE_NOT_FOUND,
    TRANSCRIBE_ERR_FILE_READ,
    TRANSCRIBE_ERR_BAD_GGUF,
    TRANSCRIBE_ERR_UNSUPPORTED_ARCH,
    TRANSCRIBE_ERR_MISSING_TENSOR,
    TRANSCRIBE_ERR_BAD_SHAPE,
    TRANSCRIBE_ERR_AUDIO_DECODE,
    TRANSCRIBE_ERR_BACKEND,
    TRANSCRIBE_ERR_OOM,
    TRANSCRIBE_ERR_ABORTED,
    TRANSCRIBE_ERR_INPUT_TOO_LONG,
    TRANSCRIBE_ERR_OUTPUT_TRUNCATED, /* the result is still filled in with the partial text */
    TRANSCRIBE_ERR_INTERNAL,
} transcribe_status;

TRANSCRIBE_API const char * transcribe_status_string(transcribe_status status);
/* One line naming the cause of the last failure on this thread ("" if none). */
TRANSCRIBE_API const char * transcribe_last_error(void);
TRANSCRIBE_API const char * transcribe_version(void);

/* ---------------------------------------------------------------- logging */
typedef enum transcribe_log_level {
    TRANSCRIBE_LOG_DEBUG = 0,
    TRANSCRIBE_LOG_INFO  = 1,
    TRANSCRIBE_LOG_WARN  = 2,
    TRANSCRIBE_LOG_ERROR = 3,
} transcribe_log_level;

typedef void (*transcribe_log_callback)(transcribe_log_level level, const char * message, void * user_data);
/* Replaces the log sink (NULL restores the default: WARN and above to stderr). Process-wide. */
TRANSCRIBE_API void transcribe_log_set(transcribe_log_callback callback, void * user_data);

/* ---------------------------------------------------------------- model */
typedef struct transcribe_model   transcribe_model;   /* weights; may be shared by many sessions */
typedef struct transcribe_session transcribe_session; /* per-caller state (KV cache, graphs) */
typedef struct transcribe_result  transcribe_result;

typedef enum transcribe_backend {
    TRANSCRIBE_BACKEND_AUTO = 0, /* the best available accelerator, else CPU */
    TRANSCRIBE_BACKEND_CPU,
    TRANSCRIBE_BACKEND_CUDA,
    TRANSCRIBE_BACKEND_VULKAN,
    TRANSCRIBE_BACKEND_METAL,
} transcribe_backend;

typedef struct transcribe_load_params {
    transcribe_backend backend;
    int  device;   /* device index within the backend */
    bool use_mmap; /* CPU: use the weights straight from the mapped file (zero-copy, shared through the page
                      cache) instead of reading them into private huge-page memory (default: false; the
                      private copy streams faster, markedly so on virtual machines) */
    bool cpu_repack; /* CPU: keep the matmul weights that ggml's CPU kernels have a faster interleaved layout
                        for (Q4_0, Q4_K, IQ4_NL on x86) in that layout, converted at load (default: true) */
} transcribe_load_params;

TRANSCRIBE_API transcribe_load_params transcribe_load_params_init(void);
TRANSCRIBE_API transcribe_status transcribe_backend_from_name(const char * name, transcribe_backend * out);

TRANSCRIBE_API transcribe_status transcribe_model_load(const char * path, const transcribe_load_params * params,
                                                       transcribe_model ** out_model);
TRANSCRIBE_API void transcribe_model_free(transcribe_model * model);

typedef struct transcribe_model_info {
    const char * architecture;  /* GGUF general.architecture, e.g. "canary_qwen" */
    const char * name;          /* GGUF general.name */
    const char * backend;       /* name of the backend the weights live on */
    int          sample_rate;   /* audio the model expects (mono) */
    int          max_audio_ms;  /* longest audio one run takes */
    int          n_vocab;
    int          n_languages;
    const char * const * languages;
    double       load_ms;
    /* What the model can do (appended fields: rebuild callers compiled against an older header). */
    bool         word_timestamps; /* results carry words with the model's own times (transcribe_get_word) */
    bool         language_prompt; /* transcribe_run_params.language changes what the model does */
    bool         token_budget;    /* decoding is bounded by max_new_tokens (a token decoder: Canary-Qwen, Canary AED); false: by the audio */
    bool         speculative;     /* decoding checks a draft (transcribe_run_params.draft) several tokens a step */
    bool         translation;     /* transcribe_run_params.target_language may name another of its languages */
    bool         beam_search;     /* transcribe_run_params.beam_size is honoured */
    bool         timestamp_prompt; /* transcribe_run_params.timestamps asks the model for its word times */
    bool         transducer_head;  /* transcribe_run_params.decoder_type TRANSDUCER runs (Parakeet TDT, a hybrid) */
    bool         ctc_head;         /* transcribe_run_params.decoder_type CTC runs (Parakeet CTC, a hybrid) */
    bool         hotwords;         /* transcribe_run_params.hotwords boost its greedy decoding (Parakeet) */
    bool         text_prompt;      /* transcribe_run_params.prompt is read as context (Canary-Qwen) */
    bool         language_detection; /* transcribe_run_params.language "auto" (or NULL) detects it (Whisper; appended) */
    /* The attention contexts the encoder was trained with (cache-aware streaming FastConformers; appended):
     * n_att_contexts {left, right} pairs, flat, the default first (transcribe_run_params.att_context_size).
     * 0 / NULL: full attention only. */
    int             n_att_contexts;
    const int32_t * att_contexts;
    /* It transcribes as it hears (NeMo's cache-aware streaming models): transcribe_native_stream_open. */
    bool            native_streaming;
    /* Its token that ends a speaker's turn (the end-of-utterance models' <EOU>), or -1. */
    int32_t         end_of_turn_token;
    /* It transcribes nothing but times another model's transcript (Qwen3-ForcedAligner; appended):
     * usable as transcribe_run_params.aligner only. */
    bool            forced_aligner;
} transcribe_model_info;

TRANSCRIBE_API transcribe_status transcribe_model_get_info(const transcribe_model * model, transcribe_model_info * out);

/* ---------------------------------------------------------------- tokenizer */
/* Encodes plain text (no special tokens are parsed from it). On success *n_ids is the number of ids;
 * if it exceeds max_ids, only max_ids are written and TRANSCRIBE_ERR_INVALID_ARG is returned. */
TRANSCRIBE_API transcribe_status transcribe_tokenize(const transcribe_model * model, const char * text,
                                                     int32_t * ids, int max_ids, int * n_ids);
/* Decodes ids to UTF-8 (special tokens are dropped). *n_bytes receives the length without the NUL;
 * a buffer that is too small gets TRANSCRIBE_ERR_INVALID_ARG (call again with *n_bytes + 1). */
TRANSCRIBE_API transcribe_status transcribe_detokenize(const transcribe_model * model, const int32_t * ids, int n_ids,
                                                       char * buf, size_t buf_size, size_t * n_bytes);

/* ---------------------------------------------------------------- diarization */
/* Sortformer (a GGUF made by scripts/convert-sortformer.py): every 80 ms frame's activity of up to
 * n_speakers speakers, in the order the model learned (speaker_0 speaks first), and the speaker
 * segments NeMo's post-processing makes of them. Offline up to the model's max_audio_ms; streaming
 * (NeMo's speaker cache) for any length: see transcribe_diarize_mode. */
typedef struct transcribe_diarizer     transcribe_diarizer;
typedef struct transcribe_diarization  transcribe_diarization;

/* Which head decodes (transcribe_run_params.decoder_type). */
typedef enum transcribe_decoder_type {
    TRANSCRIBE_DECODER_DEFAULT    = 0, /* the model's: the transducer where there is one */
    TRANSCRIBE_DECODER_TRANSDUCER = 1, /* TDT (or RNNT) */
    TRANSCRIBE_DECODER_CTC        = 2,
} transcribe_decoder_type;

/* How a recording is diarized. AUTO: the offline path up to the model's max_audio_ms; past it the
 * streaming path (speaker cache, any length) with the long-form sizes (the v2 model card's 30.4 s
 * setting) on a model trained for streaming, INPUT_TOO_LONG on one that is not. */
typedef enum transcribe_diarize_mode {
    TRANSCRIBE_DIARIZE_AUTO      = 0,
    TRANSCRIBE_DIARIZE_OFFLINE   = 1,
    TRANSCRIBE_DIARIZE_STREAMING = 2, /* NeMo's forward_streaming, with the model's streaming sizes */
} transcribe_diarize_mode;

/* NeMo's PostProcessingParams (seconds, probabilities), then the path and the streaming sizes. */
typedef struct transcribe_diarize_params {
    double onset;            /* a frame above this starts a speaker's segment (default 0.5) */
    double offset;           /* a frame below this ends it (default 0.5) */
    double pad_onset;        /* segments start this much earlier (default 0) */
    double pad_offset;       /* and end this much later (default 0) */
    double min_duration_on;  /* shorter segments are dropped (default 0) */
    double min_duration_off; /* shorter gaps between a speaker's segments are filled (default 0) */
    int    mode;             /* transcribe_diarize_mode (default AUTO) */
    /* Streaming sizes in 80 ms frames, NeMo's names; -1 (default): the model's (its GGUF's
     * sortformer.streaming.*, NeMo's e2e_diarize_speech defaults: 188, 188, 144, 6, 1, 7). */
    int spkcache_len;
    int fifo_len;
    int spkcache_update_period;
    int chunk_len;
    int chunk_left_context;
    int chunk_right_context;
} transcribe_diarize_params;

TRANSCRIBE_API transcribe_diarize_params transcribe_diarize_params_init(void);
/* NeMo's post-processing YAML (a `parameters:` mapping of the six values; missing ones keep *OUT's). */
TRANSCRIBE_API transcribe_status transcribe_diarize_params_from_yaml(const char * path, transcribe_diarize_params * out);
/* n_threads <= 0: hardware concurrency. One thread at a time per diarizer. UNSUPPORTED_ARCH for a
 * file that is not a diarizer. */
TRANSCRIBE_API transcribe_status transcribe_diarizer_load(const char * path, int n_threads, transcribe_diarizer ** out);
TRANSCRIBE_API void transcribe_diarizer_free(transcribe_diarizer * diarizer);
TRANSCRIBE_API int  transcribe_diarizer_sample_rate(const transcribe_diarizer * diarizer);
TRANSCRIBE_API int  transcribe_diarizer_n_speakers(const transcribe_diarizer * diarizer);
/* Mono pcm at the diarizer's sample rate; params NULL: the defaults. */
TRANSCRIBE_API transcribe_status transcribe_diarize(transcribe_diarizer * diarizer, const float * pcm, size_t n_samples,
                                                    const transcribe_diarize_params * params,
                                                    transcribe_diarization ** out_result);
TRANSCRIBE_API int           transcribe_diarization_n_frames(const transcribe_diarization * result);
TRANSCRIBE_API int           transcribe_diarization_n_speakers(const transcribe_diarization * result);
TRANSCRIBE_API int           transcribe_diarization_frame_ms(const transcribe_diarization * result);
/* [frame][speaker] probabilities. */
TRANSCRIBE_API const float * transcribe_diarization_probs(const transcribe_diarization * result);
/* Segments speaker by speaker, each in time order; times in seconds as NeMo prints them (%.3f). */
TRANSCRIBE_API int    transcribe_diarization_n_segments(const transcribe_diarization * result);
TRANSCRIBE_API double transcribe_diarization_segment_start(const transcribe_diarization * result, int i);
TRANSCRIBE_API double transcribe_diarization_segment_end(const transcribe_diarization * result, int i);
TRANSCRIBE_API int    transcribe_diarization_segment_speaker(const transcribe_diarization * result, int i);
TRANSCRIBE_API void   transcribe_diarization_free(transcribe_diarization * result);

/* ---------------------------------------------------------------- session */
typedef enum transcribe_kv_type {
    TRANSCRIBE_KV_F16 = 0,
    TRANSCRIBE_KV_F32 = 1,
} transcribe_kv_type;

/* Return true to stop the run; polled between stages and at every decode step. */
typedef bool (*transcribe_abort_callback)(void * user_data);
/* fraction in [0, 1], non-decreasing within one run. */
typedef void (*transcribe_progress_callback)(float fraction, void * user_data);

typedef struct transcribe_session_params {
    int                n_threads; /* <= 0: hardware concurrency */
    transcribe_kv_type kv_type;
    int                n_ctx;     /* cap on a token decoder's context (prompt + audio + new tokens); <= 0: model default */
    transcribe_abort_callback    abort_callback;
    void *                       abort_user_data;
    transcribe_progress_callback progress_callback;
    void *                       progress_user_data;
    /* Recordings (or pieces of one) decoded together, their weights read once a step, for models with a
     * token decoder (Canary-Qwen, Canary AED): each holds its own KV cache (n_ctx positions), touched
     * only when used. 0: as many
     * as an eighth of the free memory holds, at most 8; 1: one at a time. (Appended: callers built
     * against an older header must rebuild.) */
    int                          n_batch;
} transcribe_session_params;

TRANSCRIBE_API transcribe_session_params transcribe_session_params_init(void);
TRANSCRIBE_API transcribe_status transcribe_session_create(transcribe_model * model, const transcribe_session_params * params,
                                                           transcribe_session ** out_session);
TRANSCRIBE_API void transcribe_session_free(transcribe_session * session);
/* How many recordings the session decodes together (1 for models that do not batch). */
TRANSCRIBE_API int transcribe_session_batch_size(const transcribe_session * session);

/* ---------------------------------------------------------------- audio */
/* Mono float PCM in [-1, 1] at sample_rate; owned by the library, release with transcribe_audio_free. */
typedef struct transcribe_audio {
    float * samples;
    size_t  n_samples;
    int     sample_rate;
} transcribe_audio;

/* Decodes any file libsndfile reads (wav, flac, ogg/vorbis/opus, mp3, ...), downmixes to mono and
 * resamples (soxr, high quality) to target_rate (<= 0: 16000). */
TRANSCRIBE_API transcribe_status transcribe_audio_load(const char * path, int target_rate, transcribe_audio * out);
TRANSCRIBE_API transcribe_status transcribe_audio_load_memory(const void * data, size_t size, int target_rate,
                                                              transcribe_audio * out);
/* Interleaved float PCM at any rate and channel count to mono at target_rate. */
TRANSCRIBE_API transcribe_status transcribe_audio_from_pcm(const float * interleaved, size_t n_frames, int sample_rate,
                                                           int n_channels, int target_rate, transcribe_audio * out);
TRANSCRIBE_API void transcribe_audio_free(transcribe_audio * audio);

/* The same, bounded: audio longer than max_seconds (<= 0: no bound) fails with INPUT_TOO_LONG, from the
 * header's length when it states one (nothing is decoded), else as soon as decoding passes it; the abort
 * callback (NULL: none) is polled between blocks (true: ABORTED). Decoding is streamed: a long file is
 * held once, mono at target_rate. */
typedef struct transcribe_audio_limits {
    double                    max_seconds;
    transcribe_abort_callback abort_callback;
    void *                    abort_user_data;
} transcribe_audio_limits;
TRANSCRIBE_API transcribe_status transcribe_audio_load_limited(const char * path, int target_rate,
                                                               const transcribe_audio_limits * limits,
                                                               transcribe_audio * out);
TRANSCRIBE_API transcribe_status transcribe_audio_load_memory_limited(const void * data, size_t size, int target_rate,
                                                                      const transcribe_audio_limits * limits,
                                                                      transcribe_audio * out);

/* ---------------------------------------------------------------- voice activity detection */
/* Silero VAD (a GGUF made by scripts/convert-silero-vad.py): a speech probability for every chunk of
 * 512 samples at 16 kHz (256 at 8 kHz) and the speech regions found from them, as Silero's
 * get_speech_timestamps finds them. It runs on the CPU. */
typedef struct transcribe_vad_model   transcribe_vad_model;   /* weights; may be shared by many sessions */
typedef struct transcribe_vad_session transcribe_vad_session; /* per-caller state (graphs, LSTM state) */
typedef struct transcribe_vad_result  transcribe_vad_result;

typedef struct transcribe_vad_params {
    float threshold;      /* a chunk at or above this probability is speech (default 0.5) */
    float neg_threshold;  /* speech ends below this; < 0: max(threshold - 0.15, 0.01) (default -1) */
    int   min_speech_ms;  /* shorter regions are dropped (default 250) */
    int   min_silence_ms; /* shorter silences do not end a region (default 100) */
    int   speech_pad_ms;  /* regions are widened by this on each side (default 30) */
    float max_speech_s;   /* longer regions are cut, at a pause where there is one; <= 0: no limit (default 0) */
} transcribe_vad_params;

TRANSCRIBE_API transcribe_vad_params transcribe_vad_params_init(void);
TRANSCRIBE_API transcribe_status transcribe_vad_model_load(const char * path, transcribe_vad_model ** out_model);
TRANSCRIBE_API void transcribe_vad_model_free(transcribe_vad_model * model);
/* n_threads <= 0: 1. */
TRANSCRIBE_API transcribe_status transcribe_vad_session_create(transcribe_vad_model * model, int n_threads,
                                                               transcribe_vad_session ** out_session);
TRANSCRIBE_API void transcribe_vad_session_free(transcribe_vad_session * session);
/* Mono pcm at sample_rate (16000 or 8000), streamed from a zero state; params NULL: the defaults. */
TRANSCRIBE_API transcribe_status transcribe_vad_detect(transcribe_vad_session * session, const float * pcm, size_t n_samples,
                                                       int sample_rate, const transcribe_vad_params * params,
                                                       transcribe_vad_result ** out_result);
TRANSCRIBE_API int           transcribe_vad_result_chunk_samples(const transcribe_vad_result * result);
TRANSCRIBE_API int           transcribe_vad_result_n_probs(const transcribe_vad_result * result);
TRANSCRIBE_API const float * transcribe_vad_result_probs(const transcribe_vad_result * result);
TRANSCRIBE_API int           transcribe_vad_result_n_segments(const transcribe_vad_result * result);
/* Sample indices at the detection's rate, end exclusive. */
TRANSCRIBE_API int64_t       transcribe_vad_result_segment_begin(const transcribe_vad_result * result, int i);
TRANSCRIBE_API int64_t       transcribe_vad_result_segment_end(const transcribe_vad_result * result, int i);
/* The LSTM state after the last chunk: 128 values of h, then 128 of c. */
TRANSCRIBE_API const float * transcribe_vad_result_state(const transcribe_vad_result * result);
TRANSCRIBE_API void          transcribe_vad_result_free(transcribe_vad_result * result);

/* ---------------------------------------------------------------- running */
/* Each token as it is decoded, on the thread running transcribe_run: its id and the bytes of its text
 * (a word-initial token's text starts with a space; the bytes may end inside a UTF-8 character that the
 * next token completes). Concatenated they are the transcript before its final clean-up (the leading
 * space trimmed; for some models a space before punctuation dropped). */
typedef void (*transcribe_token_callback)(int32_t token, const char * text, size_t n_bytes, void * user_data);

typedef struct transcribe_run_params {
    const char * language;       /* NULL = the model's; otherwise one of transcribe_model_info.languages
                                    (INVALID_ARG for a language the model does not transcribe) */
    int          max_new_tokens; /* per piece of audio; <= 0: 256 (models with token_budget only) */
    int          chunk_ms;       /* audio longer than this is cut into pieces at pauses, each one a segment;
                                    <= 0: the model's window (40 s for Canary-Qwen) */
    bool         ignore_eos;     /* decode exactly max_new_tokens (benchmarks); not truncation */
    transcribe_vad_model * vad;  /* speech-aware long audio: the model hears only the speech regions the VAD
                                    finds (neighbours merged up to the window), silence is never decoded,
                                    and segments follow speech, cut at ~7 s / 42 characters. NULL: audio
                                    longer than the window is cut at pauses by energy. */
    transcribe_vad_params  vad_params;
    transcribe_token_callback token_callback; /* NULL: none (appended field: rebuild older callers) */
    void *                    token_user_data;
    /* This run's own stop: polled between stages and decode steps, it ends this run alone with
     * TRANSCRIBE_ERR_ABORTED (where the session's abort callback stops everything the session runs).
     * NULL: none. (Appended: rebuild older callers.) */
    transcribe_abort_callback abort_callback;
    void *                    abort_user_data;
    /* Speculative decoding, for models whose info says speculative. DRAFT, a faster model (a Parakeet-TDT),
     * transcribes each piece of audio on the session's threads first; its text, in this model's tokens and
     * kept aligned with what has been decoded, proposes the next tokens, which the decoder checks several
     * in one pass, keeping those equal to its own greedy choices. The ids are those of plain greedy
     * decoding whatever the draft says (up to the F32 rounding batching also brings); a draft that is
     * rarely right soon stops being checked. NULL: none. INVALID_ARG for a model that does not decode
     * with a draft, or a draft model of another sample rate. The session keeps a session of the draft
     * model: free the sessions before the draft model. (Appended: rebuild older callers.) */
    transcribe_model *        draft;
    /* For benchmarks and tests: these ids as every piece's draft, instead of a draft model's (n_draft_ids
     * 0: none). */
    const int32_t *           draft_ids;
    int                       n_draft_ids;
    /* The task, for models with a task prompt (Canary AED; appended: rebuild older callers).
     * TARGET_LANGUAGE: NULL or the source language transcribes; another of the model's languages
     * translates into it (INVALID_ARG where the model does not translate). NO_PUNCTUATION: text without
     * punctuation and capitals. TIMESTAMPS: the prompt asks for the model's own word times (results then
     * carry words and segments as the model timed them). BEAM_SIZE > 0: NeMo's beam search over that many
     * hypotheses (at most 8; INVALID_ARG for a model without beam search); 0: greedy. */
    const char *              target_language;
    bool                      no_punctuation;
    bool                      timestamps;
    int                       beam_size;
    /* Speaker-attributed transcripts (appended): DIARIZER runs on the whole recording with
     * DIARIZE_PARAMS (their mode says how past its max_audio_ms). Word-timed models: each word takes the
     * speaker active over most of it and segments break where the speaker changes. Other models: the
     * recording is transcribed speaker turn by speaker turn (turns tile the recording; a VAD, when
     * given, cuts inside each turn), each segment its turn's speaker. See
     * transcribe_result_segment_speaker, transcribe_word.speaker. NULL: none. The diarizer runs one
     * recording at a time (runs of several sessions take turns). */
    transcribe_diarizer *     diarizer;
    transcribe_diarize_params diarize_params;
    /* The head that decodes, on a model with two (a hybrid Parakeet, EncDecHybridRNNTCTCBPEModel, as
     * NeMo's change_decoding_strategy(decoder_type=...) picks it): see transcribe_model_info's
     * transducer_head / ctc_head; a head the model lacks is INVALID_ARG. DEFAULT: the transducer where
     * there is one (NeMo's default). (Appended: rebuild older callers.) */
    transcribe_decoder_type   decoder_type;
    /* Hotwords (appended; models whose info says hotwords): phrases, one per line, that NeMo's phrase-
     * boosting tree favours in greedy decoding (GPU-PB with its default tree: each phrase's first token
     * boosted by 1, later ones by 1 + log(position), given back when the phrase breaks off), each token's
     * logit raised by HOTWORD_WEIGHT x its boost (NeMo's boosting_tree_alpha; init: 1). Blank lines and
     * repeats are skipped; NULL or "": none. */
    const char *              hotwords;
    float                     hotword_weight;
    /* Word times for any model (appended): ALIGNER, a model with a CTC head (Parakeet CTC or a hybrid),
     * places the transcript's text in the audio as NeMo Forced Aligner does (Viterbi over its
     * log-probabilities); the result's words and segments (cut at '.', '?', '!' followed by a space) get
     * the aligner's frame times. A recording within the aligner's window is aligned whole, a longer one
     * segment by segment. NULL: none. INVALID_ARG for a model without a CTC head. */
    transcribe_model *        aligner;
    /* Context for models whose info says text_prompt (appended; Canary-Qwen): UTF-8 text the chat prompt's
     * user turn carries before the model's instruction, as NeMo's SALM joins a conversation's consecutive
     * user turns (with a space), e.g. names or earlier words of the conversation: OpenAI's `prompt`.
     * Normalized to NFC as the model's Qwen tokenizer does; special tokens are never parsed from it. Every
     * piece of a long recording gets it. NULL or "": none. INVALID_ARG for a model without a text prompt, or
     * text that is not UTF-8; INPUT_TOO_LONG where it does not fit the context with the audio. */
    const char *              prompt;
    /* Whisper (appended): NO_TIMESTAMPS decodes without timestamp tokens (openai-whisper's
     * without_timestamps: one segment per 30-second window); NO_CONDITION_ON_PREVIOUS_TEXT gives each
     * window no prompt of the text before it (condition_on_previous_text=False). */
    bool                      no_timestamps;
    bool                      no_condition_on_previous_text;
    /* Whisper (appended): the temperatures transcribe()'s fallback tries in turn while a window's text is
     * too repetitive (compression ratio > 2.4) or unlikely (avg_logprob < -1) and not silence; NULL / 0:
     * {0} alone (greedy or beam, no fallback). Above 0 tokens are drawn from softmax(logits / T) with a
     * generator seeded with SEED (ours: not torch's draws), BEST_OF samples (0: one), the likeliest kept. */
    const float *             temperatures;
    int                       n_temperatures;
    int                       best_of;
    uint64_t                  seed;
    /* FastConformer models trained with several attention contexts (NeMo's cache-aware streaming models,
     * transcribe_model_info.att_contexts): {left, right}, the encoder frames each frame's attention
     * reaches (NeMo's set_default_att_context_size; the right one is the lookahead). NULL: the model's
     * default (its first). INVALID_ARG, naming the model's, for one it was not trained with. (Appended.) */
    const int32_t *           att_context_size;
} transcribe_run_params;

TRANSCRIBE_API transcribe_run_params transcribe_run_params_init(void);

/* pcm: mono float samples at the model's sample rate, any length: audio longer than the window is cut at
 * pauses into pieces, decoded together up to the session's batch size (one after another when a
 * token_callback streams), each a segment with times in the original audio.
 * On TRANSCRIBE_OK or TRANSCRIBE_ERR_OUTPUT_TRUNCATED (some piece ran out of token budget; its segment is
 * flagged) *out_result holds the transcript; otherwise it is set to NULL. */
TRANSCRIBE_API transcribe_status transcribe_run(transcribe_session * session, const float * pcm, size_t n_samples,
                                                const transcribe_run_params * params, transcribe_result ** out_result);
/* n utterances; results[i] and statuses[i] as transcribe_run would give them (the same ids: batching does
 * not change what is decoded beyond F32 rounding of the logits). Those within one window are decoded
 * together, up to the session's batch size at a time, a finished one's place taken by the next (without a
 * VAD or token_callback); the others then run as transcribe_run runs them. Returns TRANSCRIBE_OK when
 * every utterance succeeded, else the first failing status. */
TRANSCRIBE_API transcribe_status transcribe_run_batch(transcribe_session * session, const float * const * pcm,
                                                      const size_t * n_samples, int n,
                                                      const transcribe_run_params * params,
                                                      transcribe_result ** results, transcribe_status * statuses);

/* Forced alignment of a known text (a script, lyrics, a corrected transcript): SESSION's model must be an
 * aligner (transcribe_model_info.forced_aligner, or ctc_head: NeMo Forced Aligner's way). TEXT (UTF-8) is
 * timed in PCM (mono, the model's rate; a forced aligner takes at most max_audio_ms of it); LANGUAGE (may
 * be NULL) is the text's, where the aligner splits some languages its own way. *out_result: one result
 * whose text is TEXT and whose words (transcribe_get_word) and segments carry the aligner's times. */
TRANSCRIBE_API transcribe_status transcribe_align(transcribe_session * session, const float * pcm, size_t n_samples,
                                                  const char * text, const char * language,
                                                  transcribe_result ** out_result);

/* ---------------------------------------------------------------- shared session (continuous batching) */
/* One session shared by threads: transcribe_batcher_run blocks until its recording is transcribed, like
 * transcribe_run, while the recordings of concurrent calls (and the pieces of long ones) are decoded
 * together in the session's decode steps, each joining and leaving between steps (up to the session's
 * batch size at once; more wait their turn). A thread of the batcher's own drives the session: callers
 * must not use the session directly while the batcher exists. token_callback runs on that thread (a
 * streaming caller's pieces go one at a time, so its tokens come in order); the session's progress
 * callback and timings say nothing per call. Free it after every run has returned. */
typedef struct transcribe_batcher transcribe_batcher;
TRANSCRIBE_API transcribe_status transcribe_batcher_create(transcribe_session * session, transcribe_batcher ** out_batcher);
TRANSCRIBE_API void transcribe_batcher_free(transcribe_batcher * batcher);
TRANSCRIBE_API transcribe_status transcribe_batcher_run(transcribe_batcher * batcher, const float * pcm, size_t n_samples,
                                                        const transcribe_run_params * params,
                                                        transcribe_result ** out_result);

/* ---------------------------------------------------------------- results */
TRANSCRIBE_API const char *    transcribe_result_text(const transcribe_result * result);
TRANSCRIBE_API bool            transcribe_result_truncated(const transcribe_result * result);
TRANSCRIBE_API int             transcribe_result_n_tokens(const transcribe_result * result);
TRANSCRIBE_API const int32_t * transcribe_result_tokens(const transcribe_result * result);
TRANSCRIBE_API int             transcribe_result_n_segments(const transcribe_result * result);
TRANSCRIBE_API int64_t         transcribe_result_segment_t0_ms(const transcribe_result * result, int i);
TRANSCRIBE_API int64_t         transcribe_result_segment_t1_ms(const transcribe_result * result, int i);
TRANSCRIBE_API const char *    transcribe_result_segment_text(const transcribe_result * result, int i);
TRANSCRIBE_API bool            transcribe_result_segment_truncated(const transcribe_result * result, int i);
TRANSCRIBE_API int             transcribe_result_segment_n_tokens(const transcribe_result * result, int i);
TRANSCRIBE_API const int32_t * transcribe_result_segment_tokens(const transcribe_result * result, int i);
/* With a diarizer (transcribe_run_params.diarizer): the segment's speaker index; otherwise -1. */
TRANSCRIBE_API int             transcribe_result_segment_speaker(const transcribe_result * result, int i);
/* The speech's language where the model tells it (Whisper: the one given or detected); "" otherwise. */
TRANSCRIBE_API const char *    transcribe_result_language(const transcribe_result * result);
/* Whisper: the decode of the 30-second window a segment came from (openai-whisper's verbose_json fields). */
typedef struct transcribe_segment_decode {
    int    seek;              /* the window's first mel frame (10 ms each) */
    float  temperature;
    double avg_logprob;
    double compression_ratio;
    float  no_speech_prob;
} transcribe_segment_decode;
/* TRANSCRIBE_OK and *OUT filled where the model gives them; INVALID_ARG otherwise. */
TRANSCRIBE_API transcribe_status transcribe_result_segment_decode(const transcribe_result * result, int i,
                                                                  transcribe_segment_decode * out);
/* Words with the times the model gives them (models whose info says word_timestamps; others have none).
 * segment < 0: every word of the result, in order; otherwise the words of that segment. */
typedef struct transcribe_word {
    const char * text;  /* valid until the result is freed */
    int64_t      t0_ms;
    int64_t      t1_ms;
    int          speaker; /* with a diarizer: its speaker index; otherwise -1 (appended: rebuild older callers) */
} transcribe_word;
TRANSCRIBE_API int               transcribe_result_n_words(const transcribe_result * result, int segment);
TRANSCRIBE_API transcribe_status transcribe_get_word(const transcribe_result * result, int segment, int i,
                                                     transcribe_word * out);
TRANSCRIBE_API void            transcribe_result_free(transcribe_result * result);

/* ---------------------------------------------------------------- live streams */
/* Live transcription of one audio stream (a microphone, a WebSocket): samples pushed as they come;
 * turns of speech found as they happen by a VAD (OpenAI's server_vad: a turn starts at the first chunk
 * of speech, PREFIX_PADDING_MS before it, and ends once SILENCE_DURATION_MS of quiet have passed, that
 * silence included) or committed by the caller; each ended turn transcribed from its own samples, as
 * transcribe_run would transcribe them; the turn still being spoken re-transcribed now and then, its
 * words sent as append-only deltas once two consecutive hearings agree on them. The stream holds no
 * session: transcribe_stream_decode borrows one (or a batcher) only for the work that is due, so many
 * streams can share a model. transcribe_stream_decode may run on a thread of its own while another
 * pushes, commits, clears and takes the events (it transcribes without holding the stream, so turn edges
 * keep being found meanwhile); otherwise one thread at a time per stream, one decode at a time. */
typedef struct transcribe_stream transcribe_stream;

typedef struct transcribe_stream_params {
    int   sample_rate;         /* of the pushed samples (default 16000; the VAD hears them at 16 kHz) */
    bool  turn_detection;      /* true (default): turns from the VAD given at create; false: by commit only */
    float threshold;           /* a chunk at or over this speech probability starts a turn (default 0.5) */
    int   prefix_padding_ms;   /* audio before the speech a turn includes (default 300) */
    int   silence_duration_ms; /* quiet that ends a turn (default 500) */
    int   partial_interval_ms; /* the open turn re-transcribed at most once per this much audio, backing off
                                  to keep it under half of real time (default 500); 0: no deltas */
    bool  end_of_turn;         /* transcribe_stream_create_native without turn_detection: turns end where an
                                  end-of-utterance model says so (OpenAI's semantic_vad; default false) */
} transcribe_stream_params;

typedef enum transcribe_stream_event_type {
    TRANSCRIBE_STREAM_SPEECH_STARTED, /* a turn began at audio_start_ms */
    TRANSCRIBE_STREAM_SPEECH_STOPPED, /* the VAD ended the turn at audio_end_ms */
    TRANSCRIBE_STREAM_COMMITTED,      /* the turn's audio [audio_start_ms, audio_end_ms) is final */
    TRANSCRIBE_STREAM_DELTA,          /* text: words to append to the turn's partial transcript */
    TRANSCRIBE_STREAM_COMPLETED,      /* text: the turn's transcript */
} transcribe_stream_event_type;

typedef struct transcribe_stream_event {
    transcribe_stream_event_type type;
    int64_t      item;           /* the turn: 0, 1, ... in the order turns start or are committed */
    int64_t      audio_start_ms; /* in the stream's audio, from its first sample */
    int64_t      audio_end_ms;   /* STOPPED, COMMITTED, COMPLETED: the turn's end; DELTA: the audio heard */
    const char * text;           /* valid until the next transcribe_stream_next_event or free */
} transcribe_stream_event;

TRANSCRIBE_API transcribe_stream_params transcribe_stream_params_init(void);
/* VAD: required with turn_detection (INVALID_ARG without), ignored otherwise; it must outlive the stream. */
TRANSCRIBE_API transcribe_status transcribe_stream_create(transcribe_vad_model * vad, const transcribe_stream_params * params,
                                                          transcribe_stream ** out_stream);
/* A live stream through a model that transcribes as it hears (transcribe_model_info.native_streaming), on
 * SESSION (the stream's own until it is freed: no run on it meanwhile), with RUN's att_context_size,
 * decoder_type and hotwords (NULL: the model's). The same events; each step's new words are a DELTA, and
 * nothing is transcribed twice. Turns: with params->turn_detection the VAD's, each turn's audio (its
 * prefix padding included) streamed through the model on its own, so its COMPLETED is the model's
 * streaming transcript of that audio; with params->end_of_turn (an end-of-utterance model) one stream
 * over all the audio, a turn ending at the model's end_of_turn_token (its text without it); else one
 * stream from commit to commit. A commit finishes the current turn's stream (all its audio transcribed).
 * transcribe_stream_decode runs the steps due (its SESSION and BATCHER then NULL). INVALID_ARG for a
 * model that does not stream natively, or end_of_turn on one without the token. */
TRANSCRIBE_API transcribe_status transcribe_stream_create_native(transcribe_session * session, transcribe_vad_model * vad,
                                                                 const transcribe_stream_params * params,
                                                                 const transcribe_run_params * run,
                                                                 transcribe_stream ** out_stream);
TRANSCRIBE_API void transcribe_stream_free(transcribe_stream * stream);
/* Mono samples at the stream's rate, any number at a time. */
TRANSCRIBE_API transcribe_status transcribe_stream_push(transcribe_stream * stream, const float * pcm, size_t n_samples);
/* The audio since the last turn (or the open turn) becomes a turn now: INVALID_ARG under 100 ms. With
 * turn detection, the silence between turns is kept only as far as a turn's prefix padding (plus a
 * second): a commit then takes at most that much of it. */
TRANSCRIBE_API transcribe_status transcribe_stream_commit(transcribe_stream * stream);
/* Forgets the audio since the last turn, an open turn with it. */
TRANSCRIBE_API transcribe_status transcribe_stream_clear(transcribe_stream * stream);
/* Whether transcribe_stream_decode has work: an ended turn, or a partial transcript due. */
TRANSCRIBE_API bool transcribe_stream_decode_due(const transcribe_stream * stream);
/* Ended turns waiting to be transcribed (0 when only a partial transcript is due): a scheduler of many
 * streams can finish turns before it spends time on partials. */
TRANSCRIBE_API size_t transcribe_stream_turns_waiting(const transcribe_stream * stream);
/* Transcribes the ended turns (COMPLETED each, with PARAMS as transcribe_run takes them, the samples
 * resampled to the model's rate) and, where due, the open turn (DELTA where new words agree), on SESSION,
 * or through BATCHER when it is not NULL (then SESSION may be NULL). OUTPUT_TRUNCATED where a turn's
 * transcript ran out of token budget (its event is still there). */
TRANSCRIBE_API transcribe_status transcribe_stream_decode(transcribe_stream * stream, transcribe_session * session,
                                                          transcribe_batcher * batcher,
                                                          const transcribe_run_params * params);
/* The next event, false when there is none. */
TRANSCRIBE_API bool transcribe_stream_next_event(transcribe_stream * stream, transcribe_stream_event * out);

/* ---------------------------------------------------------------- native streams */
/* A stream through a model that transcribes as it hears (transcribe_model_info.native_streaming: NeMo's
 * cache-aware streaming FastConformers): samples pushed as they come; each chunk of audio (the model's
 * lookahead, transcribe_run_params.att_context_size's right context, decides its length) goes through the
 * encoder once, with the caches of the chunks before, as soon as it is complete, and its tokens are
 * decoded at once, the decoder's state carried on: a step. The steps' tokens joined are NeMo's streaming
 * transcript. The stream uses SESSION (its executor and decoder state) until it is freed: no run on that
 * session meanwhile. An end-of-utterance model says where a turn ends with its end_of_turn_token. */
typedef struct transcribe_native_stream transcribe_native_stream;

typedef struct transcribe_stream_step {
    int64_t         index;        /* 0, 1, ... */
    int64_t         audio_end_ms; /* the audio heard when it ran (its chunk's end) */
    int             n_tokens;     /* the ids this step decoded */
    const int32_t * tokens;       /* valid until the next transcribe_native_stream_next_step or free */
    const char *    text;         /* what they add to the text: the steps' texts joined are the transcript
                                     before its clean-up (a space before punctuation dropped); same lifetime */
} transcribe_stream_step;

/* PARAMS: att_context_size (the lookahead), decoder_type, hotwords; NULL: the model's defaults.
 * INVALID_ARG for a model that does not stream natively, naming the alternative. */
TRANSCRIBE_API transcribe_status transcribe_native_stream_open(transcribe_session * session,
                                                               const transcribe_run_params * params,
                                                               transcribe_native_stream ** out_stream);
TRANSCRIBE_API void transcribe_native_stream_free(transcribe_native_stream * stream);
/* Mono samples at the model's rate; runs every step whose chunk is complete. */
TRANSCRIBE_API transcribe_status transcribe_native_stream_push(transcribe_native_stream * stream, const float * pcm,
                                                               size_t n_samples);
/* The audio ended: runs the steps left. Pushing after it is INVALID_ARG. */
TRANSCRIBE_API transcribe_status transcribe_native_stream_finish(transcribe_native_stream * stream);
/* The next step run and not yet taken; false when there is none. */
TRANSCRIBE_API bool transcribe_native_stream_next_step(transcribe_native_stream * stream, transcribe_stream_step * out);
/* The transcript so far (NeMo's streaming hypothesis text), valid until the next call on the stream. */
TRANSCRIBE_API const char * transcribe_native_stream_text(transcribe_native_stream * stream);

typedef struct transcribe_timings {
    double load_ms;
    double mel_ms;
    double encode_ms;
    double prefill_ms;
    double decode_ms;
    int    n_prefill_tokens;
    int    n_decode_tokens;
    double vad_ms;           /* voice-activity detection (runs with transcribe_run_params.vad only) */
    /* Speculative decoding (appended): the draft model's runs, the decoder's passes (n_decode_tokens / n_decode_steps
     * tokens a pass), the draft tokens checked and kept, and the passes that checked any. */
    double draft_ms;
    int    n_decode_steps;
    int    n_drafted_tokens;
    int    n_accepted_tokens;
    int    n_verify_steps;
    double diarize_ms; /* (appended) the diarizer's run (transcribe_run_params.diarizer only) */
} transcribe_timings;

/* Timings of the session's last run, summed over its pieces (load_ms is the model's). */
TRANSCRIBE_API transcribe_status transcribe_session_get_timings(const transcribe_session * session,
                                                                transcribe_timings * out);

#ifdef __cplusplus
}
#endif

#endif /* TRANSCRIBE_H */
