// The cache a token decoder keeps per layer: K and V rows of up to n_seq sequences, each in its own
// stretch of n_ctx rows of one tensor, and where each sequence has got to. It places a step's columns
// (positions, cache rows) and writes the additive mask a masked attention needs; shared by the
// decoders (Qwen3's self-attention, the Transformer decoder's self- and cross-attention).
#pragma once

#include "core/backend.h"

#include <cstdint>
#include <vector>

namespace transcribe {

class SequenceCache {
public:
    // WHAT names the cache in errors. Rows are cleared only as far as a masked attention reads them, so
    // rows never reached cost no memory on a CPU.
    SequenceCache(Executor & exec, int n_layers, int64_t row_width, ggml_type type, int n_ctx, int n_seq, const char * what);
    ~SequenceCache();
    SequenceCache(const SequenceCache &) = delete;
    SequenceCache & operator=(const SequenceCache &) = delete;

    const std::vector<ggml_tensor *> & k() const { return k_; }
    const std::vector<ggml_tensor *> & v() const { return v_; }
    int n_ctx() const { return n_ctx_; }
    int n_seq() const { return n_seq_; }
    int n_past(int seq) const { return n_past_[size_t(seq)]; }
    void check_seq(int seq) const;

    // Sequence SEQ starts again, with N rows about to be written from row 0 (a prompt).
    void restart(int seq, int n);
    // The caches' views of one sequence's stretch, as a cache of its own (a prompt's graph).
    std::vector<ggml_tensor *> stretch(ggml_context * ctx, const std::vector<ggml_tensor *> & caches, int seq) const;

    // A prompt of T positions of sequence SEQ (after restart): positions 0..T-1, each attending to the
    // ones before it; returns the rows a masked attention reads, as place_append does.
    int place_prompt(int seq, int T, int pad);
    // A step's columns: SEQS[i] takes its next position (a sequence listed n times takes its next n,
    // each attending to the ones before it). Fills pos() and rows() and returns the rows a masked
    // attention reads (up to the last one written, padded to a multiple of PAD, at most all).
    int place_append(const std::vector<int> & seqs, int pad) { return place(seqs, pad, true); }
    // Columns that each read all of their sequence's rows and write none (cross-attention).
    int place_read(const std::vector<int> & seqs, int pad) { return place(seqs, pad, false); }
    // The additive mask [n_kv, columns] of the last placement: column b sees rows[b] - pos[b] ..
    // rows[b]. Writes nothing where the graph left the mask unallocated (no op reads it).
    void set_mask(ggml_tensor * mask, int n_kv);
    const std::vector<int32_t> & pos() const { return pos_; }
    const std::vector<int64_t> & rows() const { return rows_; }

    // After a step: each column's sequence has one row more.
    void advance(const std::vector<int> & seqs);
    void set_past(int seq, int n_past) { n_past_[size_t(seq)] = n_past; }
    // Forgets SEQ's rows from N_PAST on (1 <= N_PAST <= n_past(SEQ)).
    void rewind(int seq, int n_past);
    // Sequence SEQS[j] becomes what sequence SEQS[SOURCES[j]] was (rows and length), all at once: beam
    // search's reordering.
    void gather(const std::vector<int> & seqs, const std::vector<int> & sources);

private:
    // Zeroes the rows below END not zeroed yet: rows a masked attention reads must not hold NaNs (0 * NaN =
    // NaN) even where the mask closes them. Rows below the mark are zero or were written since (finite);
    // every write (a prompt, a step, a gather) clears up to its rows first, so none lands above the mark.
    void clear_rows(int64_t end);
    int  place(const std::vector<int> & seqs, int pad, bool append);
    // The last placed row, padded; the rows up to it cleared where PAD says a masked attention reads them
    // (PAD below the whole cache: ggml's flash attention; our kernels read only the rows written).
    int  rows_read(int pad);

    int                        n_ctx_, n_seq_;
    std::vector<int>           n_past_;
    int64_t                    cleared_rows_ = 0;
    ggml_context *             ctx_ = nullptr;
    ggml_backend_buffer_t      buf_ = nullptr;
    std::vector<ggml_tensor *> k_, v_;
    // Step inputs, reused: nothing is allocated per token once their sizes are reached.
    std::vector<int32_t>     pos_;
    std::vector<int64_t>     rows_;
    std::vector<ggml_fp16_t> mask_;
    std::vector<std::vector<uint8_t>> gather_bufs_;
};

} // namespace transcribe
