#include "ctc_forced_alignment.h"

#include <algorithm>
#include <map>

namespace transcribe {

namespace {

std::string strip(const std::string & s) {
    const char * ws = " \t\n\r\f\v";
    const size_t a = s.find_first_not_of(ws);
    return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(ws) - a + 1);
}

// get_utt_obj's segments: cut after a separator that a space follows (so "a.m." stays whole).
std::vector<std::string> segments_of(const std::string & text) {
    std::vector<std::string> out;
    long last = -1;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        const bool separator = c == '.' || c == '?' || c == '!';
        if (separator && i + 1 < text.size() && text[i + 1] == ' ') {
            out.push_back(strip(text.substr(size_t(last + 1), i + 1 - size_t(last + 1))));
            last = long(i) + 1;
        }
    }
    if (last < long(text.size())) {
        out.push_back(strip(text.substr(size_t(last + 1))));
    }
    out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
    return out;
}

// Python's str.split(" "): empty items where spaces repeat.
std::vector<std::string> split_spaces(const std::string & s) {
    std::vector<std::string> out;
    size_t a = 0;
    for (size_t b; (b = s.find(' ', a)) != std::string::npos; a = b + 1) {
        out.push_back(s.substr(a, b - a));
    }
    out.push_back(s.substr(a));
    return out;
}

} // namespace

AlignmentChain alignment_chain(const std::string & text, const Tokenizer & tok, int32_t blank, int frames) {
    AlignmentChain chain;
    chain.states = {blank};
    if (text.empty() || int(tok.encode(text).size()) > frames) {
        return chain;
    }
    int segment_s = 1, word_s = 1; // state 0 is the leading blank
    for (const std::string & segment : segments_of(text)) {
        AlignmentChain::Segment seg;
        const std::vector<std::string> words = split_spaces(segment);
        std::vector<std::vector<int32_t>> ids;
        size_t n_tokens = 0;
        for (const std::string & w : words) {
            ids.push_back(tok.encode(w));
            n_tokens += ids.back().size();
        }
        seg.span = {segment, segment_s, segment_s + int(n_tokens) * 2 - 2};
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
    // add_t_start_end_to_utt_obj: where each state is first and last held.
    std::map<int, int64_t> first, last;
    int prev = -1;
    for (size_t t = 0; t < path.size(); ++t) {
        if (path[t] > prev) {
            first[path[t]] = int64_t(t);
            if (prev >= 0) {
                last[prev] = int64_t(t) - 1;
            }
        }
        prev = path[t];
    }
    last[prev] = int64_t(path.size()) - 1;
    auto span = [&](const AlignmentChain::Span & s) {
        AlignedSpan a {s.text, -1, -1};
        if (first.count(s.s_start)) {
            a.first_frame = first[s.s_start];
        }
        if (last.count(s.s_end)) {
            a.end_frame = last[s.s_end] + 1;
        }
        return a;
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
