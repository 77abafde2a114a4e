#include "sortformer_speaker_cache.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace transcribe {

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
// NeMo's placeholder index for a top-k pick of -inf (SortformerModules.max_index): it sorts after
// every real index, so those slots end the cache.
constexpr long kMaxIndex = 99999;
} // namespace

SpeakerCache::SpeakerCache(const SpeakerCacheParams & p, int dim, int n_speakers)
    : p_(p), dim_(dim), n_spk_(n_speakers), mean_sil_(size_t(dim), 0.0f) {
    // NeMo's _check_streaming_parameters.
    if (p.spkcache_len < (1 + p.sil_frames_per_spk) * n_speakers || p.fifo_len < 0 || p.chunk_len < 1 ||
        p.spkcache_update_period < 1 || p.chunk_left_context < 0 || p.chunk_right_context < 0 || p.sil_frames_per_spk < 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG,
             "streaming diarization: invalid sizes (speaker cache %d >= %d, FIFO %d >= 0, chunk %d >= 1, update period %d "
             ">= 1, context %d/%d >= 0)",
             p.spkcache_len, (1 + p.sil_frames_per_spk) * n_speakers, p.fifo_len, p.chunk_len, p.spkcache_update_period,
             p.chunk_left_context, p.chunk_right_context);
    }
}

std::vector<float> SpeakerCache::prefix() const {
    std::vector<float> out(cache_);
    out.insert(out.end(), fifo_.begin(), fifo_.end());
    return out;
}

std::vector<float> SpeakerCache::update(const std::vector<float> & chunk, const std::vector<float> & preds, int lc, int rc) {
    const size_t d = size_t(dim_), k = size_t(n_spk_);
    const int    S = cache_rows(), F = fifo_rows(), C = int(chunk.size() / d) - lc - rc;
    // The FIFO's probabilities are refreshed from this step's output; the cache's are not.
    fifo_preds_.assign(preds.begin() + long(size_t(S) * k), preds.begin() + long(size_t(S + F) * k));
    const auto chunk_preds_begin = preds.begin() + long(size_t(S + F + lc) * k);
    std::vector<float> chunk_preds(chunk_preds_begin, chunk_preds_begin + long(size_t(C) * k));
    fifo_.insert(fifo_.end(), chunk.begin() + long(size_t(lc) * d), chunk.begin() + long(size_t(lc + C) * d));
    fifo_preds_.insert(fifo_preds_.end(), chunk_preds.begin(), chunk_preds.end());

    if (F + C > p_.fifo_len) {
        int pop = std::max(p_.spkcache_update_period, C - p_.fifo_len + F);
        pop     = std::min(pop, F + C);
        add_silence(fifo_.data(), fifo_preds_.data(), pop);
        cache_.insert(cache_.end(), fifo_.begin(), fifo_.begin() + long(size_t(pop) * d));
        if (has_cache_preds_) {
            cache_preds_.insert(cache_preds_.end(), fifo_preds_.begin(), fifo_preds_.begin() + long(size_t(pop) * k));
        }
        if (cache_rows() > p_.spkcache_len) {
            if (!has_cache_preds_) {
                // The first compression: the old cache rows take this step's probabilities.
                cache_preds_.assign(preds.begin(), preds.begin() + long(size_t(S) * k));
                cache_preds_.insert(cache_preds_.end(), fifo_preds_.begin(), fifo_preds_.begin() + long(size_t(pop) * k));
                has_cache_preds_ = true;
            }
            compress();
        }
        fifo_.erase(fifo_.begin(), fifo_.begin() + long(size_t(pop) * d));
        fifo_preds_.erase(fifo_preds_.begin(), fifo_preds_.begin() + long(size_t(pop) * k));
    }
    return chunk_preds;
}

// _get_silence_profile: frames whose probabilities sum below sil_threshold update the running mean.
void SpeakerCache::add_silence(const float * emb, const float * preds, int rows) {
    const size_t d = size_t(dim_), k = size_t(n_spk_);
    std::vector<float> sum(d, 0.0f);
    long count = 0;
    for (int t = 0; t < rows; ++t) {
        float total = 0.0f;
        for (size_t s = 0; s < k; ++s) {
            total += preds[size_t(t) * k + s];
        }
        if (total < p_.sil_threshold) {
            ++count;
            for (size_t j = 0; j < d; ++j) {
                sum[j] += emb[size_t(t) * d + j];
            }
        }
    }
    if (count == 0) {
        return;
    }
    const long n = n_sil_ + count;
    for (size_t j = 0; j < d; ++j) {
        mean_sil_[j] = (mean_sil_[j] * float(n_sil_) + sum[j]) / float(n);
    }
    n_sil_ = n;
}

