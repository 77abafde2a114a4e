// NeMo's cache-aware streaming of a FastConformer (ConformerEncoder.setup_streaming_params, the
// CacheAwareStreamingAudioBuffer's chunks, cache_aware_stream_step): audio pushed as it comes, log-mel
// frames made as soon as their samples are there, and an encoder step run on each chunk of mel frames
// once it is complete (the rest when the audio ends), with the pre-encode cache of mel frames in front
// and each layer's attention and convolution caches carried from step to step. Each step's encoder
// output goes through the family's head in the same graph.
#pragma once

#include "speech_encoder.h"

#include <deque>
#include <vector>

namespace transcribe {

// NeMo's CacheAwareStreamingConfig for a chunked_limited model at one attention context (x8 causal
// dw_striding: sampling frames [1, 8], pre-encode cache [0, 9]).
struct CacheAwareStreamingConfig {
    int chunk_first = 0, chunk = 0; // mel frames of the first chunk and of each one after
    int shift_first = 0, shift = 0; // how far the buffer moves after them
    int valid_out_len = 0;          // encoder frames a step keeps (all on the last)
    int cache_frames  = 0;          // last_channel_cache_size: earlier frames each layer's attention sees
    int pre_encode_cache = 0;       // mel frames before a chunk that go in with it (after the first)
    int drop = 0;                   // subsampled frames dropped in front (drop_extra_pre_encoded, after the first)
    int sampling_first = 1, sampling = 8; // a chunk shorter than this ends the stream
    // INVALID_ARG where the model cannot stream (not chunked_limited, or not causal).
    static CacheAwareStreamingConfig from(const FastConformerHParams & hp, const AttentionContext & context);
};

class CacheAwareEncoderStream {
public:
    // HEAD_ROWS: the head's output rows a frame.
    CacheAwareEncoderStream(const SpeechEncoder & encoder, const AttentionContext & context, SpeechEncoder::Head head,
                            int head_rows);

    // One encoder step: the head's output of its frames, time-major [frames][head_rows].
    struct Step {
        int                index = 0;
        int                frames = 0;
        int                first_frame = 0; // of the stream's encoder output
        int                mel_end = 0;     // mel frames heard when it ran (its chunk's end)
        std::vector<float> head_out;
    };
    // Pushed samples (mono, the model's rate); runs every step whose chunk is complete into STEPS.
    void push(Executor & exec, const float * pcm, size_t n, int n_threads, std::vector<Step> & steps);
    // The audio ended: runs the steps left (NeMo's buffer: until a chunk would be shorter than its
    // sampling frames). Pushing after it is an error.
    void finish(Executor & exec, int n_threads, std::vector<Step> & steps);

    const CacheAwareStreamingConfig & config() const { return cfg_; }
    int64_t samples_pushed() const { return n_pushed_; }
    bool    finished() const { return finished_; }

private:
    // The mel frames [from, to) of the signal so far (n_total: its length once finished, else -1).
    void make_mel(int to, int n_threads);
    bool run_step(Executor & exec, int n_threads, std::vector<Step> & steps);
    void trim_held();

    const SpeechEncoder &     enc_;
    AttentionContext          context_;
    SpeechEncoder::Head       head_;
    int                       head_rows_;
    CacheAwareStreamingConfig cfg_;
    GraphCache                graphs_;
    // Samples from held_start_ on; mel frames from mel_start_ on (channel-major, mel_frames_ - mel_start_ a channel).
    std::vector<float> samples_;
    int64_t            held_start_ = 0, n_pushed_ = 0;
    std::vector<float> mel_;
    int                mel_start_ = 0, mel_frames_ = 0;
    bool               finished_ = false;
    // The caches (the steps' graphs read and update them in place), made on the first step in the
    // executor's memory, zeros: the last cache_valid_ of the attention's cache_frames filled.
    void make_caches(Executor & exec);

    int                         buffer_idx_ = 0, step_ = 0, frames_out_ = 0, cache_valid_ = 0;
    bool                        keep_inputs_ = false; // NeMo's cache_last_channel too (dumps)
    std::vector<float>          dumped_enc_;          // dumps: every step's encoder output
    FastConformer::StreamCaches caches_;
    ggml_context *              cache_ctx_ = nullptr;
    ggml_backend_buffer_t       cache_buf_ = nullptr;

public:
    ~CacheAwareEncoderStream();
    CacheAwareEncoderStream(const CacheAwareEncoderStream &) = delete;
    CacheAwareEncoderStream & operator=(const CacheAwareEncoderStream &) = delete;
};

} // namespace transcribe
