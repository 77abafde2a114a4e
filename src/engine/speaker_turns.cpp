#include "speaker_turns.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

std::vector<SpeakerTurn> speaker_turns(const std::vector<SpeakerSegment> & segments, size_t n, int sample_rate) {
    std::vector<SpeakerSegment> order(segments);
    std::stable_sort(order.begin(), order.end(), [](const SpeakerSegment & a, const SpeakerSegment & b) { return a.start < b.start; });
    const auto sample = [&](double seconds) { return std::min(n, size_t(std::llround(std::max(0.0, seconds) * sample_rate))); };
    std::vector<SpeakerTurn> turns;
    for (const SpeakerSegment & s : order) {
        const size_t b = sample(s.start), e = sample(s.end);
        if (e <= b) {
            continue;
        }
        if (!turns.empty()) {
            SpeakerTurn & last = turns.back();
            if (last.speaker == s.speaker) {
                last.span.end = std::max(last.span.end, e);
                continue;
            }
            if (b < last.span.end) {
                if (e <= last.span.end) {
                    continue; // inside the current turn: its speaker keeps the floor
                }
                last.span.end = b; // the new speaker takes over
                if (last.span.end <= last.span.begin) {
                    turns.pop_back();
                }
            }
        }
        if (!turns.empty() && turns.back().speaker == s.speaker) {
            turns.back().span.end = std::max(turns.back().span.end, e);
        } else {
            turns.push_back({{b, e}, s.speaker});
        }
    }
    if (turns.empty()) {
        return {{{0, n}, -1}};
    }
    // Tile the recording: each turn runs to the next one's start; the first from 0, the last to n.
    turns.front().span.begin = 0;
    for (size_t i = 0; i + 1 < turns.size(); ++i) {
        turns[i].span.end = turns[i + 1].span.begin;
    }
    turns.back().span.end = n;
    return turns;
}

std::vector<AudioSpan> clip_to(const std::vector<AudioSpan> & regions, AudioSpan span) {
    std::vector<AudioSpan> out;
    for (const AudioSpan & r : regions) {
        const size_t b = std::max(r.begin, span.begin), e = std::min(r.end, span.end);
        if (b < e) {
            out.push_back({b, e});
        }
    }
    return out;
}

void label_speakers(Transcript & t, const std::vector<SpeakerTurn> & turns, int sample_rate) {
    for (Segment & seg : t.segments) {
        const double mid = 0.5 * double(seg.t0_ms + seg.t1_ms) * sample_rate / 1000.0;
        for (const SpeakerTurn & turn : turns) {
            if (mid < double(turn.span.end) || &turn == &turns.back()) {
                seg.speaker = turn.speaker;
                break;
            }
        }
        for (Word & w : seg.words) {
            w.speaker = seg.speaker;
        }
    }
    for (Word & w : t.words) {
        for (const Segment & seg : t.segments) {
            if (w.t0_ms >= seg.t0_ms && w.t0_ms <= seg.t1_ms) {
                w.speaker = seg.speaker;
                break;
            }
        }
    }
}

} // namespace transcribe
