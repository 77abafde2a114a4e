#include "beam_search.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace transcribe {

namespace {

constexpr float kNegInf = -10000.0f; // NeMo's NEG_INF

// The K largest entries of V, largest first (the lower index first among equals).
std::vector<int32_t> top_k(const std::vector<float> & v, int k) {
    std::vector<int32_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return v[size_t(a)] > v[size_t(b)] || (v[size_t(a)] == v[size_t(b)] && a < b); });
    idx.resize(size_t(k));
    return idx;
}

float length_penalty(float length, float alpha) { return std::pow((5.0f + length) / 6.0f, alpha); }

} // namespace

namespace {

// What torch's softmax and log_softmax divide by: the row's maximum, and the sum of exp(x - max) (in double).
struct Normaliser {
    float  top;
    double sum;
};

Normaliser normaliser(const float * row, size_t n) {
    Normaliser z {*std::max_element(row, row + n), 0.0};
    for (size_t i = 0; i < n; ++i) {
        z.sum += std::exp(double(row[i] - z.top));
    }
    return z;
}

} // namespace

std::vector<float> log_softmax(const std::vector<float> & logits) {
    const Normaliser z = normaliser(logits.data(), logits.size());
    const float log_sum = float(std::log(z.sum));
    std::vector<float> out(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = (logits[i] - z.top) - log_sum;
    }
    return out;
}

float log_softmax_at(const std::vector<float> & logits, int32_t id) {
    const Normaliser z = normaliser(logits.data(), logits.size());
    return (logits[size_t(id)] - z.top) - float(std::log(z.sum));
}

float softmax_at(const float * row, int n, int32_t id) {
    const Normaliser z = normaliser(row, size_t(n));
    return float(std::exp(double(row[id] - z.top)) / z.sum);
}

BeamSearchResult beam_search(StepDecoder & decoder, const std::vector<int> & seqs, const std::vector<float> & first_logits,
                             const BeamSearchConfig & c, const std::function<void()> & between_steps) {
    const int K = c.beam_size;
    if (K < 1 || size_t(K) != seqs.size() || int(first_logits.size()) < K) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "beam search of %d beams over %zu sequences", K, seqs.size());
    }
    BeamSearchResult r;
    std::vector<BeamHypothesis> & beams = r.hypotheses;
    beams.resize(size_t(K));
    {
        const std::vector<float> lp = log_softmax(first_logits);
        const std::vector<int32_t> best = top_k(lp, K);
        for (int j = 0; j < K; ++j) {
            beams[size_t(j)].tokens = {best[size_t(j)]};
            beams[size_t(j)].score  = lp[size_t(best[size_t(j)])];
        }
    }
    decoder.reorder(seqs, std::vector<int>(size_t(K), 0)); // every beam starts from the prompt
    auto ended = [&](int32_t t) { return t == c.eos || t == c.pad; };
    // NeMo's prefixes_len: 1 + the prefix's tokens that are neither end-of-text nor pad (prompt included).
    std::vector<float> lengths(size_t(K), float(c.prompt_length + 2));
    std::vector<bool>  finished(size_t(K), false);

    std::vector<int32_t> fed(static_cast<size_t>(K)), next;
    std::vector<std::vector<float>> logits;
    std::vector<float> candidates(size_t(K) * size_t(K));
    std::vector<int32_t> cand_tokens(size_t(K) * size_t(K));
    std::vector<int> sources(static_cast<size_t>(K));
    std::vector<BeamHypothesis> chosen(static_cast<size_t>(K));
    for (int step = 0; step < c.max_steps; ++step) {
        between_steps();
        for (int j = 0; j < K; ++j) {
            fed[size_t(j)] = beams[size_t(j)].tokens.back();
        }
        decoder.step(seqs, fed, next, &logits);
        ++r.n_steps;
        for (int j = 0; j < K; ++j) {
            const std::vector<float> lp = log_softmax(logits[size_t(j)]);
            const std::vector<int32_t> best = top_k(lp, K);
            const float penalty = length_penalty(lengths[size_t(j)], c.length_penalty);
            for (int k = 0; k < K; ++k) {
                const size_t at = size_t(j) * size_t(K) + size_t(k);
                const float  s  = lp[size_t(best[size_t(k)])];
                float weight = 1.0f;
                if (finished[size_t(j)]) {
                    weight = k == 0 ? 0.0f : 1.0f - kNegInf;
                }
                cand_tokens[at] = finished[size_t(j)] ? c.pad : best[size_t(k)];
                candidates[at]  = (beams[size_t(j)].score + s * weight) / penalty;
            }
        }
        const std::vector<int32_t> picks = top_k(candidates, K);
        for (int j = 0; j < K; ++j) {
            const int32_t at  = picks[size_t(j)];
            const int     src = at / K;
            sources[size_t(j)] = src;
            chosen[size_t(j)].tokens = beams[size_t(src)].tokens;
            chosen[size_t(j)].tokens.push_back(cand_tokens[size_t(at)]);
            // NeMo multiplies the kept scores back by the penalties in the old beams' order.
            chosen[size_t(j)].score = candidates[size_t(at)] * length_penalty(lengths[size_t(j)], c.length_penalty);
        }
        beams.swap(chosen);
        decoder.reorder(seqs, sources);
        bool all = true;
        for (int j = 0; j < K; ++j) {
            const std::vector<int32_t> & t = beams[size_t(j)].tokens;
            lengths[size_t(j)] = float(1 + c.prompt_length + std::count_if(t.begin(), t.end(), [&](int32_t x) { return !ended(x); }));
            finished[size_t(j)] = ended(t.back());
            all = all && finished[size_t(j)];
        }
        if (all) {
            r.finished = true;
            break;
        }
    }
    float best_score = 0.0f;
    for (int j = 0; j < K; ++j) {
        const float s = beams[size_t(j)].score / length_penalty(lengths[size_t(j)], c.length_penalty);
        if (j == 0 || s > best_score) {
            best_score = s;
            r.best     = size_t(j);
        }
    }
    return r;
}

} // namespace transcribe
