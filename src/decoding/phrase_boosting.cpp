#include "phrase_boosting.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <deque>

namespace transcribe {

namespace {
// The number of characters (code points) of UTF-8 text, as Python's len() of the phrase.
size_t characters(const std::string & s) {
    size_t n = 0;
    for (unsigned char c : s) {
        n += (c & 0xC0) != 0x80;
    }
    return n;
}
} // namespace

int32_t PhraseBoostingTree::child(int32_t node, int32_t token) const {
    const auto & c = nodes_[size_t(node)].children;
    auto it = std::lower_bound(c.begin(), c.end(), std::make_pair(token, int32_t(-1)));
    return it != c.end() && it->first == token ? it->second : -1;
}

PhraseBoostingTree::PhraseBoostingTree(const std::vector<std::vector<int32_t>> & phrases,
                                       const std::vector<std::string> & texts, int vocab,
                                       const PhraseBoostingOptions & o)
    : vocab_(vocab), unk_score_(o.unk_score) {
    if (texts.size() != phrases.size()) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "phrase boosting: %zu phrases, %zu texts", phrases.size(), texts.size());
    }
    nodes_.emplace_back(); // the root
    // ContextGraph.build: the trie, scores in double as Python computes them. Children keep their
    // insertion order here (Python dicts do, and the fail arcs are filled in that order).
    std::vector<std::vector<std::pair<int32_t, int32_t>>> ordered(1);
    for (size_t p = 0; p < phrases.size(); ++p) {
        double score = 0;
        if (o.score_per_phrase != 0) {
            score = std::round(double(o.score_per_phrase) / double(std::max<size_t>(1, characters(texts[p]))) * 100.0) / 100.0;
        }
        const double context = score == 0.0 ? double(o.context_score) : score;
        int32_t node = 0;
        const std::vector<int32_t> & tokens = phrases[p];
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int32_t token = tokens[i];
            if (token < 0 || token >= vocab) {
                fail(TRANSCRIBE_ERR_INVALID_ARG, "phrase boosting: token %d outside the vocabulary of %d", token, vocab);
            }
            int32_t next = -1;
            for (const auto & [t, n] : ordered[size_t(node)]) {
                if (t == token) {
                    next = n;
                }
            }
            const bool last = i + 1 == tokens.size();
            if (next < 0) {
                Node n;
                n.token_score = i > 0 && !o.uniform_weights ? context * double(o.depth_scaling) + std::log(double(i + 1)) : context;
                n.node_score  = nodes_[size_t(node)].node_score + n.token_score;
                n.is_end      = last;
                n.depth       = int(i) + 1;
                next          = int32_t(nodes_.size());
                nodes_.push_back(n);
                ordered.emplace_back();
                ordered[size_t(node)].emplace_back(token, next);
            } else {
                Node & n     = nodes_[size_t(next)];
                n.token_score = std::max(context, n.token_score);
                n.node_score  = nodes_[size_t(node)].node_score + n.token_score;
                n.is_end      = last || n.is_end;
            }
            node = next;
        }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
        nodes_[i].children = ordered[i];
        std::sort(nodes_[i].children.begin(), nodes_[i].children.end());
    }
    // _fill_fail_output: the fail arcs, breadth first.
    std::vector<int32_t> fail_of(nodes_.size(), 0);
    std::deque<int32_t> queue;
    for (const auto & tc : ordered[0]) {
        queue.push_back(tc.second);
    }
    while (!queue.empty()) {
        const int32_t current = queue.front();
        queue.pop_front();
        for (const auto & [token, node] : ordered[size_t(current)]) {
            int32_t f = fail_of[size_t(current)];
            if (child(f, token) >= 0) {
                f = child(f, token);
            } else {
                f = fail_of[size_t(f)];
                while (child(f, token) < 0) {
                    f = fail_of[size_t(f)];
                    if (f == 0) {
                        break;
                    }
                }
                if (child(f, token) >= 0) {
                    f = child(f, token);
                }
            }
            fail_of[size_t(node)] = f;
            queue.push_back(node);
        }
    }
    // BoostingTreeStorage: each node's arc weight and back-off, stored in float32.
    for (size_t i = 1; i < nodes_.size(); ++i) {
        Node & n   = nodes_[i];
        const Node & f = nodes_[size_t(fail_of[i])];
        n.backoff_to = fail_of[i];
        double arc = n.token_score;
        if (n.depth > 1 && o.uniform_weights && n.is_end) {
            arc += n.node_score;
        }
        n.arc_weight = float(arc);
        // No penalty for leaving a complete phrase (the first order: always; deeper: unless uniform).
        const bool free_exit = n.is_end && (n.depth == 1 || !o.uniform_weights);
        n.backoff_w = free_exit ? 0.0f : float(f.node_score - n.node_score);
    }
}

PhraseBoostingTree PhraseBoostingTree::from_text(const std::vector<std::string> & phrases, const Tokenizer & tokenizer,
                                                 int vocab, const PhraseBoostingOptions & options) {
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::string>          texts;
    for (const std::string & raw : phrases) {
        const std::string p = strip_whitespace(raw);
        if (p.empty() || std::find(texts.begin(), texts.end(), p) != texts.end()) {
            continue; // NeMo keys phrases by their text: a repeat is the same phrase
        }
        std::vector<int32_t> t = tokenizer.encode(p);
        if (!t.empty()) {
            ids.push_back(std::move(t));
            texts.push_back(p);
        }
    }
    return PhraseBoostingTree(ids, texts, vocab, options);
}

void PhraseBoostingTree::advance(int32_t state, std::vector<float> & scores, std::vector<int32_t> & next) const {
    scores.assign(size_t(vocab_), 0.0f);
    next.assign(size_t(vocab_), -1);
    float backoff = 0.0f;
    for (int32_t s = state;;) {
        for (const auto & [token, node] : nodes_[size_t(s)].children) {
            if (next[size_t(token)] < 0) {
                scores[size_t(token)] = backoff + nodes_[size_t(node)].arc_weight;
                next[size_t(token)]   = node;
            }
        }
        if (s == kStart) {
            break;
        }
        backoff += nodes_[size_t(s)].backoff_w;
        s = nodes_[size_t(s)].backoff_to;
    }
    for (int v = 0; v < vocab_; ++v) {
        if (next[size_t(v)] < 0) { // the root's own loop for tokens that start no phrase
            scores[size_t(v)] = backoff + unk_score_;
            next[size_t(v)]   = kStart;
        }
    }
}

PhraseBoost::PhraseBoost(const PhraseBoostingTree & tree, float weight) : tree_(tree), weight_(weight) { reset(); }

void PhraseBoost::reset() {
    state_ = PhraseBoostingTree::kStart;
    tree_.advance(state_, scores_, next_);
}

int32_t PhraseBoost::pick(const float * logits, int32_t exclude) const {
    int32_t best = -1;
    float   top  = 0;
    for (int32_t v = 0; v < tree_.vocab(); ++v) {
        const float s = logits[v] + weight_ * scores_[size_t(v)];
        if (v != exclude && (best < 0 || s > top)) {
            best = v;
            top  = s;
        }
    }
    return best;
}

void PhraseBoost::emit(int32_t token) {
    state_ = next_[size_t(token)];
    tree_.advance(state_, scores_, next_);
}

} // namespace transcribe
