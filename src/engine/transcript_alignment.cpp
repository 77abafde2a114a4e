#include "engine/transcript_alignment.h"

#include "core/error.h"
#include "core/log.h"
#include "core/tokenizer.h"
#include "decoding/ctc_forced_alignment.h"

#include <algorithm>

namespace transcribe {

void check_aligner(const Model & model, const Model & aligner) {
    const ModelInfo & a = aligner.info();
    if (!a.forced_aligner && (!a.ctc_head || a.frame_ms <= 0)) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "aligner: model %s (%s) neither has a CTC head nor is a forced aligner (align with "
             "a Parakeet CTC or hybrid model, or Qwen3-ForcedAligner)", a.name.c_str(), a.architecture.c_str());
    }
    if (a.sample_rate != model.info().sample_rate) {
        fail(TRANSCRIBE_ERR_INVALID_ARG, "aligner: model %s takes %d Hz audio, model %s %d Hz", a.name.c_str(), a.sample_rate,
             model.info().name.c_str(), model.info().sample_rate);
    }
}

namespace {

// TEXT placed in PCM[0, N) (at OFFSET_MS of the recording): its segments with words, in ms.
std::vector<Segment> aligned_segments(const std::string & text, const float * pcm, size_t n, int64_t offset_ms,
                                      Model & aligner, Session & session, const std::function<bool()> & cancelled) {
    std::vector<std::vector<float>> rows; // the CTC head's log-probabilities, a frame a row
    RunOptions o;
    o.decoder_type = aligner.info().transducer_head ? DecoderType::Ctc : DecoderType::Default;
    o.step_logits  = &rows;
    o.cancelled    = cancelled;
    session.run(pcm, n, o);
    if (rows.empty()) {
        return {};
    }
    const int T = int(rows.size()), V = int(rows[0].size());
    std::vector<float> lp;
    lp.reserve(size_t(T) * size_t(V));
    for (const std::vector<float> & r : rows) {
        lp.insert(lp.end(), r.begin(), r.end());
    }
    const Tokenizer & tok = aligner.tokenizer();
    const int64_t frame_ms = aligner.info().frame_ms;
    auto ms = [&](int64_t frame) { return offset_ms + frame * frame_ms; };
    std::vector<Segment> out;
    for (const AlignedSegment & s : ctc_forced_alignment(lp.data(), T, V, text, tok, tok.n_vocab())) {
        Segment seg;
        seg.text  = s.span.text;
        seg.t0_ms = ms(s.span.first_frame);
        seg.t1_ms = ms(s.span.end_frame);
        for (const AlignedSpan & w : s.words) {
            if (w.first_frame >= 0 && w.end_frame >= 0 && !w.text.empty()) {
                seg.words.push_back({w.text, ms(w.first_frame), ms(w.end_frame)});
            }
        }
        out.push_back(std::move(seg));
    }
    if (out.empty() && !text.empty()) {
        TLOG_WARN("aligner: %zu samples cannot hold the text's tokens; no word times", n);
    }
    return out;
}

// Each segment's text placed by a forced aligner in the segment's own audio (transcribe() aligns each
// chunk it decoded, its times offset by the chunk's start); the segment then spans its words.
std::vector<Segment> forced_aligned_segments(const Transcript & t, const float * pcm, size_t n, Model & aligner,
                                             Session & session, const std::function<bool()> & cancelled) {
    const int rate = aligner.info().sample_rate;
    RunOptions o;
    o.cancelled = cancelled;
    std::vector<Segment> out;
    for (const Segment & s : t.segments) {
        Segment seg = s;
        seg.words.clear();
        const size_t a = std::min(n, size_t(std::max<int64_t>(0, s.t0_ms) * rate / 1000));
        const size_t b = std::min(n, size_t(std::max<int64_t>(0, s.t1_ms) * rate / 1000));
        if (b > a && !strip_whitespace(s.text).empty()) {
            for (Word & w : session.align_text(pcm + a, b - a, s.text, t.language, o)) {
                w.t0_ms += s.t0_ms;
                w.t1_ms += s.t0_ms;
                seg.words.push_back(std::move(w));
            }
        }
        if (!seg.words.empty()) {
            seg.t0_ms = seg.words.front().t0_ms;
            seg.t1_ms = seg.words.back().t1_ms;
        }
        out.push_back(std::move(seg));
    }
    return out;
}

} // namespace

void align_transcript(Transcript & t, const float * pcm, size_t n, Model & aligner, Session & session,
                      const std::function<bool()> & cancelled) {
    const int rate = aligner.info().sample_rate;
    const bool truncated = std::any_of(t.segments.begin(), t.segments.end(), [](const Segment & s) { return s.truncated; });
    std::vector<Segment> segments;
    if (aligner.info().forced_aligner) {
        segments = forced_aligned_segments(t, pcm, n, aligner, session, cancelled);
    } else if (int64_t(n) * 1000 <= int64_t(aligner.info().max_audio_ms) * rate) {
        segments = aligned_segments(t.text, pcm, n, 0, aligner, session, cancelled);
    } else {
        for (const Segment & s : t.segments) { // each over its own audio, as the pieces were decoded
            const size_t a = std::min(n, size_t(std::max<int64_t>(0, s.t0_ms) * rate / 1000));
            const size_t b = std::min(n, size_t(std::max<int64_t>(0, s.t1_ms) * rate / 1000));
            if (b > a) {
                for (Segment & x : aligned_segments(s.text, pcm + a, b - a, s.t0_ms, aligner, session, cancelled)) {
                    segments.push_back(std::move(x));
                }
            }
        }
    }
    t.words.clear();
    for (const Segment & s : segments) {
        t.words.insert(t.words.end(), s.words.begin(), s.words.end());
    }
    if (!segments.empty()) {
        segments.back().truncated = truncated;
        t.segments = std::move(segments);
    }
    t.timed = true;
}

} // namespace transcribe
