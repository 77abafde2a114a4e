// Hotwords: NeMo's phrase-boosting tree (GPU-PB: context_biasing/context_graph_universal.py's ContextGraph,
// turned into a back-off acceptor by boosting_graph_batched.py, queried as NGramGPULanguageModel.advance
// does) and the way NeMo's greedy decoders fuse it (label-looping RNNT/TDT, greedy_batch CTC): the
// acoustic model decides blank or not; where it says a token, the token is the argmax of
// logit + weight x boost.
//
// The tree: a trie of the phrases' token ids with Aho-Corasick fail arcs. Entering a node scores its
// token_score (context_score for a phrase's first token; context_score x depth_scaling + log(depth + 1)
// after it; the largest where phrases share the node). A token with no arc from a node falls back along
// the fail arcs, each hop undoing what the path had gained (fail.node_score - node.node_score; nothing
// after a complete phrase), down to the root, whose every other token scores unk_score and stays there.
#pragma once

#include "core/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace transcribe {

// BoostingTreeModelConfig's knobs, with its defaults.
struct PhraseBoostingOptions {
    float context_score    = 1.0f;
    float depth_scaling    = 1.0f;
    float unk_score        = 0.0f;
    float score_per_phrase = 0.0f; // > 0: score_per_phrase / (characters of the phrase), rounded to 0.01
    bool  uniform_weights  = false;
};

class PhraseBoostingTree {
public:
    // PHRASES as token ids (NeMo: tokenizer.text_to_ids(phrase)), their TEXTS for score_per_phrase;
    // VOCAB: the tokens boosting scores (the blank excluded).
    PhraseBoostingTree(const std::vector<std::vector<int32_t>> & phrases, const std::vector<std::string> & texts,
                       int vocab, const PhraseBoostingOptions & options = {});
    // The phrases of a comma- or newline-separated list (blank entries skipped), tokenized.
    static PhraseBoostingTree from_text(const std::vector<std::string> & phrases, const Tokenizer & tokenizer,
                                        int vocab, const PhraseBoostingOptions & options = {});

    static constexpr int32_t kStart = 0;
    int vocab() const { return vocab_; }
    int n_states() const { return int(nodes_.size()); }

    // Every token's score and next state from STATE (NeMo's _advance_pytorch, in float32).
    void advance(int32_t state, std::vector<float> & scores, std::vector<int32_t> & next) const;

private:
    struct Node {
        std::vector<std::pair<int32_t, int32_t>> children; // (token, node), sorted by token
        float   arc_weight = 0;    // what entering this node scores
        float   backoff_w  = 0;    // what falling back from it scores
        int32_t backoff_to = kStart;
        double  token_score = 0, node_score = 0; // the graph's own (double) values, while building
        bool    is_end = false;
        int     depth  = 0;
    };
    int32_t child(int32_t node, int32_t token) const;

    std::vector<Node> nodes_;
    int               vocab_ = 0;
    float             unk_score_ = 0;
};

// One decode's boosting: the tree's state along the emitted tokens and its scores from there.
class PhraseBoost {
public:
    PhraseBoost(const PhraseBoostingTree & tree, float weight);
    void reset(); // the start state
    // The token among the VOCAB first of LOGITS with the largest logit + weight x score (EXCLUDE: a token
    // not to pick, or -1); ties to the lowest id, as torch's max.
    int32_t pick(const float * logits, int32_t exclude = -1) const;
    void    emit(int32_t token); // the tree follows an emitted token

private:
    const PhraseBoostingTree & tree_;
    float                      weight_;
    int32_t                    state_ = PhraseBoostingTree::kStart;
    std::vector<float>         scores_;
    std::vector<int32_t>       next_;
};

} // namespace transcribe
