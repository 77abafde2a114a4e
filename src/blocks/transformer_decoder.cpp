#include "transformer_decoder.h"

#include "core/error.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/embed.h"
#include "ops/matmul.h"
#include "ops/norms.h"

#include <cmath>

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};
constexpr int KV_PAD = 256; // masked-attention graphs exist per multiple of this many cache rows
} // namespace

TransformerDecoderHParams TransformerDecoderHParams::from_file(const ModelFile & f, const std::string & arch, int enc_width) {
    const std::string a = arch + ".";
    TransformerDecoderHParams hp;
    hp.n_layers    = int(f.get_u32(a + "dec_layers"));
    hp.hidden      = int(f.get_u32(a + "dec_hidden"));
    hp.n_heads     = int(f.get_u32(a + "dec_heads"));
    hp.inner       = int(f.get_u32(a + "dec_inner"));
    hp.n_positions = int(f.get_u32(a + "max_sequence_length"));
    hp.norm_eps    = f.get_f32(a + "norm_eps");
    const std::string act = f.get_str(a + "dec_activation", "relu");
    if (act != "relu" && act != "gelu") {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: unknown decoder activation '%s'", f.path().c_str(), act.c_str());
    }
    hp.gelu = act == "gelu";
    hp.enc_width   = enc_width;
    const ggml_tensor * embd = f.find("dec.token_embd.weight");
    hp.vocab_rows = embd ? int(embd->ne[1]) : 0;
    if (hp.n_layers <= 0 || hp.n_layers > 256 || hp.hidden <= 0 || hp.n_heads <= 0 || hp.hidden % hp.n_heads ||
        hp.inner <= 0 || hp.n_positions <= 0 || hp.vocab_rows <= 0 || !(hp.norm_eps > 0)) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid Transformer decoder hyper-parameters", f.path().c_str());
    }
    return hp;
}

TransformerDecoder::Linear TransformerDecoder::linear(const ModelFile & f, const std::string & name, int64_t n_in,
                                                      int64_t n_out) const {
    // A bias may be absent (Whisper's key projections have none).
    return {f.matmul_weight(name + ".weight", {n_in, n_out}), f.find(name + ".bias") ? f.tensor(name + ".bias", {n_out}, F32) : nullptr};
}

TransformerDecoder::Norm TransformerDecoder::norm(const ModelFile & f, const std::string & name) const {
    return {f.tensor(name + ".weight", {hp_.hidden}, F32), f.tensor(name + ".bias", {hp_.hidden}, F32)};
}

TransformerDecoder::TransformerDecoder(const ModelFile & f, const TransformerDecoderHParams & hp) : hp_(hp) {
    const int64_t H = hp.hidden;
    tok_embd_  = f.embedding_weight("dec.token_embd.weight", {H, hp.vocab_rows});
    pos_table_ = f.tensor("dec.pos_enc", {H, hp.n_positions}, F32);
    if (f.find("dec.embd_norm.weight")) {
        embd_norm_ = norm(f, "dec.embd_norm");
    }
    out_norm_  = norm(f, "dec.output_norm");
    out_b_     = f.find("dec.output.bias") ? f.tensor("dec.output.bias", {hp.vocab_rows}, F32) : nullptr;
    out_w_     = f.find("dec.output.weight") ? f.matmul_weight("dec.output.weight", {H, hp.vocab_rows}) : tok_embd_;
    if (f.find("enc_dec_proj.weight") || hp.enc_width != hp.hidden) {
        enc_proj_ = linear(f, "enc_dec_proj", hp.enc_width, H);
    }
    layers_.resize(size_t(hp.n_layers));
    for (int i = 0; i < hp.n_layers; ++i) {
        const std::string b = "dec.blk." + std::to_string(i) + ".";
        Layer & l     = layers_[size_t(i)];
        l.attn_norm   = norm(f, b + "attn_norm");
        l.xattn_norm  = norm(f, b + "xattn_norm");
        l.ffn_norm    = norm(f, b + "ffn_norm");
        l.q           = linear(f, b + "attn_q", H, H);
        l.k           = linear(f, b + "attn_k", H, H);
        l.v           = linear(f, b + "attn_v", H, H);
        l.o           = linear(f, b + "attn_o", H, H);
        l.xq          = linear(f, b + "xattn_q", H, H);
        l.xk          = linear(f, b + "xattn_k", H, H);
        l.xv          = linear(f, b + "xattn_v", H, H);
        l.xo          = linear(f, b + "xattn_o", H, H);
        l.up          = linear(f, b + "ffn_up", H, hp.inner);
        l.down        = linear(f, b + "ffn_down", hp.inner, H);
    }
}

