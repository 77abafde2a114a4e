#include "continuous_batching.h"

#include "core/system_memory.h"
#include "decoding/beam_search.h"

#include <algorithm>

namespace transcribe {

int ContinuousBatchingSession::sequences_for(const SessionOptions & options, size_t bytes_per_sequence) {
    if (options.n_batch > 0) {
        return options.n_batch;
    }
    const size_t budget = available_memory_bytes() / 8;
    return int(std::clamp<size_t>(budget / std::max<size_t>(bytes_per_sequence, 1), 1, 8));
}

Transcript ContinuousBatchingSession::run(const float * pcm, size_t n_samples, const RunOptions & options) {
    bool given = false;
    std::exception_ptr error;
    Transcript result;
    run_batch(
        [&](BatchJob & job) {
            if (given) {
                return false;
            }
            job   = BatchJob {pcm, n_samples, options};
            given = true;
            return true;
        },
        [&](size_t, Transcript * t, std::exception_ptr e) {
            if (t) {
                result = std::move(*t);
            }
            error = e;
        });
    if (error) {
        std::rethrow_exception(error);
    }
    return result;
}

// The family's start, then the job's draft (speculative decoding), made once the prompt is in.
void ContinuousBatchingSession::start_job(DecodeJob & a) {
    start(a);
    const RunOptions & o = a.job.options;
    if (o.draft && !o.force_tokens) {
        StageTimer draft_timer;
        a.draft = std::make_unique<DraftFollower>(o.draft(a.job.pcm, a.job.n_samples));
        timings_.draft_ms += draft_timer.ms();
        check_abort("draft");
        check_cancelled(o, "draft");
    }
}

bool ContinuousBatchingSession::take_token(DecodeJob & a) {
    const RunOptions & o = a.job.options;
    const size_t k = a.out.tokens.size();
    if (o.step_logits) {
        o.step_logits->push_back(a.logits);
    }
    if (a.keep_logits) {
        a.kept_logits.push_back(a.logits);
    }
    if (o.force_tokens && k < o.force_tokens->size()) {
        a.tok = (*o.force_tokens)[k];
    }
    if (std::find(end_tokens_.begin(), end_tokens_.end(), a.tok) != end_tokens_.end() && !o.ignore_eos) {
        return false;
    }
    if (int(k) == a.max_new) {
        a.out.truncated = !o.ignore_eos; // the budget ran out before the end-of-generation token
        return false;
    }
    a.out.tokens.push_back(a.tok);
    if (a.draft) {
        a.draft->observe(a.out.tokens);
    }
    if (o.on_token) {
        o.on_token(a.tok);
    }
    check_abort("decode");
    if (o.cancelled && o.cancelled()) {
        a.cancelled = true;
        return false;
    }
    report(o, 0.5f + 0.5f * float(k + 1) / float(a.max_new));
    return !(o.ignore_eos && int(k + 1) == a.max_new);
}

bool ContinuousBatchingSession::take_step(DecodeJob & a, const std::vector<int32_t> & next, std::vector<std::vector<float>> * logits) {
    const int n_fed = 1 + int(a.proposed.size());
    const int first = decoder_.n_past(a.seq) - n_fed; // the cache length before this step
    int kept = 0;
    bool more = true;
    for (;; ++kept) {
        a.tok = next[a.column + size_t(kept)];
        if (logits) {
            a.logits.swap((*logits)[a.column + size_t(kept)]);
        }
        more = take_token(a);
        // A proposal equal to the decoder's own choice was fed where that choice goes: the next column
        // is then the decoder's token after it.
        if (!more || size_t(kept) >= a.proposed.size() || a.tok != a.proposed[size_t(kept)]) {
            break;
        }
    }
    timings_.n_decode_tokens += kept + 1;
    if (!a.proposed.empty()) {
        timings_.n_drafted += int(a.proposed.size());
        timings_.n_accepted += kept;
        ++timings_.n_verify_steps;
    }
    if (more && kept + 1 < n_fed) {
        decoder_.rewind(a.seq, first + 1 + kept);
    }
    return more;
}

void ContinuousBatchingSession::run_beam(DecodeJob & a, const std::vector<int> & seqs) {
    start(a);
    const RunOptions & o = a.job.options;
    const BeamSetup    b = beam_setup(a);
    if (b.beam_size < 1) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "this model has no beam search");
    }
    BeamSearchConfig c;
    c.beam_size      = b.beam_size;
    c.max_steps      = a.max_new;
    c.length_penalty = b.length_penalty;
    c.eos            = b.eos;
    c.pad            = b.pad;
    c.prompt_length  = b.prompt_length;
    StageTimer timer;
    int step = 0;
    const BeamSearchResult r = beam_search(decoder_, seqs, a.logits, c, [&] {
        check_abort("decode");
        check_cancelled(o, "decode");
        report(o, 0.5f + 0.5f * float(step++) / float(std::max(a.max_new, 1)));
    });
    timings_.decode_ms += timer.ms();
    timings_.n_decode_steps += r.n_steps;
    timings_.n_decode_tokens += r.n_steps * b.beam_size;
    a.out.tokens    = r.hypotheses[r.best].tokens;
    a.out.truncated = !r.finished && !a.out.tokens.empty() && a.out.tokens.back() != b.eos && a.out.tokens.back() != b.pad;
    if (o.on_token) {
        // The hypothesis is padded past its end (NeMo's layout): the text ends at the first EOS or pad.
        for (int32_t t : a.out.tokens) {
            if (t == b.eos || t == b.pad) {
                break;
            }
            o.on_token(t);
        }
    }
}

