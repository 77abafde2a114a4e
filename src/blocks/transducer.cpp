#include "transducer.h"

#include "core/error.h"
#include "ops/lstm.h"
#include "ops/matmul.h"

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};
}

Transducer::Transducer(const ModelFile & f, const TransducerHParams & hp, int encoder_dim) : hp_(hp) {
    const int64_t V = hp.vocab, P = hp.pred_hidden, J = hp.joint_hidden, L = hp.pred_layers;
    if (V <= 0 || P <= 0 || J <= 0 || L <= 0 || L > 16 || hp.extra < 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid transducer dimensions", f.path().c_str());
    }
    embd_ = f.tensor("pred.embd.weight", {P, V + 1});
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "pred.lstm." + std::to_string(l) + ".";
        lstm_.push_back({f.matmul_weight(p + "weight", {2 * P, 4 * P}), f.tensor(p + "bias", {4 * P}, F32)});
    }
    enc_w_  = f.matmul_weight("joint.enc.weight", {encoder_dim, J});
    enc_b_  = f.tensor("joint.enc.bias", {J}, F32);
    pred_w_ = f.matmul_weight("joint.pred.weight", {P, J});
    pred_b_ = f.tensor("joint.pred.bias", {J}, F32);
    out_w_  = f.matmul_weight("joint.out.weight", {J, hp.outputs()});
    out_b_  = f.tensor("joint.out.bias", {hp.outputs()}, F32);
}

ggml_tensor * Transducer::project_encoder(ggml_context * ctx, ggml_tensor * enc) const {
    return ops::matmul(ctx, enc_w_, enc, enc_b_);
}

namespace {
std::string state_output(const char * what, int64_t layer) { return std::string(what) + "." + std::to_string(layer); }
} // namespace

std::unique_ptr<Graph> Transducer::build_predict() const {
    const int64_t P = hp_.pred_hidden, L = hp_.pred_layers;
    auto g = std::make_unique<Graph>(1024, "predict");
    ggml_context * ctx = g->ctx();
    ggml_tensor * token = g->input("token", GGML_TYPE_I32, 1);
    ggml_tensor * h_in  = g->input("h_in", GGML_TYPE_F32, P, L);
    ggml_tensor * c_in  = g->input("c_in", GGML_TYPE_F32, P, L);
    ggml_tensor * x = ggml_get_rows(ctx, embd_, token); // [P, 1]
    if (x->type != GGML_TYPE_F32) {
        x = ggml_cast(ctx, x, GGML_TYPE_F32);
    }
    for (int64_t l = 0; l < L; ++l) {
        const Lstm & w = lstm_[size_t(l)];
        ggml_tensor * h = ggml_view_2d(ctx, h_in, P, 1, h_in->nb[1], size_t(l) * h_in->nb[1]);
        ggml_tensor * c = ggml_view_1d(ctx, c_in, P, size_t(l) * c_in->nb[1]);
        ggml_tensor * z = ops::matmul(ctx, w.w, ggml_concat(ctx, x, h, 0), w.bias); // W_ih x + W_hh h + b
        const LstmState s = ops::lstm_cell(ctx, ggml_reshape_1d(ctx, z, 4 * P), c, w.w);
        x = ggml_reshape_2d(ctx, s.h, P, 1);
        // Each layer's state is an output of its own: stacking them would be graph ops of their own.
        g->output(s.h, state_output("h_out", l).c_str());
        g->output(s.c, state_output("c_out", l).c_str());
    }
    g->output(x, "pred_out");
    g->output(ops::matmul(ctx, pred_w_, x, pred_b_), "pred_proj");
    return g;
}

std::unique_ptr<Graph> Transducer::build_joint() const {
    auto g = std::make_unique<Graph>(64, "joint");
    ggml_context * ctx = g->ctx();
    ggml_tensor * in = g->input("joint_in", GGML_TYPE_F32, hp_.joint_hidden);
    g->output(ops::matmul(ctx, out_w_, ggml_relu(ctx, ggml_reshape_2d(ctx, in, hp_.joint_hidden, 1)), out_b_), "logits");
    return g;
}

TransducerState::TransducerState(const Transducer & model, Executor & exec)
    : model_(model), exec_(exec), joint_exec_(exec.device(), exec.n_threads()), predict_(model.build_predict()),
      joint_(model.build_joint()) {
    for (int l = 0; l < model_.hparams().pred_layers; ++l) { // looked up once: a step allocates nothing
        state_out_.push_back({predict_->get(state_output("h_out", l).c_str()), predict_->get(state_output("c_out", l).c_str())});
    }
}

void TransducerState::start() {
    const size_t n = size_t(model_.hparams().pred_hidden) * size_t(model_.hparams().pred_layers);
    h_.assign(n, 0.0f);
    c_.assign(n, 0.0f);
    predict(model_.hparams().blank());
}

void TransducerState::predict(int32_t token) {
    Graph & g = *predict_;
    exec_.compute(g, [&] {
        tensor_set(g.get("token"), &token, sizeof token);
        tensor_set(g.get("h_in"), h_);
        tensor_set(g.get("c_in"), c_);
    });
    const size_t P = size_t(model_.hparams().pred_hidden);
    for (size_t l = 0; l < state_out_.size(); ++l) {
        ggml_backend_tensor_get(state_out_[l].first, h_.data() + l * P, 0, P * sizeof(float));
        ggml_backend_tensor_get(state_out_[l].second, c_.data() + l * P, 0, P * sizeof(float));
    }
    tensor_get_f32(g.get("pred_out"), pred_out_);
    tensor_get_f32(g.get("pred_proj"), pred_proj_);
}

const std::vector<float> & TransducerState::joint(const float * enc_proj_row) {
    joint_in_.resize(pred_proj_.size());
    for (size_t i = 0; i < joint_in_.size(); ++i) {
        joint_in_[i] = enc_proj_row[i] + pred_proj_[i];
    }
    Graph & g = *joint_;
    joint_exec_.compute(g, [&] { tensor_set(g.get("joint_in"), joint_in_); });
    tensor_get_f32(g.get("logits"), logits_);
    return logits_;
}

} // namespace transcribe
