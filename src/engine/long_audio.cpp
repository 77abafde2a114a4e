#include "engine/long_audio.h"

#include "engine/piece_feeder.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <utility>

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

namespace {

int64_t samples_to_ms(size_t s, int sample_rate) { return int64_t(std::llround(1000.0 * double(s) / sample_rate)); }

// Appends a piece's text and ids; with several pieces, each one's word-initial space of byte-level BPE
// is dropped and the pieces are joined on single spaces.
void append_text(Transcript & out, const Transcript & t, size_t n_pieces) {
    if (n_pieces == 1) {
        out.text = t.text;
    } else {
        const size_t b = t.text.find_first_not_of(' ');
        if (b != std::string::npos) {
            out.text += (out.text.empty() ? "" : " ") + t.text.substr(b);
        }
    }
    out.tokens.insert(out.tokens.end(), t.tokens.begin(), t.tokens.end());
    out.truncated = out.truncated || t.truncated;
    if (out.language.empty()) { // the first piece's (a model that detects it may hear another later)
        out.language = t.language;
    }
}

// A timed piece's segments and words, their times taken into the recording by `to_recording`
// (milliseconds in the piece's audio -> milliseconds in the recording).
template <typename Map> void append_timed(Transcript & out, Transcript & t, Map to_recording) {
    out.timed = true;
    for (Segment & seg : t.segments) {
        for (Word & w : seg.words) {
            w.t0_ms = to_recording(w.t0_ms, false);
            w.t1_ms = std::max(w.t0_ms, to_recording(w.t1_ms, true));
        }
        seg.t0_ms = seg.words.empty() ? to_recording(seg.t0_ms, false) : seg.words.front().t0_ms;
        seg.t1_ms = seg.words.empty() ? to_recording(seg.t1_ms, true) : seg.words.back().t1_ms;
        out.words.insert(out.words.end(), seg.words.begin(), seg.words.end());
        out.segments.push_back(std::move(seg));
    }
}

} // namespace

Transcript transcribe_pieces(Session & session, const float * x, size_t n, int sample_rate, size_t window_samples,
                             const RunOptions & options) {
    return transcribe_plan(session, plan_pieces(x, n, sample_rate, window_samples), options);
}

namespace {

Transcript join_pieces(const float * x, const std::vector<AudioSpan> & pieces, std::vector<Transcript> results,
                       int sample_rate) {
    Transcript out;
    for (size_t i = 0; i < pieces.size(); ++i) {
        Transcript & t = results[i];
        append_text(out, t, pieces.size());
        if (t.timed) {
            // A token's duration can reach past the audio (NeMo's times do, and one piece keeps them); in a
            // recording cut into pieces, a piece's times stay inside the piece.
            const int64_t start = samples_to_ms(pieces[i].begin, sample_rate);
            const int64_t end   = pieces.size() == 1 ? INT64_MAX : samples_to_ms(pieces[i].end, sample_rate);
            append_timed(out, t, [start, end](int64_t ms, bool) { return std::min(ms + start, end); });
            if (pieces.size() == 1) { // frames are of one run's encoder output
                out.token_frames    = std::move(t.token_frames);
                out.token_durations = std::move(t.token_durations);
            }
            continue;
        }
        const AudioSpan speech = trim_silence(x, pieces[i], sample_rate);
        out.segments.push_back(Segment {samples_to_ms(speech.begin, sample_rate), samples_to_ms(speech.end, sample_rate),
                                        std::move(t.text), std::move(t.tokens), {}, t.truncated});
    }
    return out;
}

} // namespace

PiecePlan plan_pieces(const float * x, size_t n, int sample_rate, size_t window_samples) {
    return plan_spans(x, split_at_pauses(x, n, sample_rate, window_samples), sample_rate);
}

PiecePlan plan_spans(const float * x, std::vector<AudioSpan> pieces, int sample_rate) {
    PiecePlan plan;
    plan.n_pieces = pieces.size();
    plan.audio_of = [x, pieces](size_t i, std::vector<float> &) {
        return std::pair<const float *, size_t> {x + pieces[i].begin, pieces[i].end - pieces[i].begin};
    };
    plan.join = [x, pieces, sample_rate](std::vector<Transcript> results) {
        return join_pieces(x, pieces, std::move(results), sample_rate);
    };
    return plan;
}

std::vector<SpeechPiece> plan_speech_pieces(const std::vector<AudioSpan> & regions, const std::vector<float> & probs,
                                            size_t chunk, size_t max_len) {
    std::vector<AudioSpan> parts;
    for (const AudioSpan & r : regions) {
        size_t b = r.begin;
        while (r.end - b > max_len) {
            size_t cut = b + max_len;
            const size_t lo = (b + max_len / 2) / chunk, hi = (b + max_len - chunk / 2) / chunk;
            float best = 2.0f;
            for (size_t k = lo; k <= hi && k < probs.size(); ++k) {
                const size_t at = k * chunk + chunk / 2;
                if (at > b && probs[k] <= best) { // ties go to the later chunk: longer pieces
                    best = probs[k];
                    cut  = at;
                }
            }
            parts.push_back({b, cut});
            b = cut;
        }
        parts.push_back({b, r.end});
    }
    std::vector<SpeechPiece> pieces;
    for (const AudioSpan & p : parts) {
        if (p.end <= p.begin) {
            continue;
        }
        if (!pieces.empty() && pieces.back().samples() + (p.end - p.begin) <= max_len) {
            pieces.back().regions.push_back(p);
        } else {
            pieces.push_back({{p}});
        }
    }
    return pieces;
}

size_t SpeechPiece::samples() const {
    size_t n = 0;
    for (const AudioSpan & r : regions) {
        n += r.end - r.begin;
    }
    return n;
}