ggml_tensor * TransformerDecoder::apply(ggml_context * ctx, const Linear & l, ggml_tensor * x) const {
    return ops::matmul(ctx, l.w, x, l.b);
}

ggml_tensor * TransformerDecoder::apply(ggml_context * ctx, const Norm & n, ggml_tensor * x) const {
    return ops::layer_norm(ctx, x, n.w, n.b, hp_.norm_eps);
}

ggml_tensor * TransformerDecoder::project_encoder(ggml_context * ctx, ggml_tensor * enc) const {
    return enc_proj_.w ? apply(ctx, enc_proj_, enc) : enc;
}

ggml_tensor * TransformerDecoder::cross_k(ggml_context * ctx, int il, ggml_tensor * mem) const {
    return apply(ctx, layers_[size_t(il)].xk, mem);
}

ggml_tensor * TransformerDecoder::cross_v(ggml_context * ctx, int il, ggml_tensor * mem) const {
    return apply(ctx, layers_[size_t(il)].xv, mem);
}

ggml_tensor * TransformerDecoder::build(ggml_context * ctx, ggml_cgraph * gf, const Columns & c, const SequenceCache & self,
                                        const SequenceCache & cross, ggml_tensor ** embedded, ggml_tensor ** first_layer,
                                        std::vector<ggml_tensor *> * cross_queries) const {
    const int64_t H = hp_.hidden, nh = hp_.n_heads, hd = H / nh, B = c.tokens->ne[0];
    // NeMo scales q and k each by 1/sqrt(sqrt(head_dim)): the scores by 1/sqrt(head_dim).
    const float scale = 1.0f / std::sqrt(float(hd));
    ggml_tensor * x = ggml_add(ctx, ops::embed(ctx, tok_embd_, c.tokens), ggml_get_rows(ctx, pos_table_, c.positions));
    if (embd_norm_.w) {
        x = apply(ctx, embd_norm_, x);
    }
    if (embedded) {
        *embedded = x;
    }
    for (size_t il = 0; il < layers_.size(); ++il) {
        const Layer & l = layers_[il];
        // Self-attention: this pass's K/V into the cache, then each column over its sequence's rows.
        ggml_tensor * h = apply(ctx, l.attn_norm, x);
        ggml_tensor * q = ggml_reshape_3d(ctx, apply(ctx, l.q, h), hd, nh, B);
        ggml_tensor * k_all = ggml_set_rows(ctx, self.k()[il], apply(ctx, l.k, h), c.self_rows);
        ggml_tensor * v_all = ggml_set_rows(ctx, self.v()[il], apply(ctx, l.v, h), c.self_rows);
        ggml_build_forward_expand(gf, k_all);
        ggml_build_forward_expand(gf, v_all);
        ggml_tensor * o = ops::decode_attention(ctx, q, k_all, v_all, c.self_pos, c.self_rows, c.self_mask, c.n_self_kv, scale);
        x = ggml_add(ctx, x, apply(ctx, l.o, ggml_reshape_2d(ctx, o, H, B)));
        // Cross-attention over the sequence's encoder rows.
        h = apply(ctx, l.xattn_norm, x);
        q = apply(ctx, l.xq, h);
        if (cross_queries) {
            cross_queries->push_back(q);
        }
        q = ggml_reshape_3d(ctx, q, hd, nh, B);
        o = ops::decode_attention(ctx, q, cross.k()[il], cross.v()[il], c.cross_pos, c.cross_rows, c.cross_mask,
                                  c.n_cross_kv, scale);
        x = ggml_add(ctx, x, apply(ctx, l.xo, ggml_reshape_2d(ctx, o, H, B)));
        h = apply(ctx, l.ffn_norm, x);
        ggml_tensor * up = apply(ctx, l.up, h);
        x = ggml_add(ctx, x, apply(ctx, l.down, hp_.gelu ? ops::gelu_erf(ctx, up, l.up.w) : ggml_relu(ctx, up)));
        if (il == 0 && first_layer) {
            *first_layer = x;
        }
    }
    return apply(ctx, out_norm_, x);
}

