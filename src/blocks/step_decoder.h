// What a KV-cached token decoder block offers the decoding strategies that drive it (src/decoding/):
// sequences in their own stretches of one cache, stepped together, each able to drop its last rows.
#pragma once

#include "core/backend.h"

#include <cstdint>
#include <vector>

namespace transcribe {

class StepDecoder {
public:
    virtual ~StepDecoder() = default;
    virtual int n_seq() const = 0;
    virtual int n_ctx() const = 0;
    virtual int n_past(int seq) const = 0;
    // One pass of the sequences SEQS together: TOKENS[i] is fed to sequence SEQS[i] at its next position
    // (a sequence listed n times takes n tokens at its next n positions, each attending to the ones
    // before it); NEXT[i] gets the greedy token after TOKENS[i] and, if LOGITS is given, (*LOGITS)[i]
    // its logits.
    virtual void step(const std::vector<int> & seqs, const std::vector<int32_t> & tokens, std::vector<int32_t> & next,
                      std::vector<std::vector<float>> * logits) = 0;
    // Forgets sequence SEQ's positions from N_PAST on (1 <= N_PAST <= n_past(SEQ)).
    virtual void rewind(int seq, int n_past) = 0;
    // Sequence SEQS[j] becomes what sequence SEQS[SOURCES[j]] was, all at once (beam search).
    virtual void reorder(const std::vector<int> & seqs, const std::vector<int> & sources) = 0;
};

// A step graph's results for B columns: its "argmax" output into NEXT and, if LOGITS is given, its
// "logits" rows (what every decoder's step() hands back).
inline void read_step_outputs(const Graph & g, size_t B, std::vector<int32_t> & next, std::vector<std::vector<float>> * logits) {
    next.resize(B);
    ggml_backend_tensor_get(g.get("argmax"), next.data(), 0, B * sizeof(int32_t));
    if (logits) {
        const ggml_tensor * lg = g.get("logits");
        const size_t vocab = size_t(lg->ne[0]);
        logits->resize(B);
        for (size_t b = 0; b < B; ++b) {
            (*logits)[b].resize(vocab);
            ggml_backend_tensor_get(lg, (*logits)[b].data(), b * lg->nb[1], vocab * sizeof(float));
        }
    }
}

} // namespace transcribe
