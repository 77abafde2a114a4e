// The decode loop every token-by-token decoder shares (an LLM's, a Transformer decoder's): jobs take
// the decoder's sequences as they free up, each step feeds every running job its next token (and, with
// a draft, the draft's next tokens to check), and a job leaves when it ends (end of generation, its
// budget, its own cancel) while the others go on. Decoding is greedy; a draft (RunOptions::draft)
// changes how many tokens a step yields, not which. A job that asks for beam search (RunOptions::
// beam_size, families that offer it) waits until beam_size sequences are free and is then decoded to
// its end alone (decoding/beam_search). A family supplies the prompt (start) and the text (finish).
#pragma once

#include "blocks/step_decoder.h"
#include "model/session_base.h"
#include "decoding/draft_follower.h"

#include <memory>

namespace transcribe {

// A job holding one of the decoder's sequences.
struct DecodeJob {
    size_t             id  = 0;
    int                seq = 0;
    BatchJob           job;
    Transcript         out;
    int32_t            tok = 0;     // the greedy (or forced) next token, not yet taken
    int                max_new = 0; // the job's token budget
    std::vector<float> logits;      // that produced tok, when the job collects them
    bool               keep_logits = false;          // the family keeps every step's logits (parity dumps)
    std::vector<std::vector<float>> kept_logits;     // then: those of each token taken, and of the last decision
    bool               cancelled = false;
    std::unique_ptr<DraftFollower> draft;    // speculative decoding: the draft checked after tok
    std::vector<int32_t>           proposed; // this step's draft tokens, fed after tok
    size_t                         column = 0; // where tok is in this step's columns
};

class ContinuousBatchingSession : public SessionBase {
public:
    // The sequences a decoder of BYTES_PER_SEQUENCE a sequence decodes together: SessionOptions::n_batch,
    // or as many as an eighth of the memory free now holds (at most 8, where batching stops paying on a
    // CPU: bench/RESULTS.md), at least one.
    static int sequences_for(const SessionOptions & options, size_t bytes_per_sequence);

    // One job through run_batch.
    Transcript run(const float * pcm, size_t n_samples, const RunOptions & options) override;
    void       run_batch(const JobSource & next, const JobDone & done) override;
    int        max_batch() const override { return decoder_.n_seq(); }

protected:
    ContinuousBatchingSession(ggml_backend_dev_t device, const SessionOptions & options, StepDecoder & decoder,
                              int32_t end_token)
        : SessionBase(device, options), decoder_(decoder), end_tokens_ {end_token} {}
    // Another token that ends generation (Qwen3-ASR's generate() stops at either of two).
    void add_end_token(int32_t token) { end_tokens_.push_back(token); }

    // The job's checks and prompt into its sequence (encoder, prefill): sets job.max_new and job.tok, the
    // first token (job.logits too when the job collects them), timing the stages into timings_.
    virtual void start(DecodeJob & job) = 0;
    // The transcript's text and segments from job.out.tokens.
    virtual void finish(DecodeJob & job) = 0;
    // What beam search needs of the family for this job (start has set job.logits to the prompt's
    // last-position logits and job.max_new to the steps after it); beam_size 0: the family has none.
    struct BeamSetup {
        int     beam_size      = 0;
        int32_t eos            = 0, pad = 0;
        float   length_penalty = 0.0f;
        int     prompt_length  = 0;
    };
    virtual BeamSetup beam_setup(const DecodeJob &) const { return {}; }
    // Progress of a job's stage: jobs in a batch move out of step, so only what moves the bar forward is
    // reported (one job alone reports every stage).
    void report(const RunOptions & o, float f);

private:
    void start_job(DecodeJob & job);
    // A beam-search job from its start to its transcript, on sequences SEQS (job.seq first).
    void run_beam(DecodeJob & job, const std::vector<int> & seqs);
    bool take_token(DecodeJob & job); // false: the job is complete
    // The tokens this step's columns gave JOB (tok's successor, then each proposed token's): taken in
    // order while they agree with the draft; the cache rows of proposals not kept are dropped.
    bool take_step(DecodeJob & job, const std::vector<int32_t> & next, std::vector<std::vector<float>> * logits);

    StepDecoder & decoder_;
    std::vector<int32_t> end_tokens_;
    float         progress_high_ = -1.0f;
};

} // namespace transcribe