void ContinuousBatchingSession::report(const RunOptions & o, float f) {
    const float at = o.progress_offset + o.progress_scale * f;
    if (at >= progress_high_) {
        progress_high_ = at;
        progress(o, f);
    }
}

void ContinuousBatchingSession::run_batch(const JobSource & next, const JobDone & done) {
    timings_       = Timings {};
    progress_high_ = -1.0f;
    std::vector<DecodeJob> active;
    active.reserve(size_t(decoder_.n_seq()));
    std::vector<int> free_seqs; // the lowest first: a masked attention reads up to the last stretch in use
    for (int s = decoder_.n_seq() - 1; s >= 0; --s) {
        free_seqs.push_back(s);
    }
    std::vector<int>                seqs;
    std::vector<int32_t>            tokens, next_tokens;
    std::vector<std::vector<float>> step_logits;
    size_t n_jobs = 0;
    std::unique_ptr<DecodeJob> waiting; // taken from NEXT, not started: a beam job waiting for free sequences
    // Hands a job that took its last token (or failed) to DONE and frees its sequence.
    auto end_job = [&](DecodeJob & a, std::exception_ptr error) {
        free_seqs.push_back(a.seq);
        if (!error && a.cancelled) {
            error = std::make_exception_ptr(Error(TRANSCRIBE_ERR_ABORTED, "run cancelled by the caller (decode)"));
        }
        if (error) {
            done(a.id, nullptr, error);
        } else {
            finish(a);
            report(a.job.options, 1.0f);
            done(a.id, &a.out, nullptr);
        }
    };
    for (;;) {
        // New jobs join between steps while there are free sequences; a beam job waits for its beams'.
        while (!free_seqs.empty()) {
            if (!waiting) {
                BatchJob job;
                if (!next(job)) {
                    break;
                }
                waiting = std::make_unique<DecodeJob>();
                waiting->id  = n_jobs++;
                waiting->job = std::move(job);
            }
            const int need = std::max(1, waiting->job.options.beam_size);
            if (need > decoder_.n_seq()) {
                done(waiting->id, nullptr,
                     std::make_exception_ptr(Error(TRANSCRIBE_ERR_INVALID_ARG, "beam size " + std::to_string(need) +
                                                   " exceeds the " + std::to_string(decoder_.n_seq()) + " this session decodes")));
                waiting.reset();
                continue;
            }
            if (int(free_seqs.size()) < need) {
                break; // the running jobs free sequences as they end
            }
            DecodeJob a = std::move(*waiting);
            waiting.reset();
            a.seq = free_seqs.back();
            free_seqs.pop_back();
            if (a.job.options.beam_size > 0) {
                std::vector<int> beams = {a.seq};
                while (int(beams.size()) < need) {
                    beams.push_back(free_seqs.back());
                    free_seqs.pop_back();
                }
                std::exception_ptr error;
                try {
                    run_beam(a, beams);
                } catch (const Error & e) {
                    if (e.status() == TRANSCRIBE_ERR_ABORTED && !(a.job.options.cancelled && a.job.options.cancelled())) {
                        throw; // the session's abort: everything stops
                    }
                    error = std::current_exception();
                }
                free_seqs.insert(free_seqs.end(), beams.rbegin(), beams.rend() - 1);
                end_job(a, error);
                continue;
            }
            try {
                start_job(a);
            } catch (const Error & e) {
                if (e.status() == TRANSCRIBE_ERR_ABORTED && !(a.job.options.cancelled && a.job.options.cancelled())) {
                    throw; // the session's abort: everything stops
                }
                end_job(a, std::current_exception());
                continue;
            }
            if (take_token(a)) {
                active.push_back(std::move(a));
            } else {
                end_job(a, nullptr);
            }
        }
        if (active.empty()) {
            return;
        }

        StageTimer step_timer;
        seqs.clear();
        tokens.clear();
        bool want_logits = false;
        for (DecodeJob & a : active) {
            a.column = seqs.size();
            seqs.push_back(a.seq);
            tokens.push_back(a.tok);
            want_logits = want_logits || a.job.options.step_logits || a.keep_logits;
            a.proposed.clear();
            if (a.draft) {
                // Every proposal kept adds a token, and the step's last column decides one more.
                const int budget = a.max_new - int(a.out.tokens.size()) - 1;
                const int room   = decoder_.n_ctx() - decoder_.n_past(a.seq) - 1;
                a.proposed = a.draft->propose(std::min(budget, room));
                seqs.insert(seqs.end(), a.proposed.size(), a.seq);
                tokens.insert(tokens.end(), a.proposed.begin(), a.proposed.end());
            }
        }
        decoder_.step(seqs, tokens, next_tokens, want_logits ? &step_logits : nullptr);
        ++timings_.n_decode_steps;
        for (size_t i = 0; i < active.size();) {
            if (take_step(active[i], next_tokens, want_logits ? &step_logits : nullptr)) {
                ++i;
                continue;
            }
            end_job(active[i], nullptr);
            active.erase(active.begin() + std::ptrdiff_t(i));
        }
        timings_.decode_ms += step_timer.ms();
    }
}

} // namespace transcribe
