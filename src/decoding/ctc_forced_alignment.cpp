#include "ctc_forced_alignment.h"

#include <algorithm>

namespace transcribe {

namespace {

// get_utt_obj's segments: cut after a separator that a space follows (so "a.m." stays whole).
std::vector<std::string> segments_of(const std::string & text) {
    std::vector<std::string> out;
    long last = -1;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        const bool separator = c == '.' || c == '?' || c == '!';
        if (separator && i + 1 < text.size() && text[i + 1] == ' ') {
            out.push_back(strip_whitespace(text.substr(size_t(last + 1), i + 1 - size_t(last + 1))));
            last = long(i) + 1;
        }
    }
    if (last < long(text.size())) {
        out.push_back(strip_whitespace(text.substr(size_t(last + 1))));
    }
    out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
    return out;
}

// Python's str.split(SEP): empty items where separators meet or end the text.
std::vector<std::string> split(const std::string & s, const std::string & sep) {
    std::vector<std::string> out;
    size_t a = 0;
    for (size_t b; (b = s.find(sep, a)) != std::string::npos; a = b + sep.size()) {
        out.push_back(s.substr(a, b - a));
    }
    out.push_back(s.substr(a));
    return out;
}

// get_utt_obj's handling of the unknown mark (UNK_WORD: what the unknown id decodes to, stripped; the
// "\u2047" of a SentencePiece model's transcript): the text around it is tokenized piece by piece with
// the unknown id itself between.
struct UnknownMark {
    int32_t     id;
    std::string word;

    // A segment's token count (its sub-segments between marks, each stripped and tokenized, a token per mark).
    size_t segment_tokens(const std::string & segment, const Tokenizer & tok) const {
        if (word.empty()) {
            return tok.encode(segment).size();
        }
        const std::vector<std::string> parts = split(segment, word);
        size_t n = parts.size() - 1;
        for (const std::string & p : parts) {
            n += tok.encode(strip_whitespace(p)).size();
        }
        return n;
    }

    // A word's ids: the mark alone is the unknown id; a word holding marks is its pieces between them, each
    // tokenized on its own, the unknown id between.
    std::vector<int32_t> word_ids(const std::string & w, const Tokenizer & tok) const {
        if (word.empty() || w.find(word) == std::string::npos) {
            return tok.encode(w);
        }
        if (w == word) {
            return {id};
        }
        std::vector<int32_t> ids;
        for (const std::string & p : split(w, word)) {
            const std::vector<int32_t> part = tok.encode(p);
            ids.insert(ids.end(), part.begin(), part.end());
            ids.push_back(id);
        }
        ids.pop_back();
        return ids;
    }
};

} // namespace

AlignmentChain alignment_chain(const std::string & text, const Tokenizer & tok, int32_t blank, int frames) {
    AlignmentChain chain;
    chain.states = {blank};
    if (text.empty() || int(tok.encode(text).size()) > frames) {
        return chain;
    }
    const UnknownMark unknown {tok.unknown_id(), strip_whitespace(tok.decode({tok.unknown_id()}))};
    int segment_s = 1, word_s = 1; // state 0 is the leading blank
    for (const std::string & segment : segments_of(text)) {
        AlignmentChain::Segment seg;
        const std::vector<std::string> words = split(segment, " ");
        std::vector<std::vector<int32_t>> ids;
        for (const std::string & w : words) {
            ids.push_back(unknown.word_ids(w, tok));
        }
        seg.span = {segment, segment_s, segment_s + int(unknown.segment_tokens(segment, tok)) * 2 - 2};
        segment_s = seg.span.s_end + 2;
        for (size_t i = 0; i < words.size(); ++i) {
            const int s_end = word_s + int(ids[i].size()) * 2 - 2;
            seg.words.push_back({words[i], word_s, s_end});
            word_s = s_end + 2;
            for (int32_t id : ids[i]) {
                chain.states.push_back(id);
                chain.states.push_back(blank);
            }
        }
        chain.segments.push_back(std::move(seg));
    }
    return chain;
}