ggml_tensor * TransformerDecoder::logits(ggml_context * ctx, ggml_tensor * h) const { return ops::matmul(ctx, out_w_, h, out_b_); }

TransformerDecoderState::TransformerDecoderState(const TransformerDecoder & dec, Executor & exec, ggml_type kv_type,
                                                 int n_ctx, int n_seq, int max_enc_frames, ggml_type cross_type)
    : dec_(dec),
      exec_(exec),
      self_(exec, dec.hparams().n_layers, dec.hparams().hidden, kv_type, n_ctx, n_seq, "decoder cache"),
      cross_(exec, dec.hparams().n_layers, dec.hparams().hidden, cross_type, max_enc_frames, n_seq, "cross-attention cache"),
      position_shift_(size_t(n_seq), 0),
      cross_of_(size_t(n_seq), 0) {}

Graph & TransformerDecoderState::pass_graph(int n_cols, int n_self_kv, int n_cross_kv, Pass pass) {
    auto & slot = graphs_[{n_cols, n_self_kv, n_cross_kv, pass}];
    if (slot) {
        return *slot;
    }
    if (graphs_.size() > 64) { // column counts x cache lengths: rebuilt as they come back, not hoarded
        graphs_.clear();
        return pass_graph(n_cols, n_self_kv, n_cross_kv, pass);
    }
    const bool prompt = pass != Pass::Step;
    auto g = std::make_unique<Graph>(8192, prompt ? "decoder prompt" : "decode");
    ggml_context * ctx = g->ctx();
    TransformerDecoder::Columns c;
    c.tokens     = g->input("token", GGML_TYPE_I32, n_cols);
    c.positions  = g->input("position", GGML_TYPE_I32, n_cols);
    c.self_pos   = g->input("self_pos", GGML_TYPE_I32, n_cols);
    c.self_rows  = g->input("self_rows", GGML_TYPE_I64, n_cols);
    c.self_mask  = g->input("self_mask", GGML_TYPE_F16, n_self_kv, n_cols);
    c.cross_pos  = g->input("cross_pos", GGML_TYPE_I32, n_cols);
    c.cross_rows = g->input("cross_rows", GGML_TYPE_I64, n_cols);
    c.cross_mask = g->input("cross_mask", GGML_TYPE_F16, n_cross_kv, n_cols);
    c.n_self_kv  = n_self_kv;
    c.n_cross_kv = n_cross_kv;
    ggml_tensor * embedded = nullptr, * first_layer = nullptr;
    std::vector<ggml_tensor *> queries;
    ggml_tensor * h = dec_.build(ctx, g->graph(), c, self_, cross_, &embedded, &first_layer,
                                 pass == Pass::Alignment ? &queries : nullptr);
    for (size_t il = 0; il < queries.size(); ++il) {
        g->output(queries[il], ("cross_q_" + std::to_string(il)).c_str());
    }
    if (prompt && pass != Pass::Alignment) { // the prompt's stages for parity dumps; only its last position's logits are needed
        g->output(embedded, "embedded");
        g->output(first_layer, "first_layer");
        g->output(h, "final_norm");
        if (pass == Pass::PromptWithRow) {
            g->output(dec_.logits(ctx, ggml_get_rows(ctx, h, g->input("logits_row", GGML_TYPE_I32, 1))), "row_logits");
        }
        h = ggml_view_2d(ctx, h, h->ne[0], 1, h->nb[1], size_t(n_cols - 1) * h->nb[1]);
    }
    ggml_tensor * logits = dec_.logits(ctx, h);
    g->output(logits, "logits");
    g->output(ggml_argmax(ctx, logits), "argmax");
    // Whether any op reads a mask (ggml's flash attention), or our kernel finds each sequence's rows
    // itself: then the graph does not depend on the cache lengths.
    reads_masks_ = false;
    for (int i = 0; i < ggml_graph_n_nodes(g->graph()) && !reads_masks_; ++i) {
        const ggml_tensor * node = ggml_graph_node(g->graph(), i);
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            reads_masks_ = reads_masks_ || node->src[j] == c.self_mask || node->src[j] == c.cross_mask;
        }
    }
    slot = std::move(g);
    return *slot;
}

