// What a session does for families that do not decode several recordings together.
#include "core/error.h"
#include "model/family.h"

namespace transcribe {

void add_timings(Timings & total, const Timings & t) {
    total.mel_ms += t.mel_ms;
    total.encode_ms += t.encode_ms;
    total.prefill_ms += t.prefill_ms;
    total.decode_ms += t.decode_ms;
    total.vad_ms += t.vad_ms;
    total.n_prefill_tokens += t.n_prefill_tokens;
    total.n_decode_tokens += t.n_decode_tokens;
    total.draft_ms += t.draft_ms;
    total.diarize_ms += t.diarize_ms;
    total.n_decode_steps += t.n_decode_steps;
    total.n_drafted += t.n_drafted;
    total.n_accepted += t.n_accepted;
    total.n_verify_steps += t.n_verify_steps;
}

std::unique_ptr<NativeStream> Session::open_stream(const RunOptions &) {
    fail(TRANSCRIBE_ERR_INVALID_ARG, "this model does not transcribe as it hears (only cache-aware streaming models "
         "do): stream it with turns found by a VAD instead");
}

std::vector<Word> Session::align_text(const float *, size_t, const std::string &, const std::string &, const RunOptions &) {
    fail(TRANSCRIBE_ERR_INVALID_ARG, "this model does not align a given text (only forced aligners do: Qwen3-ForcedAligner)");
}

void Session::run_batch(const JobSource & next, const JobDone & done) {
    Timings  total;
    BatchJob job;
    for (size_t id = 0; next(job); ++id, job = BatchJob {}) {
        try {
            Transcript t = run(job.pcm, job.n_samples, job.options);
            add_timings(total, timings_);
            done(id, &t, nullptr);
        } catch (const Error & e) {
            if (e.status() == TRANSCRIBE_ERR_ABORTED && !(job.options.cancelled && job.options.cancelled())) {
                throw; // the session's abort: everything stops
            }
            add_timings(total, timings_);
            done(id, nullptr, std::current_exception());
        }
    }
    timings_ = total;
}

} // namespace transcribe