namespace {
// The K largest of VALUES as torch.topk(..., sorted=False) picks them on a CPU (ATen's topk_impl_loop: the
// values as (double, index) pairs in index order, std::partial_sort of the first K where K * 64 <= N, else
// std::nth_element at K - 1), so that among equal values the same ones are taken: a recording's identical
// frames (digital silence) score alike, and which of them the cache keeps decides its rows' order.
std::vector<long> torch_topk(const std::vector<float> & values, int k) {
    using Elem = std::pair<double, long>;
    std::vector<Elem> queue(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
        queue[i] = {double(values[i]), long(i)};
    }
    const auto larger = [](const Elem & x, const Elem & y) { return x.first > y.first; };
    if (int64_t(k) * 64 <= int64_t(queue.size())) {
        std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), larger);
    } else {
        std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), larger);
    }
    std::vector<long> picks(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) {
        picks[size_t(i)] = queue[size_t(i)].second;
    }
    return picks;
}
} // namespace

// _compress_spkcache (evaluation: no speaker permutation, no score noise), in float32 as NeMo's tensors.
void SpeakerCache::compress() {
    const size_t d = size_t(dim_), k = size_t(n_spk_);
    const int    N = cache_rows(), sil = p_.sil_frames_per_spk, L = p_.spkcache_len;
    const int    per_spk   = L / n_spk_ - sil;
    const int    strong    = int(std::floor(per_spk * double(p_.strong_boost_rate)));
    const int    weak      = int(std::floor(per_spk * double(p_.weak_boost_rate)));
    const int    min_pos   = int(std::floor(per_spk * double(p_.min_pos_scores_rate)));
    const float  log_half  = float(std::log(0.5));
    const float  threshold = p_.pred_score_threshold;

    // scores[s][t]: high where speaker s alone speaks confidently.
    std::vector<std::vector<float>> scores(k, std::vector<float>(size_t(N)));
    for (int t = 0; t < N; ++t) {
        const float * p = &cache_preds_[size_t(t) * k];
        float log_rest = 0.0f;
        for (size_t s = 0; s < k; ++s) {
            log_rest += std::log(std::max(1.0f - p[s], threshold));
        }
        for (size_t s = 0; s < k; ++s) {
            const float v = std::log(std::max(p[s], threshold)) - std::log(std::max(1.0f - p[s], threshold)) + log_rest - log_half;
            scores[s][size_t(t)] = p[s] > 0.5f ? v : -kInf;
        }
    }
    for (size_t s = 0; s < k; ++s) {
        std::vector<float> & sc = scores[s];
        // A speaker with enough positive (non-overlapped) frames keeps only those.
        if (std::count_if(sc.begin(), sc.end(), [](float v) { return v > 0.0f; }) >= min_pos) {
            for (float & v : sc) {
                v = v > 0.0f ? v : -kInf;
            }
        }
        for (int t = L; t < N; ++t) {
            sc[size_t(t)] += p_.scores_boost_latest; // the frames that just arrived
        }
        // Every speaker's best frames are boosted: strongly (2 log 2) the first, weakly (log 2) more.
        for (const auto & [n_boost, boost] : {std::pair {strong, -2.0f * log_half}, std::pair {weak, -log_half}}) {
            for (const long t : torch_topk(sc, std::min(n_boost, N))) {
                sc[size_t(t)] += boost;
            }
        }
    }
    // Flatten speaker-major with sil silence rows (+inf) after each speaker, keep the L best; -inf
    // picks become placeholders. Sorting the flat indices orders the cache speaker by speaker.
    const long stride = N + sil;
    std::vector<float> flat;
    for (size_t s = 0; s < k; ++s) {
        flat.insert(flat.end(), scores[s].begin(), scores[s].end());
        flat.insert(flat.end(), size_t(sil), kInf);
    }
    std::vector<long> picks = torch_topk(flat, L);
    for (long & pick : picks) {
        pick = flat[size_t(pick)] == -kInf ? kMaxIndex : pick;
    }
    std::sort(picks.begin(), picks.end());

    std::vector<float> cache(size_t(L) * d), preds(size_t(L) * k, 0.0f);
    for (int i = 0; i < L; ++i) {
        const long frame = picks[size_t(i)] % stride;
        if (picks[size_t(i)] == kMaxIndex || frame >= N) { // disabled: the mean silence, no speaker
            std::copy(mean_sil_.begin(), mean_sil_.end(), cache.begin() + long(size_t(i) * d));
            continue;
        }
        std::copy_n(cache_.begin() + long(size_t(frame) * d), d, cache.begin() + long(size_t(i) * d));
        std::copy_n(cache_preds_.begin() + long(size_t(frame) * k), k, preds.begin() + long(size_t(i) * k));
    }
    cache_       = std::move(cache);
    cache_preds_ = std::move(preds);
}

} // namespace transcribe