void TransformerDecoderState::run_pass(Graph & g, const std::vector<int32_t> & tokens, const std::vector<int> & seqs,
                                       int n_self_kv, int n_cross_kv) {
    positions_.resize(tokens.size());
    for (size_t b = 0; b < tokens.size(); ++b) {
        positions_[b] = self_.pos()[b] - position_shift_[size_t(seqs[b])];
        if (positions_[b] < 0 || positions_[b] >= dec_.hparams().n_positions) {
            fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "decoder position %d past the model's %d", positions_[b],
                 dec_.hparams().n_positions);
        }
    }
    // An input no op reads (positions and rows where the attention is ggml's, masks where it is
    // ours) is left unallocated.
    auto set = [&](const char * name, const auto & v) {
        if (ggml_tensor * t = g.get(name); t->buffer) {
            tensor_set(t, v);
        }
    };
    exec_.compute(g, [&] {
        set("token", tokens);
        set("position", positions_);
        set("self_pos", self_.pos());
        set("self_rows", self_.rows());
        self_.set_mask(g.get("self_mask"), n_self_kv);
        set("cross_pos", cross_.pos());
        set("cross_rows", cross_.rows());
        cross_.set_mask(g.get("cross_mask"), n_cross_kv);
        if (ggml_tensor * row = g.find("logits_row")) {
            tensor_set(row, std::vector<int32_t> {logits_row_});
        }
    });
}

int32_t TransformerDecoderState::prefill(int seq, const float * enc, int n_enc, const std::vector<int32_t> & prompt,
                                         int position_shift, PromptOutputs * out, int logits_row) {
    self_.check_seq(seq);
    const int T = int(prompt.size());
    if (n_enc <= 0 || n_enc > cross_.n_ctx()) {
        fail(TRANSCRIBE_ERR_INPUT_TOO_LONG, "%d encoder frames for a decoder of at most %d", n_enc, cross_.n_ctx());
    }
    // The cross-attention keys and values of every layer, once for the recording.
    cross_.restart(seq, n_enc);
    auto & cg = cross_graphs_[n_enc];
    if (!cg) {
        if (cross_graphs_.size() > 8) {
            cross_graphs_.clear();
        }
        cg = std::make_unique<Graph>(1024, "cross-attention keys");
        ggml_context * ctx = cg->ctx();
        ggml_tensor * mem  = dec_.project_encoder(ctx, cg->input("enc", GGML_TYPE_F32, dec_.hparams().enc_width, n_enc));
        ggml_tensor * rows = cg->input("rows", GGML_TYPE_I64, n_enc);
        if (dec_.projects_encoder()) {
            cg->output(mem, "mem");
        }
        for (int il = 0; il < dec_.hparams().n_layers; ++il) {
            cg->expand(ggml_set_rows(ctx, cross_.k()[size_t(il)], dec_.cross_k(ctx, il, mem), rows));
            cg->expand(ggml_set_rows(ctx, cross_.v()[size_t(il)], dec_.cross_v(ctx, il, mem), rows));
        }
    }
    exec_.compute(*cg, [&] {
        tensor_set(cg->get("enc"), enc, size_t(n_enc) * size_t(dec_.hparams().enc_width) * sizeof(float));
        std::vector<int64_t> rows(static_cast<size_t>(n_enc));
        for (int i = 0; i < n_enc; ++i) {
            rows[size_t(i)] = int64_t(seq) * cross_.n_ctx() + i;
        }
        tensor_set(cg->get("rows"), rows);
    });
    if (out && dec_.projects_encoder()) {
        tensor_get_f32(cg->get("mem"), out->enc_proj);
    }
    cross_.set_past(seq, n_enc);
    cross_of_[size_t(seq)]       = seq;
    position_shift_[size_t(seq)] = 0;

    self_.restart(seq, T);
    const std::vector<int> seqs(static_cast<size_t>(T), seq);
    const int pad        = reads_masks_ ? KV_PAD : self_.n_ctx() * self_.n_seq();
    const int n_self_kv  = self_.place_prompt(seq, T, pad);
    const int n_cross_kv = cross_.place_read(seqs, reads_masks_ ? KV_PAD : cross_.n_ctx() * cross_.n_seq());
    if (logits_row >= T || (logits_row >= 0 && !out)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "logits of prompt position %d asked of a prompt of %d", logits_row, T);
    }
    Graph & g = pass_graph(T, n_self_kv, n_cross_kv, logits_row >= 0 ? Pass::PromptWithRow : Pass::Prompt);
    logits_row_ = logits_row;
    run_pass(g, prompt, seqs, n_self_kv, n_cross_kv);
    int32_t next = 0;
    ggml_backend_tensor_get(g.get("argmax"), &next, 0, sizeof(next));
    if (out) {
        tensor_get_f32(g.get("logits"), out->logits);
        tensor_get_f32(g.get("embedded"), out->embedded);
        tensor_get_f32(g.get("first_layer"), out->first_layer);
        tensor_get_f32(g.get("final_norm"), out->final_norm);
        if (logits_row >= 0) {
            tensor_get_f32(g.get("row_logits"), out->row_logits);
        }
    }
    self_.set_past(seq, T);
    position_shift_[size_t(seq)] = position_shift;
    return next;
}

