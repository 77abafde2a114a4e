// The transducer half of NeMo's RNNT/TDT models: the prediction network (embedding, stacked LSTM, no
// normalisation; the blank row of the embedding is the zero start input) and the joint
// (enc and pred projections, ReLU, one output layer: vocab + blank logits, then any extra outputs such
// as TDT's duration logits). Weights under pred.* and joint.*.
#pragma once

#include "core/backend.h"
#include "core/model_file.h"
#include "model/session_base.h"

#include <string>
#include <utility>
#include <vector>

namespace transcribe {

struct TransducerHParams {
    int vocab        = 0; // tokens without the blank; blank id = vocab
    int pred_hidden  = 0;
    int pred_layers  = 0;
    int joint_hidden = 0;
    int extra        = 0; // outputs after the vocab + 1 token logits
    int outputs() const { return vocab + 1 + extra; }
    int blank() const { return vocab; }
};

class Transducer {
public:
    Transducer(const ModelFile & file, const TransducerHParams & hp, int encoder_dim);

    // The joint's encoder projection of every frame, enc [d_model, T] -> [joint_hidden, T].
    ggml_tensor * project_encoder(ggml_context * ctx, ggml_tensor * enc) const;

    // One prediction step as a graph: inputs "token" (I32 [1]), "h_in" / "c_in" [pred_hidden, layers];
    // outputs "pred_out" [pred_hidden], "pred_proj" [joint_hidden] and each layer's "h_out.L" / "c_out.L".
    std::unique_ptr<Graph> build_predict() const;
    // The joint on one frame: input "joint_in" [joint_hidden] (enc projection + pred projection),
    // output "logits" [outputs()].
    std::unique_ptr<Graph> build_joint() const;

    const TransducerHParams & hparams() const { return hp_; }

private:
    struct Lstm {
        ggml_tensor * w    = nullptr; // [W_ih | W_hh]: [2 * pred_hidden] -> [4 * pred_hidden]
        ggml_tensor * bias = nullptr; // b_ih + b_hh
    };
    TransducerHParams hp_;
    ggml_tensor *     embd_ = nullptr;
    std::vector<Lstm> lstm_;
    ggml_tensor *     enc_w_ = nullptr, * enc_b_ = nullptr;
    ggml_tensor *     pred_w_ = nullptr, * pred_b_ = nullptr;
    ggml_tensor *     out_w_ = nullptr, * out_b_ = nullptr;
};

// A session's decoding state over one Transducer: the graphs (built once), the LSTM state, the latest
// prediction-net output.
class TransducerState {
public:
    TransducerState(const Transducer & model, Executor & exec);
    // The start state: the prediction net run on the blank (zero) input from a zero LSTM state.
    void start();
    // One prediction step on an emitted token.
    void predict(int32_t token);
    // The joint logits at a frame whose encoder projection is enc_proj_row [joint_hidden].
    const std::vector<float> & joint(const float * enc_proj_row);

    const std::vector<float> & pred_out() const { return pred_out_; }
    const std::vector<float> & pred_proj() const { return pred_proj_; }
    const std::vector<float> & h() const { return h_; } // [layers][pred_hidden]
    const std::vector<float> & c() const { return c_; }

private:
    const Transducer &     model_;
    Executor &             exec_;       // runs predict_
    Executor               joint_exec_; // the joint's own, so that neither graph is allocated anew a step
    std::unique_ptr<Graph> predict_, joint_;
    std::vector<std::pair<ggml_tensor *, ggml_tensor *>> state_out_; // each layer's h and c outputs of predict_
    std::vector<float>     h_, c_, pred_out_, pred_proj_, joint_in_, logits_;
};

} // namespace transcribe
