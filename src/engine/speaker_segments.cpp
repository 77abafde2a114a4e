#include "speaker_segments.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

namespace transcribe {

namespace {

using Rows = std::vector<std::array<float, 2>>;

// torch.sort (unstable) of the rows' starts: the permutation std::sort gives over (start, index) pairs
// in index order with a start-only comparator, as torch's CPU kernel sorts keys and indices together.
Rows sorted_by_start(const Rows & rows) {
    std::vector<std::pair<float, size_t>> keys(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        keys[i] = {rows[i][0], i};
    }
    std::sort(keys.begin(), keys.end(), [](const auto & a, const auto & b) { return a.first < b.first; });
    Rows out(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        out[i] = rows[keys[i].second];
    }
    return out;
}

// merge_overlap_segment: sorted by start, each run of rows with end[k] >= start[k + 1] becomes [the
// run's first start, the end of its LAST row] (not the largest end). 0 or 1 rows stay as they are.
Rows merge_overlaps(const Rows & rows) {
    if (rows.size() <= 1) {
        return rows;
    }
    const Rows s = sorted_by_start(rows);
    Rows out;
    for (size_t k = 0; k < s.size(); ++k) {
        const bool joins_previous = k > 0 && s[k - 1][1] >= s[k][0];
        const bool joins_next     = k + 1 < s.size() && s[k][1] >= s[k + 1][0];
        if (!joins_previous) {
            out.push_back({s[k][0], 0.0f});
        }
        if (!joins_next) {
            out.back()[1] = s[k][1];
        }
    }
    return out;
}

// filter_short_segments: rows whose float32 duration is at least THRESHOLD (as float32).
Rows long_enough(const Rows & rows, double threshold) {
    Rows out;
    for (const auto & r : rows) {
        if (r[1] - r[0] >= float(threshold)) {
            out.push_back(r);
        }
    }
    return out;
}

// Python's round(x, 2): the exact binary value rounded to 2 decimals (printf rounds it correctly).
double round2(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", x);
    return std::strtod(buf, nullptr);
}

// fl2int / int2fl with 5 decimals: through float32 tensors and torch.round (half to even).
int64_t fl2int(double x) { return int64_t(std::nearbyint(float(x * 1e5))); }
double  int2fl(int64_t x) {
    const float v = float(double(x) / 1e5);
    return double(std::nearbyint(v * 100000.0f) / 100000.0f);
}

} // namespace

Rows speaker_segments_raw(const float * probs, int n, int stride, int unit, const DiarizationParams & p) {
    // binarization over the 10-ms sequence (each probability repeated UNIT times); thresholds compared
    // in float32, times in double, rows stored as float32.
    const double frame = 0.01;
    const float onset = float(p.onset), offset = float(p.offset);
    const int N = n * unit;
    Rows rows;
    bool   speech = false;
    double start  = 0.0;
    int    i      = 0;
    for (i = 0; i < N; ++i) {
        const float v = probs[size_t(i / unit) * size_t(stride)];
        if (speech) {
            if (v < offset) {
                const double begin = std::max(0.0, start - p.pad_onset), end = i * frame + p.pad_offset;
                if (end > begin) {
                    rows.push_back({float(begin), float(end)});
                }
                start  = i * frame;
                speech = false;
            }
        } else if (v > onset) {
            start  = i * frame;
            speech = true;
        }
    }
    if (speech) { // still open at the end: it closes at the last 10-ms frame's index (N - 1)
        rows.push_back({float(std::max(0.0, start - p.pad_onset)), float((N - 1) * frame + p.pad_offset)});
    }
    rows = merge_overlaps(rows);
    // filtering, speech first (filter_speech_first defaults to 1.0).
    if (rows.empty()) {
        return rows;
    }
    if (p.min_duration_on > 0.0) {
        rows = long_enough(rows, p.min_duration_on);
    }
    if (p.min_duration_off > 0.0) {
        // The gaps between rows sorted by start; the short ones (those not among the long ones, compared
        // row by row) become speech, then everything is merged again.
        const Rows s = sorted_by_start(rows);
        Rows gaps;
        for (size_t k = 0; k + 1 < s.size(); ++k) {
            gaps.push_back({s[k][1], s[k + 1][0]});
        }
        const Rows long_gaps = long_enough(gaps, p.min_duration_off);
        for (const auto & g : gaps) {
            if (std::find(long_gaps.begin(), long_gaps.end(), g) == long_gaps.end()) {
                rows.push_back(g);
            }
        }
        rows = merge_overlaps(rows);
    }
    return rows;
}

std::vector<SpeakerSegment> speaker_segments(const std::vector<float> & probs, int n_frames, int n_speakers, int unit,
                                             const DiarizationParams & p) {
    std::vector<SpeakerSegment> out;
    constexpr int kMargin = 2; // merge_float_intervals' margin
    for (int spk = 0; spk < n_speakers; ++spk) {
        const Rows raw = speaker_segments_raw(probs.data() + spk, n_frames, n_speakers, unit, p);
        // round(t, 2) of each time, then merge_float_intervals: integer ranges [start + 2, end] in 1e-5
        // units, kept where start < end, merged by merge_int_intervals (which sorts the starts and the
        // ends each on their own, torch.sort(dim=0)), back to floats.
        std::vector<int64_t> starts, ends;
        for (const auto & r : raw) {
            const int64_t s = fl2int(round2(double(r[0]))) + kMargin, e = fl2int(round2(double(r[1])));
            if (s < e) {
                starts.push_back(s);
                ends.push_back(e);
            }
        }
        std::vector<std::pair<int64_t, int64_t>> merged;
        if (starts.size() == 1) {
            merged.push_back({starts[0], ends[0]});
        } else if (!starts.empty()) {
            std::sort(starts.begin(), starts.end());
            std::sort(ends.begin(), ends.end());
            int64_t start = starts[0], end = ends[0];
            for (size_t k = 1; k < starts.size(); ++k) {
                if (end >= starts[k]) {
                    end = std::max(ends[k], end);
                } else {
                    merged.push_back({start, end});
                    start = starts[k];
                    end   = std::max(ends[k], end);
                }
            }
            merged.push_back({start, end});
        }
        for (const auto & [s, e] : merged) {
            out.push_back({int2fl(s - kMargin), int2fl(e), spk});
        }
    }
    return out;
}

std::string speaker_line(const SpeakerSegment & s) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.3f %.3f speaker_%d", s.start, s.end, s.speaker);
    return buf;
}

} // namespace transcribe
