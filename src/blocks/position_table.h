// The relative positions of a FastConformer window of T frames (T-1 ... -(T-1)) in the two forms its
// layers take them: the sinusoidal embeddings, and those embeddings projected by every layer's
// linear_pos. Both depend on T alone, and a shorter window's rows are the middle rows of a longer one's
// (each row is a function of its position only), so each is made once, for the longest window asked,
// and shared by every graph and session of the model.
#pragma once

#include "core/backend.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace transcribe {

class PositionTable {
public:
    PositionTable(int64_t d_model, int64_t n_heads) : d_(d_model), heads_(n_heads) {}

    // The rows a window of T frames reads: 2T-1 positions, padded to a count tinyBLAS takes (see
    // ops::rel_pos_attention_ggml).
    static int64_t rows(int64_t T) { return GGML_PAD(2 * T - 1, 16); }

    // The embeddings of positions T-1 ... -(T-1) into POS [d_model, >= 2T-1 rows], zeros after them.
    void set_embeddings(ggml_tensor * pos, int64_t T) const;

    // Every layer's projections of the embeddings, [head_dim, heads, rows] each, in the type the
    // attention takes (ops::rel_pos_position_type), in host memory.
    struct Projections {
        ggml_context *             ctx    = nullptr;
        ggml_backend_buffer_t      buffer = nullptr;
        std::vector<ggml_tensor *> layers;
        int64_t                    max_T = 0;
        ~Projections();
    };
    // The projections by WEIGHTS (linear_pos, one a layer, in host memory) for windows of up to T frames
    // or more, as TYPE: the table made before where it covers them, else one made now on the CPU with
    // N_THREADS, by the same ops a graph would project them with (for T frames, or a few more where it
    // replaces a table outgrown).
    std::shared_ptr<const Projections> projections(const std::vector<ggml_tensor *> & weights, int64_t T, ggml_type type,
                                                   int n_threads) const;
    // LAYER's projected positions for a window of T frames: a view [head_dim, heads, rows(T)] of TABLE.
    static ggml_tensor * window(ggml_context * ctx, const Projections & table, size_t layer, int64_t T);

private:
    int64_t d_, heads_;
    mutable std::mutex                                 embeddings_mutex_;
    mutable std::shared_ptr<const std::vector<float>> embeddings_; // 2 max_T - 1 rows of d_model
    mutable int64_t                                    embeddings_T_ = 0;
    mutable std::mutex                                 projections_mutex_;
    mutable std::shared_ptr<const Projections>         projections_;
};

} // namespace transcribe