std::vector<int> ctc_viterbi(const float * lp, int T, int V, const std::vector<int32_t> & y) {
    const int U = int(y.size());
    if (T <= 0 || U == 0) {
        return {};
    }
    constexpr float kPad = -3.4e38f;
    std::vector<float> v(static_cast<size_t>(U), kPad), next(static_cast<size_t>(U));
    for (int u = 0; u < std::min(U, 2); ++u) {
        v[size_t(u)] = lp[y[size_t(u)]];
    }
    // A state may skip back two only between two different tokens (never over a token, never from a
    // blank to a blank).
    std::vector<char> no_skip(size_t(U), 0);
    for (int u = 2; u < U; ++u) {
        no_skip[size_t(u)] = y[size_t(u)] == y[size_t(u - 2)];
    }
    std::vector<int8_t> back(size_t(T) * size_t(U), 0);
    for (int t = 1; t < T; ++t) {
        const float * row = lp + size_t(t) * size_t(V);
        for (int u = 0; u < U; ++u) {
            const float e     = row[y[size_t(u)]];
            const float stay  = v[size_t(u)] + e;
            const float step  = (u >= 1 ? v[size_t(u - 1)] : kPad) + e;
            const float skip  = (u >= 2 && !no_skip[size_t(u)] ? v[size_t(u - 2)] : kPad) + e;
            int8_t      b     = 0;
            float       best  = stay;
            if (step > best) {
                best = step;
                b    = 1;
            }
            if (skip > best) {
                best = skip;
                b    = 2;
            }
            next[size_t(u)] = best;
            back[size_t(t) * size_t(U) + size_t(u)] = b;
        }
        v.swap(next);
    }
    int u = U == 1 ? 0 : (v[size_t(U - 1)] > v[size_t(U - 2)] ? U - 1 : U - 2);
    std::vector<int> path(static_cast<size_t>(T));
    path[size_t(T - 1)] = u;
    for (int t = T - 1; t > 0; --t) {
        u -= back[size_t(t) * size_t(U) + size_t(u)];
        path[size_t(t - 1)] = u;
    }
    return path;
}

std::vector<AlignedSegment> ctc_forced_alignment(const float * log_probs, int T, int V, const std::string & text,
                                                 const Tokenizer & tok, int32_t blank) {
    const AlignmentChain chain = alignment_chain(text, tok, blank, T);
    if (chain.segments.empty()) {
        return {};
    }
    const std::vector<int> path = ctc_viterbi(log_probs, T, V, chain.states);
    // add_t_start_end_to_utt_obj: where each state is first and last held (-1: never; only blanks skip).
    std::vector<int64_t> first(chain.states.size(), -1), last(chain.states.size(), -1);
    int prev = -1;
    for (size_t t = 0; t < path.size(); ++t) {
        if (path[t] > prev) {
            first[size_t(path[t])] = int64_t(t);
            if (prev >= 0) {
                last[size_t(prev)] = int64_t(t) - 1;
            }
        }
        prev = path[t];
    }
    last[size_t(prev)] = int64_t(path.size()) - 1;
    // An empty word's span (s_end = s_start - 2) may name no state or one another span holds, as in NFA.
    auto held = [](const std::vector<int64_t> & at, int s) { return s >= 0 && size_t(s) < at.size() ? at[size_t(s)] : -1; };
    auto span = [&](const AlignmentChain::Span & s) {
        const int64_t a = held(first, s.s_start), b = held(last, s.s_end);
        return AlignedSpan {s.text, a, b < 0 ? -1 : b + 1};
    };
    std::vector<AlignedSegment> out;
    for (const AlignmentChain::Segment & s : chain.segments) {
        AlignedSegment seg {span(s.span), {}};
        for (const AlignmentChain::Span & w : s.words) {
            seg.words.push_back(span(w));
        }
        out.push_back(std::move(seg));
    }
    return out;
}

} // namespace transcribe
