#include "sequence_cache.h"

#include "core/error.h"

#include "ggml-alloc.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {
const ggml_fp16_t kMaskOpen   = ggml_fp32_to_fp16(0.0f);
const ggml_fp16_t kMaskClosed = ggml_fp32_to_fp16(-INFINITY);
} // namespace

SequenceCache::SequenceCache(Executor & exec, int n_layers, int64_t row_width, ggml_type type, int n_ctx, int n_seq,
                             const char * what)
    : n_ctx_(n_ctx), n_seq_(n_seq), n_past_(size_t(std::max(n_seq, 0)), 0) {
    if (n_seq < 1 || n_ctx < 1) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "a %s needs at least one sequence of one position (%d x %d)", what, n_seq, n_ctx);
    }
    ggml_init_params params = {ggml_tensor_overhead() * size_t(2 * n_layers + 2), nullptr, true};
    ctx_ = ggml_init(params);
    const int64_t rows = int64_t(n_ctx) * n_seq;
    for (int i = 0; i < n_layers; ++i) {
        k_.push_back(ggml_new_tensor_2d(ctx_, type, row_width, rows));
        v_.push_back(ggml_new_tensor_2d(ctx_, type, row_width, rows));
    }
    buf_ = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, exec.buffer_type());
    if (!buf_) {
        ggml_free(ctx_); // a throwing constructor runs no destructor
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate the %s (%d sequences of %d positions)", what, n_seq, n_ctx);
    }
}

SequenceCache::~SequenceCache() {
    if (buf_) {
        ggml_backend_buffer_free(buf_);
    }
    if (ctx_) {
        ggml_free(ctx_);
    }
}

void SequenceCache::check_seq(int seq) const {
    if (seq < 0 || seq >= n_seq_) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "sequence %d of a decoder for %d", seq, n_seq_);
    }
}

void SequenceCache::clear_rows(int64_t end) {
    end = std::min<int64_t>(end, int64_t(n_ctx_) * n_seq_);
    if (end <= cleared_rows_) {
        return;
    }
    for (std::vector<ggml_tensor *> * cache : {&k_, &v_}) {
        for (ggml_tensor * t : *cache) {
            ggml_backend_tensor_memset(t, 0, size_t(cleared_rows_) * t->nb[1], size_t(end - cleared_rows_) * t->nb[1]);
        }
    }
    cleared_rows_ = end;
}

void SequenceCache::restart(int seq, int n) {
    check_seq(seq);
    if (n <= 0 || n > n_ctx_) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "prompt of %d positions does not fit the context of %d", n, n_ctx_);
    }
    clear_rows(int64_t(seq) * n_ctx_ + n); // before the prompt writes its rows: the mark stays above every row written
    n_past_[size_t(seq)] = 0;
}

std::vector<ggml_tensor *> SequenceCache::stretch(ggml_context * ctx, const std::vector<ggml_tensor *> & caches, int seq) const {
    std::vector<ggml_tensor *> views;
    for (ggml_tensor * t : caches) {
        views.push_back(ggml_view_2d(ctx, t, t->ne[0], n_ctx_, t->nb[1], size_t(seq) * size_t(n_ctx_) * t->nb[1]));
    }
    return views;
}

int SequenceCache::place(const std::vector<int> & seqs, int pad, bool append) {
    const size_t B = seqs.size();
    pos_.resize(B);
    rows_.resize(B);
    for (size_t b = 0; b < B; ++b) {
        const int seq = seqs[b];
        check_seq(seq);
        if (n_past_[size_t(seq)] == 0) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "sequence %d used before its prompt", seq);
        }
        int earlier = 0; // this sequence's columns before this one: its positions follow theirs
        for (size_t c = 0; append && c < b; ++c) {
            earlier += seqs[c] == seq;
        }
        pos_[b] = append ? n_past_[size_t(seq)] + earlier : n_past_[size_t(seq)] - 1;
        if (pos_[b] >= n_ctx_) {
            fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "context of %d positions is full", n_ctx_);
        }
        rows_[b] = int64_t(seq) * n_ctx_ + pos_[b];
        if (append) {
            clear_rows((rows_[b] / 256 + 1) * 256); // before the step writes the row (a block at a time)
        }
    }
    return rows_read(pad);
}

