// Speaker segments from per-frame speaker probabilities, as NeMo's Sortformer diarize() makes them
// (SortformerEncLabelModel._diarize_output_processing): per speaker, each frame's probability repeated
// unit times at 10 ms (ts_vad_post_processing), binarization with onset / offset and pads, filtering of
// short speech and short gaps (vad_utils), times rounded to 10 ms, then merge_float_intervals and the
// printed lines. Float32 where NeMo's tensors are, its unstable sorts emulated (std::sort with the same
// comparator over the same order: libstdc++'s introsort, as torch's CPU sort).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace transcribe {

// PostProcessingParams (seconds; probabilities). Defaults: what diarize() uses without a yaml.
struct DiarizationParams {
    double onset = 0.5, offset = 0.5, pad_onset = 0.0, pad_offset = 0.0, min_duration_on = 0.0, min_duration_off = 0.0;
};

struct SpeakerSegment {
    double start = 0, end = 0; // seconds, as NeMo prints them (%.3f of these)
    int    speaker = 0;
};

// ts_vad_post_processing of one speaker's N probabilities (PROBS[k * STRIDE]), each covering UNIT 10-ms
// frames: float32 [start, end] rows in NeMo's order.
std::vector<std::array<float, 2>> speaker_segments_raw(const float * probs, int n, int stride, int unit,
                                                       const DiarizationParams & p);

// Every speaker's segments of PROBS [frame][speaker], speakers in channel order, each in time order
// (generate_diarization_output_lines).
std::vector<SpeakerSegment> speaker_segments(const std::vector<float> & probs, int n_frames, int n_speakers, int unit,
                                             const DiarizationParams & p);

// "<start> <end> speaker_<k>", NeMo's line.
std::string speaker_line(const SpeakerSegment & s);

} // namespace transcribe