void TransformerDecoderState::step(const std::vector<int> & seqs, const std::vector<int32_t> & tokens,
                                   std::vector<int32_t> & next, std::vector<std::vector<float>> * logits) {
    const size_t B = seqs.size();
    if (B == 0 || tokens.size() != B) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "a decode step of %zu sequences with %zu tokens", B, tokens.size());
    }
    const int n_self_kv = self_.place_append(seqs, reads_masks_ ? KV_PAD : self_.n_ctx() * self_.n_seq());
    cross_seqs_.resize(B);
    for (size_t b = 0; b < B; ++b) {
        cross_seqs_[b] = cross_of_[size_t(seqs[b])];
    }
    const int n_cross_kv = cross_.place_read(cross_seqs_, reads_masks_ ? KV_PAD : cross_.n_ctx() * cross_.n_seq());
    Graph & g = pass_graph(int(B), n_self_kv, n_cross_kv, Pass::Step);
    run_pass(g, tokens, seqs, n_self_kv, n_cross_kv);
    read_step_outputs(g, B, next, logits);
    self_.advance(seqs);
}

TransformerDecoderState::CrossAttention TransformerDecoderState::cross_attention(int seq, const std::vector<int32_t> & tokens) {
    self_.check_seq(seq);
    const int T = int(tokens.size()), n_enc = cross_.n_past(cross_of_[size_t(seq)]);
    if (T <= 0 || n_enc <= 0) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "an alignment pass of %d tokens over %d encoder frames", T, n_enc);
    }
    self_.restart(seq, T);
    const std::vector<int> seqs(static_cast<size_t>(T), seq);
    const int n_self_kv  = self_.place_prompt(seq, T, reads_masks_ ? KV_PAD : self_.n_ctx() * self_.n_seq());
    const int n_cross_kv = cross_.place_read(std::vector<int>(static_cast<size_t>(T), cross_of_[size_t(seq)]),
                                             reads_masks_ ? KV_PAD : cross_.n_ctx() * cross_.n_seq());
    Graph & g = pass_graph(T, n_self_kv, n_cross_kv, Pass::Alignment);
    position_shift_[size_t(seq)] = 0;
    logits_row_ = -1;
    run_pass(g, tokens, seqs, n_self_kv, n_cross_kv);
    self_.set_past(seq, T);
    CrossAttention out;
    out.n_enc = n_enc;
    tensor_get_f32(g.get("logits"), out.logits);
    const size_t H = size_t(dec_.hparams().hidden);
    for (int il = 0; il < dec_.hparams().n_layers; ++il) {
        out.queries.push_back(tensor_get_f32(g.get(("cross_q_" + std::to_string(il)).c_str())));
        std::vector<float> k(size_t(n_enc) * H);
        const ggml_tensor * cache = cross_.k()[size_t(il)];
        ggml_backend_tensor_get(cache, k.data(), size_t(cross_of_[size_t(seq)]) * size_t(cross_.n_ctx()) * cache->nb[1], k.size() * sizeof(float));
        out.keys.push_back(std::move(k));
    }
    return out;
}

void TransformerDecoderState::reorder(const std::vector<int> & seqs, const std::vector<int> & sources) {
    std::vector<int> shift(seqs.size()), cross(seqs.size());
    for (size_t j = 0; j < seqs.size(); ++j) {
        const int from = seqs[size_t(sources.at(j))];
        shift[j] = position_shift_[size_t(from)];
        cross[j] = cross_of_[size_t(from)];
    }
    self_.gather(seqs, sources);
    // The encoder rows are not copied: a sequence reads those of the one it came from.
    for (size_t j = 0; j < seqs.size(); ++j) {
        position_shift_[size_t(seqs[j])] = shift[j];
        cross_of_[size_t(seqs[j])]       = cross[j];
    }
}

} // namespace transcribe