int SequenceCache::place_prompt(int seq, int T, int pad) {
    check_seq(seq);
    pos_.resize(size_t(T));
    rows_.resize(size_t(T));
    for (int i = 0; i < T; ++i) {
        pos_[size_t(i)]  = i;
        rows_[size_t(i)] = int64_t(seq) * n_ctx_ + i;
    }
    return rows_read(pad);
}

int SequenceCache::rows_read(int pad) {
    const int64_t last_row = rows_.empty() ? 0 : *std::max_element(rows_.begin(), rows_.end());
    const int     n_kv     = std::min(n_ctx_ * n_seq_, int(last_row / pad + 1) * pad);
    if (pad < n_ctx_ * n_seq_) {
        clear_rows(n_kv);
    }
    return n_kv;
}

void SequenceCache::set_mask(ggml_tensor * mask, int n_kv) {
    if (!mask->buffer) {
        return;
    }
    const size_t B = pos_.size();
    mask_.resize(size_t(n_kv) * B);
    for (size_t b = 0; b < B; ++b) {
        const int64_t first = rows_[b] - pos_[b];
        for (int j = 0; j < n_kv; ++j) {
            mask_[b * size_t(n_kv) + size_t(j)] = j >= first && j <= rows_[b] ? kMaskOpen : kMaskClosed;
        }
    }
    tensor_set(mask, mask_);
}

void SequenceCache::advance(const std::vector<int> & seqs) {
    for (int seq : seqs) {
        ++n_past_[size_t(seq)];
    }
}

void SequenceCache::rewind(int seq, int n_past) {
    check_seq(seq);
    if (n_past < 1 || n_past > n_past_[size_t(seq)]) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "sequence %d rewound to %d of its %d positions", seq, n_past, n_past_[size_t(seq)]);
    }
    n_past_[size_t(seq)] = n_past;
}

void SequenceCache::gather(const std::vector<int> & seqs, const std::vector<int> & sources) {
    const size_t n = seqs.size();
    if (sources.size() != n) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "gathering %zu sequences from %zu sources", n, sources.size());
    }
    std::vector<int> lengths(n);
    for (size_t j = 0; j < n; ++j) {
        check_seq(seqs[j]);
        if (sources[size_t(j)] < 0 || size_t(sources[j]) >= n) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "gather source %d of %zu sequences", sources[j], n);
        }
        lengths[j] = n_past_[size_t(seqs[size_t(sources[j])])];
        clear_rows(int64_t(seqs[j]) * n_ctx_ + lengths[j]); // before the copies land there
    }
    gather_bufs_.resize(n);
    for (std::vector<ggml_tensor *> * cache : {&k_, &v_}) {
        for (ggml_tensor * t : *cache) {
            // Read every source that moves before writing any target.
            for (size_t j = 0; j < n; ++j) {
                const int from = seqs[size_t(sources[j])];
                if (from != seqs[j]) {
                    gather_bufs_[j].resize(size_t(lengths[j]) * t->nb[1]);
                    ggml_backend_tensor_get(t, gather_bufs_[j].data(), size_t(from) * size_t(n_ctx_) * t->nb[1],
                                            gather_bufs_[j].size());
                }
            }
            for (size_t j = 0; j < n; ++j) {
                if (seqs[size_t(sources[j])] != seqs[j]) {
                    ggml_backend_tensor_set(t, gather_bufs_[j].data(), size_t(seqs[j]) * size_t(n_ctx_) * t->nb[1],
                                            gather_bufs_[j].size());
                }
            }
        }
    }
    for (size_t j = 0; j < n; ++j) {
        n_past_[size_t(seqs[j])] = lengths[j];
    }
}

} // namespace transcribe
