#include "whisper_timing.h"

#include "beam_search.h"

#include "unicode.h" // code points of the fetched llama.cpp tree

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace transcribe {

namespace {

constexpr double kTokensPerSecond = 50.0; // TOKENS_PER_SECOND: encoder frames a second
constexpr int    kMedianWidth     = 7;
constexpr char32_t kReplacement   = 0xFFFD;

std::vector<uint32_t> code_points(const std::string & s) {
    try {
        return unicode_cpts_from_utf8(s);
    } catch (const std::exception &) { // decode() output is sanitised UTF-8; this is a guard
        return {};
    }
}

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string strip(const std::string & s) {
    size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) {
        ++b;
    }
    while (e > b && is_space(s[e - 1])) {
        --e;
    }
    return s.substr(b, e - b);
}

// Python's `a in b` for strings: a substring (the empty one included).
bool in(const std::string & a, const std::string & b) { return b.find(a) != std::string::npos; }

void split_on_unicode(const Tokenizer & tok, const std::vector<int32_t> & tokens, std::vector<std::string> & words,
                      std::vector<std::vector<int32_t>> & word_tokens) {
    const std::vector<uint32_t> full = code_points(tok.decode(tokens));
    std::vector<int32_t> current;
    size_t offset = 0;
    for (int32_t t : tokens) {
        current.push_back(t);
        const std::string decoded = tok.decode(current);
        const std::vector<uint32_t> cps = code_points(decoded);
        const auto bad = std::find(cps.begin(), cps.end(), uint32_t(kReplacement));
        const size_t at = offset + size_t(bad - cps.begin());
        if (bad == cps.end() || (at < full.size() && full[at] == kReplacement)) {
            words.push_back(decoded);
            word_tokens.push_back(current);
            current.clear();
            offset += cps.size();
        }
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

} // namespace

double round_to_hundredths(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", x); // glibc rounds the exact binary value, ties to even
    return std::strtod(buf, nullptr);
}

void whisper_dtw(const std::vector<double> & x, int n, int m, std::vector<int> & text_indices, std::vector<int> & time_indices) {
    const size_t W = size_t(m) + 1;
    std::vector<float> cost((size_t(n) + 1) * W, std::numeric_limits<float>::infinity());
    std::vector<int8_t> trace((size_t(n) + 1) * W, -1);
    cost[0] = 0.0f;
    for (int j = 1; j <= m; ++j) {
        for (int i = 1; i <= n; ++i) {
            const float c0 = cost[size_t(i - 1) * W + size_t(j - 1)], c1 = cost[size_t(i - 1) * W + size_t(j)],
                        c2 = cost[size_t(i) * W + size_t(j - 1)];
            float c;
            int8_t t;
            if (c0 < c1 && c0 < c2) {
                c = c0, t = 0;
            } else if (c1 < c0 && c1 < c2) {
                c = c1, t = 1;
            } else {
                c = c2, t = 2;
            }
            cost[size_t(i) * W + size_t(j)]  = float(x[size_t(i - 1) * size_t(m) + size_t(j - 1)] + double(c));
            trace[size_t(i) * W + size_t(j)] = t;
        }
    }
    // backtrace
    for (size_t j = 0; j < W; ++j) {
        trace[j] = 2;
    }
    for (int i = 0; i <= n; ++i) {
        trace[size_t(i) * W] = 1;
    }
    std::vector<std::pair<int, int>> path;
    int i = n, j = m;
    while (i > 0 || j > 0) {
        path.emplace_back(i - 1, j - 1);
        const int8_t t = trace[size_t(i) * W + size_t(j)];
        if (t == 0) {
            --i, --j;
        } else if (t == 1) {
            --i;
        } else {
            --j;
        }
    }
    std::reverse(path.begin(), path.end());
    text_indices.clear();
    time_indices.clear();
    for (const auto & [a, b] : path) {
        text_indices.push_back(a);
        time_indices.push_back(b);
    }
}

void whisper_split_words(const Tokenizer & tok, const WhisperVocab & v, const std::vector<int32_t> & tokens,
                         const std::string & language, std::vector<std::string> & words,
                         std::vector<std::vector<int32_t>> & word_tokens) {
    words.clear();
    word_tokens.clear();
    static const char * const no_spaces[] = {"zh", "ja", "th", "lo", "my", "yue"};
    if (std::any_of(std::begin(no_spaces), std::end(no_spaces), [&](const char * l) { return language == l; })) {
        split_on_unicode(tok, tokens, words, word_tokens);
        return;
    }
    std::vector<std::string> subwords;
    std::vector<std::vector<int32_t>> subword_tokens;
    split_on_unicode(tok, tokens, subwords, subword_tokens);
    static const std::string punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"; // string.punctuation
    for (size_t i = 0; i < subwords.size(); ++i) {
        const bool special    = subword_tokens[i][0] >= v.eot;
        const bool with_space = !subwords[i].empty() && subwords[i][0] == ' ';
        const bool punct      = in(strip(subwords[i]), punctuation);
        if (special || with_space || punct || words.empty()) {
            words.push_back(subwords[i]);
            word_tokens.push_back(subword_tokens[i]);
        } else {
            words.back() += subwords[i];
            word_tokens.back().insert(word_tokens.back().end(), subword_tokens[i].begin(), subword_tokens[i].end());
        }
    }
}

std::vector<WhisperWordTiming> whisper_find_alignment(const WhisperAlignmentInput & in, const std::vector<int32_t> & text_tokens,
                                                      int sot_length, int num_frames, const Tokenizer & tokenizer,
                                                      const WhisperVocab & v, const std::string & language) {
    if (text_tokens.empty()) {
        return {};
    }
    const int T = sot_length + 1 + int(text_tokens.size()) + 1, F = std::min(num_frames / 2, in.n_frames);
    const size_t H = in.head_scores.size();
    // Per head: softmax over the frames, then standardised over the tokens, then the median filter.
    std::vector<float> matrix(size_t(T) * size_t(F), 0.0f);
    std::vector<float> w(size_t(T) * size_t(F));
    for (size_t h = 0; h < H; ++h) {
        const std::vector<float> & s = in.head_scores[h];
        for (int t = 0; t < T; ++t) {
            const float * row = s.data() + size_t(t) * size_t(in.n_frames);
            const float top = *std::max_element(row, row + F);
            double sum = 0.0;
            for (int f = 0; f < F; ++f) {
                sum += std::exp(double(row[f] - top));
            }
            for (int f = 0; f < F; ++f) {
                w[size_t(t) * size_t(F) + size_t(f)] = float(std::exp(double(row[f] - top)) / sum);
            }
        }
        for (int f = 0; f < F; ++f) {
            double mean = 0.0;
            for (int t = 0; t < T; ++t) {
                mean += w[size_t(t) * size_t(F) + size_t(f)];
            }
            mean /= T;
            double var = 0.0;
            for (int t = 0; t < T; ++t) {
                const double d = w[size_t(t) * size_t(F) + size_t(f)] - mean;
                var += d * d;
            }
            const float std_dev = float(std::sqrt(var / T)), m = float(mean);
            for (int t = 0; t < T; ++t) {
                float & x = w[size_t(t) * size_t(F) + size_t(f)];
                x = (x - m) / std_dev;
            }
        }
        const int pad = kMedianWidth / 2;
        for (int t = 0; t < T; ++t) {
            const float * row = w.data() + size_t(t) * size_t(F);
            float window[kMedianWidth];
            for (int f = 0; f < F; ++f) {
                float value = row[f];
                if (F > pad) { // reflect-padded median of width 7 (none for rows this short, as whisper)
                    for (int k = 0; k < kMedianWidth; ++k) {
                        int at = f + k - pad;
                        at = at < 0 ? -at : at >= F ? 2 * (F - 1) - at : at;
                        window[k] = row[at];
                    }
                    std::sort(window, window + kMedianWidth);
                    value = window[pad];
                }
                matrix[size_t(t) * size_t(F) + size_t(f)] += value;
            }
        }
    }
    // The heads' mean, rows sot_length .. T - 2 (<|notimestamps|> and the text), negated for DTW.
    const int N = T - 1 - sot_length;
    std::vector<double> cost(size_t(N) * size_t(F));
    for (int r = 0; r < N; ++r) {
        for (int f = 0; f < F; ++f) {
            cost[size_t(r) * size_t(F) + size_t(f)] = -double(matrix[size_t(sot_length + r) * size_t(F) + size_t(f)] / float(H));
        }
    }
    std::vector<int> text_idx, time_idx;
    whisper_dtw(cost, N, F, text_idx, time_idx);

    std::vector<int32_t> with_eot = text_tokens;
    with_eot.push_back(v.eot);
    std::vector<std::string> words;
    std::vector<std::vector<int32_t>> word_tokens;
    whisper_split_words(tokenizer, v, with_eot, language, words, word_tokens);
    if (word_tokens.size() <= 1) {
        return {};
    }
    std::vector<size_t> boundaries {0};
    for (size_t i = 0; i + 1 < word_tokens.size(); ++i) {
        boundaries.push_back(boundaries.back() + word_tokens[i].size());
    }
    std::vector<double> jump_times;
    for (size_t i = 0; i < text_idx.size(); ++i) {
        if (i == 0 || text_idx[i] != text_idx[i - 1]) {
            jump_times.push_back(time_idx[i] / kTokensPerSecond);
        }
    }
    std::vector<double> probs(text_tokens.size());
    for (size_t i = 0; i < text_tokens.size(); ++i) {
        const float * row = in.logits.data() + size_t(sot_length + int(i)) * size_t(in.n_vocab);
        probs[i] = softmax_at(row, v.eot, text_tokens[i]);
    }
    // Every word but the last (<|endoftext|>): from the time of its first token's jump to the next word's.
    std::vector<WhisperWordTiming> out;
    for (size_t k = 0; k + 1 < boundaries.size(); ++k) {
        const size_t a = boundaries[k], b = boundaries[k + 1];
        if (b >= jump_times.size() || b > probs.size()) { // cannot happen: the path visits every row
            break;
        }
        WhisperWordTiming wt;
        wt.word   = words[k];
        wt.tokens = word_tokens[k];
        wt.start  = jump_times[a];
        wt.end    = jump_times[b];
        double sum = 0.0;
        for (size_t i = a; i < b; ++i) {
            sum += probs[i];
        }
        wt.probability = sum / double(b - a);
        out.push_back(std::move(wt));
    }
    return out;
}

namespace {

void merge_punctuations(std::vector<WhisperWordTiming> & a) {
    static const std::string prepended = "\"'\u201c\u00bf([{-";
    static const std::string appended  = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
    if (a.size() >= 2) {
        long i = long(a.size()) - 2, j = long(a.size()) - 1;
        while (i >= 0) {
            WhisperWordTiming & prev = a[size_t(i)];
            WhisperWordTiming & next = a[size_t(j)];
            if (!prev.word.empty() && prev.word[0] == ' ' && in(strip(prev.word), prepended)) {
                next.word = prev.word + next.word;
                next.tokens.insert(next.tokens.begin(), prev.tokens.begin(), prev.tokens.end());
                prev.word.clear();
                prev.tokens.clear();
            } else {
                j = i;
            }
            --i;
        }
    }
    size_t i = 0, j = 1;
    while (j < a.size()) {
        WhisperWordTiming & prev = a[i];
        WhisperWordTiming & next = a[j];
        if ((prev.word.empty() || prev.word.back() != ' ') && in(next.word, appended)) {
            prev.word += next.word;
            prev.tokens.insert(prev.tokens.end(), next.tokens.begin(), next.tokens.end());
            next.word.clear();
            next.tokens.clear();
        } else {
            i = j;
        }
        ++j;
    }
}

} // namespace

void whisper_add_word_timestamps(std::vector<WhisperTimedSegment> & segments, std::vector<WhisperWordTiming> alignment,
                                 double time_offset, const WhisperVocab & v, double last_speech_timestamp) {
    if (segments.empty()) {
        return;
    }
    std::vector<double> durations;
    for (const WhisperWordTiming & t : alignment) {
        if (t.end - t.start != 0.0) {
            durations.push_back(t.end - t.start);
        }
    }
    const double median_duration = std::min(0.7, durations.empty() ? 0.0 : median(durations));
    const double max_duration    = median_duration * 2;
    if (!durations.empty()) { // long words at sentence ends are cut to max_duration
        static const std::string sentence_end_marks = ".\u3002!\uff01?\uff1f";
        auto is_mark = [](const std::string & w) { return in(w, sentence_end_marks); };
        for (size_t i = 1; i < alignment.size(); ++i) {
            if (alignment[i].end - alignment[i].start > max_duration) {
                if (is_mark(alignment[i].word)) {
                    alignment[i].end = alignment[i].start + max_duration;
                } else if (is_mark(alignment[i - 1].word)) {
                    alignment[i].start = alignment[i].end - max_duration;
                }
            }
        }
    }
    merge_punctuations(alignment);
    size_t word_index = 0;
    for (WhisperTimedSegment & segment : segments) {
        size_t n_text = 0;
        for (int32_t t : segment.tokens) {
            n_text += t < v.eot ? 1 : 0;
        }
        size_t saved_tokens = 0;
        std::vector<WhisperWordTiming> words;
        while (word_index < alignment.size() && saved_tokens < n_text) {
            const WhisperWordTiming & timing = alignment[word_index];
            if (!timing.word.empty()) {
                WhisperWordTiming w = timing;
                w.start = round_to_hundredths(time_offset + timing.start);
                w.end   = round_to_hundredths(time_offset + timing.end);
                words.push_back(std::move(w));
            }
            saved_tokens += timing.tokens.size();
            ++word_index;
        }
        if (!words.empty()) {
            // A first word long after the last speech and too long: its start moved to its end minus max_duration.
            if (words[0].end - last_speech_timestamp > median_duration * 4 &&
                (words[0].end - words[0].start > max_duration ||
                 (words.size() > 1 && words[1].end - words[0].start > max_duration * 2))) {
                if (words.size() > 1 && words[1].end - words[1].start > max_duration) {
                    const double boundary = std::max(words[1].end / 2, words[1].end - max_duration);
                    words[0].end = words[1].start = boundary;
                }
                words[0].start = std::max(0.0, words[0].end - max_duration);
            }
            // The segment's start and end follow its words, unless they are far off.
            if (segment.start < words[0].end && segment.start - 0.5 > words[0].start) {
                words[0].start = std::max(0.0, std::min(words[0].end - median_duration, segment.start));
            } else {
                segment.start = words[0].start;
            }
            if (segment.end > words.back().start && segment.end + 0.5 < words.back().end) {
                words.back().end = std::max(words.back().start + median_duration, segment.end);
            } else {
                segment.end = words.back().end;
            }
            last_speech_timestamp = segment.end;
        }
        segment.words = std::move(words);
    }
}

} // namespace transcribe
