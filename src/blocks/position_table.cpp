#include "position_table.h"

#include "core/error.h"
#include "core/system_memory.h"
#include "ops/matmul.h"

#include <cmath>

namespace transcribe {

void PositionTable::set_embeddings(ggml_tensor * pos, int64_t T) const {
    std::shared_ptr<const std::vector<float>> table;
    int64_t table_T = 0;
    {
        std::lock_guard<std::mutex> lock(embeddings_mutex_);
        if (embeddings_T_ < T) {
            auto pe = std::make_shared<std::vector<float>>(size_t(d_) * size_t(2 * T - 1));
            std::vector<double> freq(size_t(d_ / 2));
            for (int64_t k = 0; k < d_ / 2; ++k) {
                freq[size_t(k)] = std::exp(-double(2 * k) * std::log(10000.0) / double(d_));
            }
            for (int64_t r = 0; r < 2 * T - 1; ++r) {
                const double p = double(T - 1 - r);
                for (int64_t k = 0; k < d_ / 2; ++k) {
                    (*pe)[size_t(r * d_ + 2 * k)]     = float(std::sin(p * freq[size_t(k)]));
                    (*pe)[size_t(r * d_ + 2 * k + 1)] = float(std::cos(p * freq[size_t(k)]));
                }
            }
            embeddings_   = std::move(pe);
            embeddings_T_ = T;
        }
        table   = embeddings_;
        table_T = embeddings_T_;
    }
    // Position T-1 is row table_T - T of the table; the columns after 2T-1 stay zero.
    const size_t row_bytes = size_t(d_) * sizeof(float), used = size_t(2 * T - 1);
    const size_t all = size_t(ggml_nelements(pos)) / size_t(d_);
    if (pos->type != GGML_TYPE_F32 || pos->ne[0] != d_ || all < used) {
        fail(TRANSCRIBE_ERR_INTERNAL, "position embeddings: input of the wrong shape for %lld frames", (long long) T);
    }
    ggml_backend_tensor_set(pos, table->data() + size_t(table_T - T) * size_t(d_), 0, used * row_bytes);
    const std::vector<float> zeros((all - used) * size_t(d_), 0.0f);
    if (!zeros.empty()) {
        ggml_backend_tensor_set(pos, zeros.data(), used * row_bytes, zeros.size() * sizeof(float));
    }
}

PositionTable::Projections::~Projections() {
    if (buffer) {
        ggml_backend_buffer_free(buffer);
    }
    if (ctx) {
        ggml_free(ctx);
    }
}

std::shared_ptr<const PositionTable::Projections> PositionTable::projections(const std::vector<ggml_tensor *> & weights,
                                                                              int64_t T, ggml_type type, int n_threads) const {
    std::lock_guard<std::mutex> lock(projections_mutex_);
    if (projections_ && projections_->max_T >= T && projections_->layers.size() == weights.size() &&
        projections_->layers[0]->type == type) {
        return projections_;
    }
    if (weights.empty()) {
        fail(TRANSCRIBE_ERR_INTERNAL, "position projections asked for no layers");
    }
    // A table outgrown is made again with frames to spare: a live stream's turn, transcribed again as it
    // grows, would otherwise have one made for every partial transcript.
    constexpr int64_t kGrowthFrames = 64;
    const int64_t max_T = projections_ ? GGML_PAD(T, kGrowthFrames) : T;
    // Rows for every window up to max_T: a window of t frames reads rows(t) rows from row max_T - t on.
    const int64_t hd = d_ / heads_, n_rows = 2 * max_T + 14;
    auto table = std::make_shared<Projections>();
    table->max_T = max_T;
    ggml_init_params params = {ggml_tensor_overhead() * (weights.size() + 1), nullptr, true};
    table->ctx = ggml_init(params);
    if (!table->ctx) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate the position projections' context");
    }
    for (size_t i = 0; i < weights.size(); ++i) {
        table->layers.push_back(ggml_new_tensor_3d(table->ctx, type, hd, heads_, n_rows));
    }
    ggml_backend_dev_t cpu = select_device(TRANSCRIBE_BACKEND_CPU, 0);
    table->buffer = ggml_backend_alloc_ctx_tensors_from_buft(table->ctx, ggml_backend_dev_buffer_type(cpu));
    if (!table->buffer) {
        fail(TRANSCRIBE_ERR_OOM, "cannot allocate the position projections for %lld frames", (long long) max_T);
    }
    advise_huge_pages(ggml_backend_buffer_get_base(table->buffer), ggml_backend_buffer_get_size(table->buffer));

    // The ops the encoder's graph projected them with, writing into the table.
    Executor exec(cpu, n_threads);
    Graph g(weights.size() * 8 + 16, "position_projections");
    ggml_context * ctx = g.ctx();
    ggml_tensor * pos = g.input("pos_emb", GGML_TYPE_F32, d_, n_rows);
    ggml_tensor * x = ops::activations_for(ctx, weights, pos);
    for (size_t i = 0; i < weights.size(); ++i) {
        ggml_tensor * p = ggml_reshape_3d(ctx, ops::matmul(ctx, weights[i], x), hd, heads_, n_rows);
        if (type == GGML_TYPE_BF16) {
            p = ops::to_bf16(ctx, p);
        }
        g.expand(ggml_cpy(ctx, p, table->layers[i]));
    }
    exec.compute(g, [&] { set_embeddings(pos, max_T); });
    projections_ = table;
    return table;
}

ggml_tensor * PositionTable::window(ggml_context * ctx, const Projections & table, size_t layer, int64_t T) {
    ggml_tensor * t = table.layers.at(layer);
    if (T > table.max_T) {
        fail(TRANSCRIBE_ERR_INTERNAL, "position projections for %lld frames asked of a table of %lld", (long long) T,
             (long long) table.max_T);
    }
    return ggml_view_3d(ctx, t, t->ne[0], t->ne[1], rows(T), t->nb[1], t->nb[2], size_t(table.max_T - T) * t->nb[2]);
}

} // namespace transcribe
