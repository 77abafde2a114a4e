#include "whisper_decoding.h"

#include "beam_search.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

namespace transcribe {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void mask(std::vector<float> & logits, int32_t begin, int32_t end) {
    std::fill(logits.begin() + std::max(begin, 0), logits.begin() + std::min<int64_t>(end, int64_t(logits.size())), kNegInf);
}

int32_t argmax(const std::vector<float> & v) { // the first of equals, as torch's argmax
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// torch.logsumexp over X[begin, end).
float logsumexp(const std::vector<float> & x, size_t begin, size_t end) {
    float top = kNegInf;
    for (size_t i = begin; i < end; ++i) {
        top = std::max(top, x[i]);
    }
    if (std::isinf(top)) {
        return top;
    }
    double sum = 0.0;
    for (size_t i = begin; i < end; ++i) {
        sum += std::exp(double(x[i] - top));
    }
    return float(std::log(sum)) + top;
}

} // namespace

WhisperLogitFilters::WhisperLogitFilters(const WhisperVocab & vocab, const WhisperDecodeOptions & options, int sample_begin)
    : v_(vocab), o_(options), sample_begin_(sample_begin) {
    if (o_.suppress_non_speech) {
        suppress_ = v_.non_speech_tokens;
    }
    suppress_.insert(suppress_.end(), {v_.transcribe, v_.translate, v_.sot, v_.sot_prev, v_.sot_lm, v_.no_speech});
    std::sort(suppress_.begin(), suppress_.end());
    suppress_.erase(std::unique(suppress_.begin(), suppress_.end()), suppress_.end());
}

void WhisperLogitFilters::apply(std::vector<float> & logits, const std::vector<int32_t> & tokens) const {
    const bool at_begin = int(tokens.size()) == sample_begin_;
    if (o_.suppress_blank && at_begin) {
        for (int32_t id : v_.blank_tokens) {
            logits[size_t(id)] = kNegInf;
        }
        logits[size_t(v_.eot)] = kNegInf;
    }
    for (int32_t id : suppress_) {
        logits[size_t(id)] = kNegInf;
    }
    if (!o_.timestamps) {
        return;
    }
    // ApplyTimestampRules.
    const int32_t ts0 = v_.timestamp_begin, n = int32_t(logits.size());
    logits[size_t(v_.no_timestamps)] = kNegInf;
    const size_t sampled = tokens.size() - size_t(sample_begin_);
    const bool last_was_timestamp = sampled >= 1 && tokens.back() >= ts0;
    const bool penultimate_was_timestamp = sampled < 2 || tokens[tokens.size() - 2] >= ts0;
    if (last_was_timestamp) {
        if (penultimate_was_timestamp) { // timestamps come in pairs: this one has to be text
            mask(logits, ts0, n);
        } else { // a closing timestamp: no text after it (EOT and timestamps stay)
            mask(logits, 0, v_.eot);
        }
    }
    int32_t last_timestamp = -1;
    for (size_t i = size_t(sample_begin_); i < tokens.size(); ++i) {
        if (tokens[i] >= ts0) {
            last_timestamp = tokens[i];
        }
    }
    if (last_timestamp >= 0) { // timestamps do not decrease, and a segment has a nonzero length
        const int32_t upto = last_was_timestamp && !penultimate_was_timestamp ? last_timestamp : last_timestamp + 1;
        mask(logits, ts0, upto);
    }
    if (at_begin) {
        mask(logits, 0, ts0);
        if (o_.max_initial_timestamp_index >= 0) {
            mask(logits, ts0 + o_.max_initial_timestamp_index + 1, n);
        }
    }
    // A timestamp is sampled when the timestamps' total probability beats every other token's.
    const std::vector<float> lp = log_softmax(logits);
    const float ts_logprob = logsumexp(lp, size_t(ts0), lp.size());
    const float max_text = *std::max_element(lp.begin(), lp.begin() + ts0);
    if (ts_logprob > max_text) {
        mask(logits, 0, ts0);
    }
}

int32_t whisper_detect_language(const std::vector<float> & sot_logits, const WhisperVocab & vocab, std::vector<float> * probs) {
    std::vector<float> masked(sot_logits.size(), kNegInf);
    for (int32_t id : vocab.language_tokens) {
        masked[size_t(id)] = sot_logits[size_t(id)];
    }
    if (probs) {
        probs->clear();
        for (int32_t id : vocab.language_tokens) {
            probs->push_back(softmax_at(masked.data(), int(masked.size()), id));
        }
    }
    return argmax(masked);
}

namespace {

// MaximumLikelihoodRanker's score of a sequence of LENGTH tokens with summed log-probability SUM.
double rank_score(float sum, size_t length, float length_penalty) {
    const double penalty = length_penalty < 0 ? double(length) : std::pow((5.0 + double(length)) / 6.0, double(length_penalty));
    return double(sum) / penalty;
}

// GreedyDecoder: argmax at temperature 0, else a draw from softmax(logits / temperature); best_of
// sequences (temperature > 0) sampled side by side, the best by sum / length (MaximumLikelihoodRanker).
WhisperDecodeResult sample(StepDecoder & decoder, const std::vector<int> & all_seqs, const std::vector<float> & first_logits,
                           const std::vector<int32_t> & initial, const WhisperVocab & v, const WhisperDecodeOptions & o,
                           const WhisperLogitFilters & filters, const std::function<void()> & between_steps,
                           const std::function<void(int32_t)> & on_token, std::vector<std::vector<float>> * raw_step_logits) {
    const bool greedy = o.temperature <= 0.0f;
    const int  n      = greedy ? 1 : std::max(1, o.best_of);
    if (int(all_seqs.size()) < n) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "best_of %d needs %d decoder sequences, the session has %zu", n, n, all_seqs.size());
    }
    const std::vector<int> seqs(all_seqs.begin(), all_seqs.begin() + n);
    if (n > 1) {
        decoder.reorder(seqs, std::vector<int>(size_t(n), 0)); // every sample starts from the prompt's rows
    }
    std::vector<std::vector<int32_t>> tokens(size_t(n), initial);
    std::vector<std::vector<float>>   logits(size_t(n), first_logits);
    std::vector<float> sums(size_t(n), 0.0f);
    std::vector<bool>  done(size_t(n), false);
    WhisperDecodeResult r;
    std::vector<int32_t> next, feed;
    std::vector<int>     running;
    std::vector<std::vector<float>> step_logits;
    std::vector<double> probs;
    for (int i = 0; i < o.sample_len; ++i) {
        running.clear();
        feed.clear();
        for (int j = 0; j < n; ++j) {
            if (done[size_t(j)]) {
                continue;
            }
            std::vector<float> & l = logits[size_t(j)];
            if (raw_step_logits && n == 1) {
                raw_step_logits->push_back(l);
            }
            filters.apply(l, tokens[size_t(j)]);
            int32_t tok = 0;
            if (greedy) {
                tok = argmax(l);
            } else { // Categorical(logits / temperature).sample(), from the session's seeded generator
                const float top = *std::max_element(l.begin(), l.end());
                probs.assign(l.size(), 0.0);
                double total = 0.0;
                for (size_t k = 0; k < l.size(); ++k) {
                    total += probs[k] = std::exp(double(l[k] - top) / double(o.temperature));
                }
                double u = std::uniform_real_distribution<double>(0.0, total)(*o.rng);
                tok = int32_t(l.size()) - 1;
                for (size_t k = 0; k < l.size(); ++k) {
                    if (probs[k] > 0.0 && (u -= probs[k]) < 0.0) {
                        tok = int32_t(k);
                        break;
                    }
                }
            }
            sums[size_t(j)] += log_softmax_at(l, tok);
            tokens[size_t(j)].push_back(tok);
            if (tok == v.eot) {
                done[size_t(j)] = true;
                continue;
            }
            if (on_token && n == 1) {
                on_token(tok);
            }
            running.push_back(seqs[size_t(j)]);
            feed.push_back(tok);
        }
        if (running.empty() || int(tokens[0].size()) > o.n_ctx || i + 1 == o.sample_len) {
            break;
        }
        between_steps();
        decoder.step(running, feed, next, &step_logits);
        ++r.n_steps;
        for (size_t b = 0; b < running.size(); ++b) {
            logits[size_t(std::find(seqs.begin(), seqs.end(), running[b]) - seqs.begin())] = std::move(step_logits[b]);
        }
    }
    double best_score = 0.0;
    for (int j = 0; j < n; ++j) {
        const auto & t = tokens[size_t(j)];
        const auto end = std::find(t.begin() + long(initial.size()), t.end(), v.eot);
        std::vector<int32_t> toks(t.begin() + long(initial.size()), end);
        const double score = rank_score(sums[size_t(j)], toks.size(), o.length_penalty);
        if (j == 0 || score > best_score) { // the first of equals, as np.argmax
            best_score    = score;
            r.tokens      = std::move(toks);
            r.sum_logprob = sums[size_t(j)];
        }
    }
    return r;
}


