#include "speaker_attribution.h"

#include <algorithm>
#include <cmath>

namespace transcribe {

namespace {

// The speaker with the largest overlap with [t0, t1) ms; -1 when none overlaps (the lower index among equals).
int speaker_of(const std::vector<SpeakerSegment> & turns, int64_t t0, int64_t t1) {
    std::vector<int64_t> overlap;
    for (const SpeakerSegment & s : turns) {
        const int64_t a = std::max<int64_t>(t0, std::llround(s.start * 1000.0)),
                      b = std::min<int64_t>(t1, std::llround(s.end * 1000.0));
        if (b > a) {
            if (size_t(s.speaker) >= overlap.size()) {
                overlap.resize(size_t(s.speaker) + 1, 0);
            }
            overlap[size_t(s.speaker)] += b - a;
        }
    }
    int best = -1;
    for (size_t k = 0; k < overlap.size(); ++k) {
        if (overlap[k] > 0 && (best < 0 || overlap[k] > overlap[size_t(best)])) {
            best = int(k);
        }
    }
    return best;
}

} // namespace

void attribute_speakers(Transcript & t, const std::vector<SpeakerSegment> & turns) {
    // Words, in order over all segments.
    std::vector<Word *> words;
    for (Segment & seg : t.segments) {
        for (Word & w : seg.words) {
            words.push_back(&w);
        }
    }
    int previous = -1;
    for (Word * w : words) {
        const int k = speaker_of(turns, w->t0_ms, std::max(w->t1_ms, w->t0_ms + 1));
        w->speaker = k >= 0 ? k : previous;
        previous   = w->speaker;
    }
    const auto first = std::find_if(words.begin(), words.end(), [](const Word * w) { return w->speaker >= 0; });
    for (auto it = words.begin(); it != first && first != words.end(); ++it) {
        (*it)->speaker = (*first)->speaker;
    }
    // Segments cut where the speaker changes.
    std::vector<Segment> out;
    for (Segment & seg : t.segments) {
        if (seg.words.empty()) {
            out.push_back(std::move(seg));
            continue;
        }
        size_t begin = 0;
        for (size_t i = 1; i <= seg.words.size(); ++i) {
            if (i < seg.words.size() && seg.words[i].speaker == seg.words[begin].speaker) {
                continue;
            }
            Segment part;
            part.words.assign(seg.words.begin() + long(begin), seg.words.begin() + long(i));
            part.speaker   = part.words.front().speaker;
            part.t0_ms     = begin == 0 ? seg.t0_ms : part.words.front().t0_ms;
            part.t1_ms     = i == seg.words.size() ? seg.t1_ms : part.words.back().t1_ms;
            part.truncated = seg.truncated && i == seg.words.size();
            if (begin == 0 && i == seg.words.size()) {
                part.text = seg.text; // one speaker: the segment as it was
            } else {
                for (const Word & w : part.words) {
                    part.text += (part.text.empty() ? "" : " ") + w.text;
                }
            }
            if (begin == 0) {
                part.tokens = std::move(seg.tokens);
            }
            out.push_back(std::move(part));
            begin = i;
        }
    }
    t.segments = std::move(out);
    t.words.clear();
    for (const Segment & seg : t.segments) {
        t.words.insert(t.words.end(), seg.words.begin(), seg.words.end());
    }
}

} // namespace transcribe
