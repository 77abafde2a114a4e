#include "long_audio.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {

constexpr double kFrameSeconds = 0.010;
constexpr double kPauseSeconds = 0.200;

std::vector<double> frame_energy(const float * x, size_t begin, size_t end, size_t frame) {
    std::vector<double> e;
    e.reserve((end - begin) / frame + 1);
    for (size_t i = begin; i < end; i += frame) {
        const size_t j = std::min(end, i + frame);
        double s = 0;
        for (size_t k = i; k < j; ++k) {
            s += double(x[k]) * double(x[k]);
        }
        e.push_back(s / double(j - i));
    }
    return e;
}

} // namespace

std::vector<AudioSpan> split_at_pauses(const float * x, size_t n, int sample_rate, size_t max_len) {
    std::vector<AudioSpan> pieces;
    const size_t frame = std::max<size_t>(1, size_t(sample_rate * kFrameSeconds));
    const size_t pause = std::max<size_t>(1, size_t(kPauseSeconds / kFrameSeconds));
    size_t start = 0;
    while (n - start > max_len) {
        // Search the last quarter of the window for the quietest `pause` frames.
        const size_t lo = start + max_len * 3 / 4, hi = start + max_len;
        const std::vector<double> e = frame_energy(x, lo, hi, frame);
        size_t cut = hi;
        if (e.size() > pause) {
            double run = 0;
            for (size_t i = 0; i < pause; ++i) {
                run += e[i];
            }
            double best = run;
            size_t best_i = 0;
            for (size_t i = pause; i < e.size(); ++i) {
                run += e[i] - e[i - pause];
                if (run <= best) { // ties go to the later stretch: longer pieces
                    best   = run;
                    best_i = i - pause + 1;
                }
            }
            cut = std::min(hi, lo + (best_i + pause / 2) * frame);
        }
        pieces.push_back({start, cut});
        start = cut;
    }
    pieces.push_back({start, n});
    return pieces;
}

AudioSpan trim_silence(const float * x, AudioSpan piece, int sample_rate) {
    const size_t frame = std::max<size_t>(1, size_t(sample_rate * kFrameSeconds));
    const std::vector<double> e = frame_energy(x, piece.begin, piece.end, frame);
    if (e.empty()) {
        return piece;
    }
    const double peak = *std::max_element(e.begin(), e.end());
    const double threshold = std::max(peak * std::pow(10.0, -35.0 / 10.0), 1e-8);
    size_t first = 0, last = e.size();
    while (first < e.size() && e[first] < threshold) {
        ++first;
    }
    while (last > first && e[last - 1] < threshold) {
        --last;
    }
    if (first >= last) { // all silence
        return {piece.begin, piece.begin};
    }
    return {piece.begin + first * frame, std::min(piece.end, piece.begin + last * frame)};
}

Transcript transcribe_pieces(Session & session, const float * x, size_t n, int sample_rate, size_t window_samples,
                             const RunOptions & options) {
    const std::vector<AudioSpan> pieces = split_at_pauses(x, n, sample_rate, window_samples);
    Transcript out;
    Timings total;
    auto to_ms = [&](size_t s) { return int64_t(std::llround(1000.0 * double(s) / sample_rate)); };
    for (size_t i = 0; i < pieces.size(); ++i) {
        RunOptions o      = options;
        o.progress_offset = options.progress_offset + options.progress_scale * float(i) / float(pieces.size());
        o.progress_scale  = options.progress_scale / float(pieces.size());
        Transcript t = session.run(x + pieces[i].begin, pieces[i].end - pieces[i].begin, o);
        const Timings & ti = session.timings();
        total.mel_ms += ti.mel_ms;
        total.encode_ms += ti.encode_ms;
        total.prefill_ms += ti.prefill_ms;
        total.decode_ms += ti.decode_ms;
        total.n_prefill_tokens += ti.n_prefill_tokens;
        total.n_decode_tokens += ti.n_decode_tokens;

        const AudioSpan speech = trim_silence(x, pieces[i], sample_rate);
        Segment seg;
        seg.t0_ms     = to_ms(speech.begin);
        seg.t1_ms     = to_ms(speech.end);
        seg.text      = t.text;
        seg.tokens    = t.tokens;
        seg.truncated = t.truncated;
        if (pieces.size() == 1) {
            out.text = t.text;
        } else {
            // Pieces each start with the word-initial space of byte-level BPE; join on single spaces.
            const size_t b = t.text.find_first_not_of(' ');
            if (b != std::string::npos) {
                out.text += (out.text.empty() ? "" : " ") + t.text.substr(b);
            }
        }
        out.tokens.insert(out.tokens.end(), t.tokens.begin(), t.tokens.end());
        out.truncated = out.truncated || t.truncated;
        out.segments.push_back(std::move(seg));
    }
    session.set_timings(total);
    return out;
}

} // namespace transcribe