std::vector<Segment> speech_segments(const Transcript & piece, const std::vector<AudioSpan> & regions,
                                     const Tokenizer & tokenizer, int sample_rate) {
    // Words: runs of ids from one whose text starts with a space (or the first) to the next; a run
    // longer than a cue (text without spaces, as in Chinese or Japanese) is cut between ids.
    struct Word {
        std::vector<int32_t> ids;
        size_t               chars = 0; // UTF-8 code points
    };
    std::vector<Word> words;
    size_t total_chars = 0;
    for (int32_t id : piece.tokens) {
        const std::string bytes = tokenizer.decode_bytes({id});
        size_t chars = 0;
        for (unsigned char c : bytes) {
            chars += (c & 0xC0) != 0x80;
        }
        if (words.empty() || (!bytes.empty() && bytes[0] == ' ') || words.back().chars + chars > size_t(kCueChars)) {
            words.emplace_back();
        }
        words.back().ids.push_back(id);
        words.back().chars += chars;
        total_chars += chars;
    }
    double speech = 0;
    for (const AudioSpan & r : regions) {
        speech += double(r.end - r.begin);
    }
    // Each region's words.
    std::vector<std::vector<const Word *>> by_region(regions.size());
    size_t at = 0, region = 0;
    double region_end = regions.empty() ? 0 : double(regions[0].end - regions[0].begin);
    for (const Word & w : words) {
        const double mid = total_chars ? speech * (double(at) + 0.5 * double(w.chars)) / double(total_chars) : 0;
        while (region + 1 < regions.size() && mid >= region_end) {
            ++region;
            region_end += double(regions[region].end - regions[region].begin);
        }
        by_region[region].push_back(&w);
        at += w.chars;
    }
    // Cues within each region.
    std::vector<Segment> out;
    for (size_t r = 0; r < regions.size(); ++r) {
        size_t chars = 0;
        for (const Word * w : by_region[r]) {
            chars += w->chars;
        }
        if (chars == 0) {
            continue;
        }
        const double dur = double(regions[r].end - regions[r].begin);
        const double ms_per_char = 1000.0 * dur / sample_rate / double(chars);
        size_t cue_begin = 0, cue_chars = 0;
        Segment cue;
        auto close = [&] {
            const double b = double(regions[r].begin) + dur * double(cue_begin) / double(chars);
            const double e = double(regions[r].begin) + dur * double(cue_begin + cue_chars) / double(chars);
            cue.t0_ms = samples_to_ms(size_t(b), sample_rate);
            cue.t1_ms = samples_to_ms(size_t(e), sample_rate);
            cue.text  = tokenizer.decode(cue.tokens);
            out.push_back(std::move(cue));
            cue = Segment {};
            cue_begin += cue_chars;
            cue_chars = 0;
        };
        for (const Word * w : by_region[r]) {
            const size_t next = cue_chars + w->chars;
            if (cue_chars > 0 && (next > size_t(kCueChars) + 1 || double(next) * ms_per_char > kCueMs)) {
                close();
            }
            cue.tokens.insert(cue.tokens.end(), w->ids.begin(), w->ids.end());
            cue_chars += w->chars;
        }
        close();
    }
    if (piece.truncated && !out.empty()) {
        out.back().truncated = true;
    }
    return out;
}

Transcript transcribe_speech(Session & session, const Tokenizer & tokenizer, const float * x,
                             const std::vector<SpeechPiece> & pieces, int sample_rate, const RunOptions & options) {
    return transcribe_plan(session, plan_speech(tokenizer, x, pieces, sample_rate), options);
}

namespace {
Transcript join_speech(const Tokenizer & tokenizer, const std::vector<SpeechPiece> & pieces, std::vector<Transcript> results,
                       int sample_rate) {
    Transcript out;
    for (size_t i = 0; i < pieces.size(); ++i) {
        Transcript & t = results[i];
        append_text(out, t, pieces.size());
        if (t.timed) {
            const std::vector<AudioSpan> & regions = pieces[i].regions;
            append_timed(out, t, [&](int64_t ms, bool end) {
                // Through the regions laid back to back: a time on a boundary is the end of the earlier
                // region or the start of the later one.
                const double at = double(ms) * sample_rate / 1000.0;
                double before = 0;
                for (size_t k = 0; k < regions.size(); ++k) {
                    const double len = double(regions[k].end - regions[k].begin);
                    if (at < before + len || (end && at <= before + len) || k + 1 == regions.size()) {
                        return samples_to_ms(size_t(double(regions[k].begin) + std::min(std::max(at - before, 0.0), len)),
                                             sample_rate);
                    }
                    before += len;
                }
                return int64_t(0);
            });
            continue;
        }
        std::vector<Segment> segs = speech_segments(t, pieces[i].regions, tokenizer, sample_rate);
        out.segments.insert(out.segments.end(), std::make_move_iterator(segs.begin()), std::make_move_iterator(segs.end()));
    }
    return out;
}

} // namespace

PiecePlan plan_speech(const Tokenizer & tokenizer, const float * x, std::vector<SpeechPiece> pieces, int sample_rate) {
    PiecePlan plan;
    plan.n_pieces = pieces.size();
    plan.audio_of = [x, pieces](size_t i, std::vector<float> & storage) {
        storage.clear();
        for (const AudioSpan & r : pieces[i].regions) {
            storage.insert(storage.end(), x + r.begin, x + r.end);
        }
        return std::pair<const float *, size_t> {storage.data(), storage.size()};
    };
    plan.join = [&tokenizer, pieces, sample_rate](std::vector<Transcript> results) {
        return join_speech(tokenizer, pieces, std::move(results), sample_rate);
    };
    return plan;
}

} // namespace transcribe
