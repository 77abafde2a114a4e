#include "qwen3.h"

#include "core/error.h"
#include "ops/matmul.h"
#include "ops/attention.h"
#include "ops/norms.h"

#include "ggml-alloc.h"

#include <cmath>

namespace transcribe {

namespace {
constexpr std::initializer_list<ggml_type> F32 = {GGML_TYPE_F32};
constexpr int KV_PAD = 256; // decode graphs exist per multiple of this many cache rows
const ggml_fp16_t kMaskOpen   = ggml_fp32_to_fp16(0.0f);
const ggml_fp16_t kMaskClosed = ggml_fp32_to_fp16(-INFINITY);

// The inputs a graph of T columns attends with (positions, cache rows, mask over n_kv rows), over these caches.
Qwen3::Attend attend_inputs(Graph & g, int64_t T, int64_t n_kv, const std::vector<ggml_tensor *> & k_cache,
                            const std::vector<ggml_tensor *> & v_cache, bool decode) {
    Qwen3::Attend at;
    at.pos     = g.input("pos", GGML_TYPE_I32, T);
    at.kv_idx  = g.input("kv_idx", GGML_TYPE_I64, T);
    at.mask    = g.input("mask", GGML_TYPE_F16, n_kv, T);
    at.k_cache = &k_cache;
    at.v_cache = &v_cache;
    at.n_kv    = n_kv;
    at.decode  = decode;
    return at;
}

// The logits and their argmax (which stays on the device) as the graph's outputs.
void output_logits(Graph & g, ggml_tensor * logits) {
    g.output(logits, "logits");
    g.output(ggml_argmax(g.ctx(), logits), "argmax");
}
} // namespace

Qwen3HParams Qwen3HParams::from_file(const ModelFile & f) {
    Qwen3HParams hp;
    hp.n_layers    = int(f.get_u32("llm.n_layers"));
    hp.hidden      = int(f.get_u32("llm.hidden"));
    hp.n_heads     = int(f.get_u32("llm.n_heads"));
    hp.n_kv_heads  = int(f.get_u32("llm.n_kv_heads"));
    hp.head_dim    = int(f.get_u32("llm.head_dim"));
    hp.ff_dim      = int(f.get_u32("llm.ff_dim"));
    hp.vocab       = int(f.get_u32("llm.vocab_size"));
    hp.head_rows   = int(f.get_u32("llm.head_rows", uint32_t(hp.vocab)));
    hp.n_ctx_train = int(f.get_u32("llm.n_ctx_train"));
    hp.rms_eps     = f.get_f32("llm.rms_eps");
    hp.rope_theta  = f.get_f32("llm.rope_theta");
    if (hp.n_layers <= 0 || hp.n_layers > 1024 || hp.hidden <= 0 || hp.n_heads <= 0 || hp.n_kv_heads <= 0 ||
        hp.n_heads % hp.n_kv_heads || hp.head_dim <= 0 || hp.head_dim % 2 || hp.ff_dim <= 0 || hp.vocab <= 0 ||
        hp.head_rows <= 0 || hp.n_ctx_train <= 0) {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: invalid LLM hyper-parameters", f.path().c_str());
    }
    return hp;
}

Qwen3::Qwen3(const ModelFile & f, const Qwen3HParams & hp, const std::string & p, const std::string & embd_name) : hp_(hp) {
    const int64_t h = hp.hidden, q_dim = int64_t(hp.n_heads) * hp.head_dim, kv_dim = int64_t(hp.n_kv_heads) * hp.head_dim;
    tok_embd_ = f.embedding_weight(embd_name, {h, hp.vocab});
    out_norm_ = f.tensor(p + ".output_norm.weight", {h}, F32);
    // Untied models (Qwen3-ASR) keep their own head (a classifier's its own rows: Qwen3-ForcedAligner's
    // timestamp classes); the others read logits off the token table.
    if (f.find(p + ".output.weight")) {
        output_ = f.matmul_weight(p + ".output.weight", {h, hp.head_rows});
    } else if (hp.head_rows == hp.vocab) {
        output_ = tok_embd_;
    } else {
        fail(TRANSCRIBE_ERR_BAD_GGUF, "model file %s: a head of %d rows but no %s.output.weight", f.path().c_str(), hp.head_rows,
             p.c_str());
    }
    layers_.resize(size_t(hp.n_layers));
    for (int i = 0; i < hp.n_layers; ++i) {
        const std::string b = p + ".blk." + std::to_string(i) + ".";
        Layer & l  = layers_[size_t(i)];
        l.attn_norm = f.tensor(b + "attn_norm.weight", {h}, F32);
        l.q         = projection(f, b + "attn_q", h, q_dim);
        l.k         = f.matmul_weight(b + "attn_k.weight", {h, kv_dim});
        l.v         = projection(f, b + "attn_v", h, kv_dim);
        l.o         = f.matmul_weight(b + "attn_output.weight", {q_dim, h});
        l.q_norm    = f.tensor(b + "attn_q_norm.weight", {hp.head_dim}, F32);
        l.k_norm    = f.tensor(b + "attn_k_norm.weight", {hp.head_dim}, F32);
        l.ffn_norm  = f.tensor(b + "ffn_norm.weight", {h}, F32);
        l.gate      = f.matmul_weight(b + "ffn_gate.weight", {h, hp.ff_dim});
        l.up        = f.matmul_weight(b + "ffn_up.weight", {h, hp.ff_dim});
        l.down      = f.matmul_weight(b + "ffn_down.weight", {hp.ff_dim, h});
    }
}

Qwen3::Projection Qwen3::projection(const ModelFile & f, const std::string & name, int64_t n_in, int64_t n_out) const {
    Projection p;
    p.w = f.matmul_weight(name + ".weight", {n_in, n_out});
    if (const ggml_tensor * a = f.find(name + ".lora_a")) {
        const int64_t rank = a->ne[1];
        p.lora_a = f.tensor(name + ".lora_a", {n_in, rank}, F32);
        p.lora_b = f.tensor(name + ".lora_b", {rank, n_out}, F32);
    }
    return p;
}

ggml_tensor * Qwen3::with_lora(ggml_context * ctx, const Projection & p, ggml_tensor * y, ggml_tensor * x) const {
    return p.lora_a ? ggml_add(ctx, y, ops::matmul(ctx, p.lora_b, ops::matmul(ctx, p.lora_a, x))) : y;
}

ggml_tensor * Qwen3::build(ggml_context * ctx, ggml_cgraph * gf, ggml_tensor * x, const Attend & at, int64_t n_out) const {
    const int64_t T = x->ne[1], hd = hp_.head_dim, nh = hp_.n_heads, nkv = hp_.n_kv_heads;
    const float   scale = 1.0f / std::sqrt(float(hd));
    auto rms_norm = [&](ggml_tensor * t, ggml_tensor * w) { return ops::rms_norm(ctx, t, w, hp_.rms_eps); };
    auto rope = [&](ggml_tensor * t) {
        return ggml_rope_ext(ctx, t, at.pos, nullptr, int(hd), GGML_ROPE_TYPE_NEOX, hp_.n_ctx_train, hp_.rope_theta, 1.0f,
                             0.0f, 1.0f, 0.0f, 0.0f);
    };
    for (size_t il = 0; il < layers_.size(); ++il) {
        const Layer & l = layers_[il];
        ggml_tensor * h   = rms_norm(x, l.attn_norm);
        const auto    qkv = ops::matmuls(ctx, {l.q.w, l.k, l.v.w}, h);
        ggml_tensor * q   = rope(rms_norm(ggml_reshape_3d(ctx, with_lora(ctx, l.q, qkv[0], h), hd, nh, T), l.q_norm));
        ggml_tensor * k   = rope(rms_norm(ggml_reshape_3d(ctx, qkv[1], hd, nkv, T), l.k_norm));
        ggml_tensor * v   = with_lora(ctx, l.v, qkv[2], h);

        // Write this step's K/V into the cache, then attend over the first n_kv cache rows; the views
        // hang off the set_rows results so the writes are ordered before the reads. Without a cache (one
        // pass, nothing kept) the graph's own K/V are attended, in F32.
        ggml_tensor * k_all = ggml_reshape_2d(ctx, k, hd * nkv, T), * v_all = nullptr;
        if (at.k_cache) {
            k_all = ggml_set_rows(ctx, (*at.k_cache)[il], k_all, at.kv_idx);
            v_all = ggml_set_rows(ctx, (*at.v_cache)[il], v, at.kv_idx);
            ggml_build_forward_expand(gf, k_all);
            ggml_build_forward_expand(gf, v_all);
        } else {
            v_all = ggml_is_contiguous(v) ? v : ggml_cont(ctx, v); // rows the kernel reads whole
        }
        ggml_tensor * o = at.decode
            ? ops::decode_attention(ctx, q, k_all, v_all, at.pos, at.kv_idx, at.mask, at.n_kv, scale)
            : ops::causal_attention(ctx, q, k_all, v_all, at.mask, at.n_kv, scale, at.k_cache ? nullptr : l.o); // [hd, nh, T]
        ggml_tensor * o2 = ggml_reshape_2d(ctx, o, hd * nh, T);
        if (il + 1 == layers_.size() && n_out > 0 && n_out < T) {
            // Nothing reads the other rows past the last attention: skip their projection and FFN.
            o2 = ggml_view_2d(ctx, o2, o2->ne[0], n_out, o2->nb[1], size_t(T - n_out) * o2->nb[1]);
            x  = ggml_view_2d(ctx, x, x->ne[0], n_out, x->nb[1], size_t(T - n_out) * x->nb[1]);
        }
        x = ggml_add(ctx, x, ops::matmul(ctx, l.o, o2));

        ggml_tensor * h2 = rms_norm(x, l.ffn_norm);
        const auto    gate_up = ops::matmuls(ctx, {l.gate, l.up}, h2);
        ggml_tensor * ff = ggml_swiglu_split(ctx, gate_up[0], gate_up[1]);
        x = ggml_add(ctx, x, ops::matmul(ctx, l.down, ff));
    }
    return rms_norm(x, out_norm_);
}

size_t Qwen3Decoder::bytes_per_sequence(const Qwen3HParams & hp, ggml_type kv_type, int n_ctx) {
    return 2 * size_t(hp.n_layers) * ggml_row_size(kv_type, int64_t(hp.head_dim) * hp.n_kv_heads) * size_t(n_ctx);
}

Qwen3Decoder::Qwen3Decoder(const Qwen3 & lm, Executor & exec, ggml_type kv_type, int n_ctx, int n_seq)
    : lm_(lm),
      exec_(exec),
      cache_(exec, lm.hparams().n_layers, int64_t(lm.hparams().head_dim) * lm.hparams().n_kv_heads, kv_type, n_ctx, n_seq,
             "KV cache") {}

Graph & Qwen3Decoder::prompt_graph(int seq, const std::vector<Piece> & prompt, int n_select) {
    std::string key = std::to_string(seq) + ":" + std::to_string(n_select) + ":";
    int T = 0;
    for (const Piece & p : prompt) {
        key += (p.rows ? "e" : "i") + std::to_string(p.length()) + ",";
        T += p.length();
    }
    if (seq >= 0) {
        cache_.check_seq(seq);
        cache_.restart(seq, T);
    }
    auto & slot = prefill_graphs_[key];
    if (slot) {
        return *slot;
    }
    if (prefill_graphs_.size() > size_t(8 + cache_.n_seq())) { // a few audio lengths recur; don't hoard graphs for every one
        prefill_graphs_.clear();
        return prompt_graph(seq, prompt, n_select);
    }
    auto g = std::make_unique<Graph>(16384, "prefill");
    ggml_context * ctx = g->ctx();
    ggml_tensor * x = nullptr;
    for (size_t i = 0; i < prompt.size(); ++i) {
        const std::string name = "piece" + std::to_string(i);
        ggml_tensor * part = prompt[i].rows
            ? g->input(name.c_str(), GGML_TYPE_F32, lm_.hparams().hidden, prompt[i].n_rows)
            : lm_.embed(ctx, g->input(name.c_str(), GGML_TYPE_I32, int64_t(prompt[i].ids.size())));
        x = x ? ggml_concat(ctx, x, part, 1) : part;
    }
    g->output(x, "input_embd");
    // The prompt sees its own sequence's stretch of the cache as a cache of its own (none: no cache).
    const std::vector<ggml_tensor *> k_seq = seq >= 0 ? cache_.stretch(ctx, cache_.k(), seq) : std::vector<ggml_tensor *> {};
    const std::vector<ggml_tensor *> v_seq = seq >= 0 ? cache_.stretch(ctx, cache_.v(), seq) : std::vector<ggml_tensor *> {};
    Qwen3::Attend at = attend_inputs(*g, T, T, k_seq, v_seq, false);
    if (seq < 0) {
        at.k_cache = at.v_cache = nullptr;
    }
    if (n_select > 0) {
        ggml_tensor * h = ggml_get_rows(ctx, lm_.build(ctx, g->graph(), x, at), g->input("select", GGML_TYPE_I32, n_select));
        output_logits(*g, lm_.logits(ctx, h));
    } else {
        output_logits(*g, lm_.logits(ctx, lm_.build(ctx, g->graph(), x, at, 1)));
    }
    slot = std::move(g);
    return *slot;
}

void Qwen3Decoder::run_prompt(Graph & g, int seq, const std::vector<Piece> & prompt, const std::vector<int32_t> & select) {
    int T = 0;
    for (const Piece & p : prompt) {
        T += p.length();
    }
    exec_.compute(g, [&] {
        for (size_t i = 0; i < prompt.size(); ++i) {
            ggml_tensor * in = g.get(("piece" + std::to_string(i)).c_str());
            if (prompt[i].rows) {
                tensor_set(in, prompt[i].rows, size_t(prompt[i].n_rows) * size_t(lm_.hparams().hidden) * sizeof(float));
            } else {
                tensor_set(in, prompt[i].ids);
            }
        }
        std::vector<int32_t> pos(static_cast<size_t>(T));
        std::vector<int64_t> idx(static_cast<size_t>(T));
        for (int i = 0; i < T; ++i) {
            pos[size_t(i)] = i;
            idx[size_t(i)] = i;
        }
        tensor_set(g.get("pos"), pos);
        if (ggml_tensor * rows = g.get("kv_idx"); rows->buffer) { // unallocated without a cache
            tensor_set(rows, idx);
        }
        if (!select.empty()) {
            tensor_set(g.get("select"), select);
        }
        if (ggml_tensor * m = g.get("mask"); m->buffer) { // unallocated where no layer reads it (causal_attention_op)
            std::vector<ggml_fp16_t> mask(size_t(T) * size_t(T));
            for (int i = 0; i < T; ++i) {
                for (int j = 0; j < T; ++j) {
                    mask[size_t(i) * size_t(T) + size_t(j)] = j <= i ? kMaskOpen : kMaskClosed;
                }
            }
            tensor_set(m, mask);
        }
    });
    if (seq >= 0) {
        cache_.set_past(seq, T);
    }
}

int32_t Qwen3Decoder::prefill(int seq, const std::vector<Piece> & prompt, std::vector<float> * logits,
                              std::vector<float> * input_embd) {
    Graph & g = prompt_graph(seq, prompt, 0);
    run_prompt(g, seq, prompt, {});
    int32_t next = 0;
    ggml_backend_tensor_get(g.get("argmax"), &next, 0, sizeof(next));
    if (logits) {
        tensor_get_f32(g.get("logits"), *logits);
    }
    if (input_embd) {
        tensor_get_f32(g.get("input_embd"), *input_embd);
    }
    return next;
}

std::vector<float> Qwen3Decoder::logits_at(const std::vector<Piece> & prompt, const std::vector<int32_t> & positions) {
    std::vector<float> out;
    if (positions.empty()) {
        return out;
    }
    int T = 0;
    for (const Piece & p : prompt) {
        T += p.length();
    }
    for (int32_t p : positions) {
        if (p < 0 || p >= T) {
            fail(TRANSCRIBE_ERR_INVALID_ARG, "logits at position %d of a %d-position prompt", p, T);
        }
    }
    Graph & g = prompt_graph(-1, prompt, int(positions.size()));
    run_prompt(g, -1, prompt, positions);
    tensor_get_f32(g.get("logits"), out);
    return out;
}

Graph & Qwen3Decoder::decode_graph(int n_batch, int n_kv) {
    auto & slot = decode_graphs_[{n_batch, n_kv}];
    if (slot) {
        return *slot;
    }
    if (decode_graphs_.size() > 128) { // column counts x cache lengths: rebuilt as they come back, not hoarded
        decode_graphs_.clear();
        return decode_graph(n_batch, n_kv);
    }
    auto g = std::make_unique<Graph>(16384, "decode");
    ggml_context * ctx = g->ctx();
    ggml_tensor * x = lm_.embed(ctx, g->input("token", GGML_TYPE_I32, n_batch));
    const Qwen3::Attend at = attend_inputs(*g, n_batch, n_kv, cache_.k(), cache_.v(), true);
    output_logits(*g, lm_.logits(ctx, lm_.build(ctx, g->graph(), x, at)));
    // Whether any op reads the mask (ggml's flash attention), or our kernel finds each sequence's rows
    // itself: then the graph does not depend on the cache length.
    decode_reads_mask_ = false;
    for (int i = 0; i < ggml_graph_n_nodes(g->graph()) && !decode_reads_mask_; ++i) {
        const ggml_tensor * node = ggml_graph_node(g->graph(), i);
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            decode_reads_mask_ = decode_reads_mask_ || node->src[j] == at.mask;
        }
    }
    slot = std::move(g);
    return *slot;
}

void Qwen3Decoder::step(const std::vector<int> & seqs, const std::vector<int32_t> & tokens, std::vector<int32_t> & next,
                        std::vector<std::vector<float>> * logits) {
    const size_t B = seqs.size();
    if (B == 0 || tokens.size() != B) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "a decode step of %zu sequences with %zu tokens", B, tokens.size());
    }
    // The rows a masked attention reads: up to the last one written, padded so few graphs serve; one
    // graph per batch size where no op reads the mask.
    const int n_kv = cache_.place_append(seqs, decode_reads_mask_ ? KV_PAD : cache_.n_ctx() * cache_.n_seq());
    Graph &   g    = decode_graph(int(B), n_kv);
    exec_.compute(g, [&] {
        tensor_set(g.get("token"), tokens);
        tensor_set(g.get("pos"), cache_.pos());
        tensor_set(g.get("kv_idx"), cache_.rows());
        cache_.set_mask(g.get("mask"), n_kv); // unallocated where no layer reads it (decode_attention_op)
    });
    read_step_outputs(g, B, next, logits);
    cache_.advance(seqs);
}

void Qwen3Decoder::rewind(int seq, int n_past) { cache_.rewind(seq, n_past); }

} // namespace transcribe
