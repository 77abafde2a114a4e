// Streaming Sortformer's memory (NeMo SortformerModules.streaming_update, synchronous, batch 1): the
// speaker cache (pre-encoded frames chosen to represent each speaker, ordered by arrival) and the FIFO
// of the latest frames. Each step the model sees [cache; FIFO; chunk with context]; afterwards the
// chunk joins the FIFO, the oldest FIFO frames move to the cache when it overflows, and the cache, past
// its length, is compressed to the frames with the best per-speaker scores.
#pragma once

#include <cstddef>
#include <vector>

namespace transcribe {

// The model's constants (sortformer_modules in its config) and the run's sizes, in 80 ms frames.
struct SpeakerCacheParams {
    int spkcache_len           = 188;
    int fifo_len               = 188;
    int spkcache_update_period = 144;
    int chunk_len              = 6;
    int chunk_left_context     = 1;
    int chunk_right_context    = 7;

    int   sil_frames_per_spk   = 3;
    float pred_score_threshold = 0.25f;
    float scores_boost_latest  = 0.05f;
    float sil_threshold        = 0.2f;
    float strong_boost_rate    = 0.75f;
    float weak_boost_rate      = 1.5f;
    float min_pos_scores_rate  = 0.5f;
};

class SpeakerCache {
public:
    // INVALID_ARG for sizes NeMo's _check_streaming_parameters rejects.
    SpeakerCache(const SpeakerCacheParams & params, int dim, int n_speakers);

    int cache_rows() const { return int(cache_.size() / size_t(dim_)); }
    int fifo_rows() const { return int(fifo_.size() / size_t(dim_)); }
    // The step's first rows: the cache's embeddings, then the FIFO's ([rows][dim]).
    std::vector<float> prefix() const;

    // After the model ran on [cache; FIFO; chunk]: CHUNK holds the chunk's pre-encoded rows with their
    // context (lc left, rc right), PREDS the probabilities of every input row. Returns the chunk's own
    // rows' probabilities.
    std::vector<float> update(const std::vector<float> & chunk, const std::vector<float> & preds, int lc, int rc);

    // State, for the parity dumps (cache_preds empty until the first compression).
    const std::vector<float> & cache() const { return cache_; }
    const std::vector<float> & cache_preds() const { return cache_preds_; }
    const std::vector<float> & fifo() const { return fifo_; }
    const std::vector<float> & mean_silence() const { return mean_sil_; }
    long                       silence_frames() const { return n_sil_; }

private:
    void add_silence(const float * emb, const float * preds, int rows);
    void compress();

    SpeakerCacheParams p_;
    int                dim_, n_spk_;
    std::vector<float> cache_, cache_preds_, fifo_, fifo_preds_, mean_sil_;
    bool               has_cache_preds_ = false;
    long               n_sil_           = 0;
};

} // namespace transcribe