WhisperDecodeResult beam(StepDecoder & decoder, const std::vector<int> & all_seqs, std::vector<float> first_logits,
                         const std::vector<int32_t> & initial, const WhisperVocab & v, const WhisperDecodeOptions & o,
                         const WhisperLogitFilters & filters, const std::function<void()> & between_steps) {
    const int K = o.beam_size;
    if (int(all_seqs.size()) < K) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "beam search over %d beams needs %d decoder sequences, the session has %zu", K, K,
             all_seqs.size());
    }
    const size_t max_candidates = size_t(std::lround(double(K) * double(o.patience)));
    if (max_candidates == 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "invalid beam size (%d) or patience (%g)", K, double(o.patience));
    }
    const std::vector<int> seqs(all_seqs.begin(), all_seqs.begin() + K);
    // Every beam starts as the prompt (the same cache rows).
    decoder.reorder(seqs, std::vector<int>(size_t(K), 0));
    std::vector<std::vector<int32_t>> beams(size_t(K), initial);
    std::vector<float> sums(size_t(K), 0.0f);
    std::vector<std::vector<float>> logits(size_t(K), first_logits);
    // Finished sequences in the order whisper's dict holds them.
    std::vector<std::pair<std::vector<int32_t>, float>> finished;
    auto find = [](auto & list, const std::vector<int32_t> & key) {
        return std::find_if(list.begin(), list.end(), [&](const auto & e) { return e.first == key; });
    };
    WhisperDecodeResult r;
    std::vector<int32_t> next;
    for (int i = 0; i < o.sample_len; ++i) {
        // Every beam's beam_size + 1 best continuations, keyed by the whole sequence (insertion order
        // kept: sorted() is stable); a later equal sequence overwrites the score and source.
        std::vector<std::pair<std::vector<int32_t>, float>> scores;
        std::vector<int> sources;
        for (int j = 0; j < K; ++j) {
            filters.apply(logits[size_t(j)], beams[size_t(j)]);
            const std::vector<float> lp = log_softmax(logits[size_t(j)]);
            std::vector<int32_t> order(lp.size());
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + K + 1, order.end(),
                              [&](int32_t a, int32_t b) { return lp[size_t(a)] > lp[size_t(b)] || (lp[size_t(a)] == lp[size_t(b)] && a < b); });
            for (int k = 0; k <= K; ++k) {
                std::vector<int32_t> seq = beams[size_t(j)];
                seq.push_back(order[size_t(k)]);
                const float score = sums[size_t(j)] + lp[size_t(order[size_t(k)])];
                auto it = find(scores, seq);
                if (it != scores.end()) {
                    it->second = score;
                    sources[size_t(it - scores.begin())] = j;
                } else {
                    scores.emplace_back(std::move(seq), score);
                    sources.push_back(j);
                }
            }
        }
        std::vector<size_t> ranked(scores.size());
        std::iota(ranked.begin(), ranked.end(), 0);
        std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) { return scores[a].second > scores[b].second; });
        std::vector<std::vector<int32_t>> new_beams;
        std::vector<float> new_sums;
        std::vector<int> new_sources;
        std::vector<std::pair<std::vector<int32_t>, float>> newly_finished;
        for (size_t at : ranked) {
            if (scores[at].first.back() == v.eot) {
                newly_finished.push_back(scores[at]);
                continue;
            }
            new_beams.push_back(scores[at].first);
            new_sums.push_back(scores[at].second);
            new_sources.push_back(sources[at]);
            if (int(new_beams.size()) == K) {
                break;
            }
        }
        for (const auto & f : newly_finished) { // already in score order
            if (finished.size() >= max_candidates) {
                break;
            }
            auto it = find(finished, f.first);
            if (it != finished.end()) {
                it->second = f.second;
            } else {
                finished.push_back(f);
            }
        }
        const bool complete = finished.size() >= max_candidates;
        const bool too_long = int(new_beams[0].size()) > o.n_ctx;
        beams = std::move(new_beams);
        sums  = std::move(new_sums);
        if (complete || too_long || i + 1 == o.sample_len) {
            break;
        }
        between_steps();
        decoder.reorder(seqs, new_sources);
        std::vector<int32_t> last(static_cast<size_t>(K));
        for (int j = 0; j < K; ++j) {
            last[size_t(j)] = beams[size_t(j)].back();
        }
        decoder.step(seqs, last, next, &logits);
        ++r.n_steps;
    }
    // finalize: not enough finished, the unfinished beams by their sums (descending) with EOT appended.
    if (finished.size() < size_t(K)) {
        std::vector<size_t> order(beams.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sums[a] > sums[b]; });
        for (size_t j : order) {
            std::vector<int32_t> seq = beams[j];
            seq.push_back(v.eot);
            auto it = find(finished, seq);
            if (it != finished.end()) {
                it->second = sums[j];
            } else {
                finished.emplace_back(std::move(seq), sums[j]);
            }
            if (finished.size() >= size_t(K)) {
                break;
            }
        }
    }
    double best_score = -std::numeric_limits<double>::infinity();
    for (const auto & f : finished) {
        const auto end = std::find(f.first.begin() + long(initial.size()), f.first.end(), v.eot);
        std::vector<int32_t> toks(f.first.begin() + long(initial.size()), end);
        const double score = rank_score(f.second, toks.size(), o.length_penalty);
        if (r.candidates.empty() || score > best_score) { // the first of equals, as np.argmax
            best_score    = score;
            r.tokens      = toks;
            r.sum_logprob = f.second;
        }
        r.candidates.push_back(std::move(toks));
        r.candidate_sums.push_back(f.second);
    }
    return r;
}

} // namespace

WhisperDecodeResult whisper_decode(StepDecoder & decoder, const std::vector<int> & seqs, std::vector<float> first_logits,
                                   const std::vector<int32_t> & initial, const WhisperVocab & vocab,
                                   const WhisperDecodeOptions & options, const std::function<void()> & between_steps,
                                   const std::function<void(int32_t)> & on_token,
                                   std::vector<std::vector<float>> * raw_step_logits) {
    const WhisperLogitFilters filters(vocab, options, int(initial.size()));
    if (options.temperature > 0.0f && !options.rng) {
        fail(TRANSCRIBE_ERR_INTERNAL, "sampling at temperature %g without a generator", double(options.temperature));
    }
    WhisperDecodeResult r = options.beam_size > 0 && options.temperature <= 0.0f
                                ? beam(decoder, seqs, std::move(first_logits), initial, vocab, options, filters, between_steps)
                                : sample(decoder, seqs, first_logits, initial, vocab, options, filters, between_steps, on_token,
                                         raw_step_logits);
    r.avg_logprob = double(r.sum_logprob) / double(r.tokens.size() + 1);
    return r;
}

} // namespace transcribe
