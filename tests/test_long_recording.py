#!/usr/bin/env python3
"""A 30-minute recording (the fixture clips repeated with pauses) through transcribe-cli to SRT:
cues numbered in order, times monotone and non-overlapping, within the recording, covering the speech.
Usage: test_long_recording.py CLI MODEL FIXTURE_DIR [MINUTES]"""
import re
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

CLI, MODEL, FIXTURE = sys.argv[1], sys.argv[2], Path(sys.argv[3])
MINUTES = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
RATE = 16000


def read(clip):
    with wave.open(str(FIXTURE / "audio" / f"{clip}.wav")) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)


def srt_time(s):
    h, m, rest = s.split(":")
    sec, ms = rest.split(",")
    return ((int(h) * 60 + int(m)) * 60 + int(sec)) * 1000 + int(ms)


def main():
    clips = [read(c) for c in ("jfk", "tone_noise_3s", "jfk_div8", "jfk_0p7s")]
    pauses = [0.3, 0.8, 1.5, 0.25]
    parts, speech, at, i = [], [], 0, 0
    total = int(MINUTES * 60 * RATE)
    while at < total:
        c = clips[i % len(clips)]
        speech.append((at, at + len(c)))
        gap = np.zeros(int(pauses[i % len(pauses)] * RATE), dtype=np.int16)
        parts += [c, gap]
        at += len(c) + len(gap)
        i += 1
    audio = np.concatenate(parts)[:total]
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "long.wav"
        with wave.open(str(wav), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(audio.tobytes())
        out = Path(tmp) / "long.srt"
        r = subprocess.run([CLI, "-m", MODEL, "--format", "srt", "-o", str(out), "--max-new-tokens", "12",
                            "--threads", "2", str(wav)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        srt = out.read_text(encoding="utf-8")
    cues = re.findall(r"(\d+)\n(\d\d:\d\d:\d\d,\d\d\d) --> (\d\d:\d\d:\d\d,\d\d\d)\n", srt)
    assert cues, srt[:500]
    spans = [(srt_time(a), srt_time(b)) for _, a, b in cues]
    assert [int(n) for n, _, _ in cues] == list(range(1, len(cues) + 1)), "cue numbers"
    duration_ms = len(audio) * 1000 // RATE
    expected_pieces = duration_ms / 40000
    assert len(cues) >= expected_pieces, (len(cues), expected_pieces)
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert a0 < a1 <= b0 < b1, ((a0, a1), (b0, b1))
    assert 0 <= spans[0][0] and spans[-1][1] <= duration_ms
    # Every stretch of speech lies (mostly) inside some cue.
    covered = np.zeros(duration_ms // 10 + 1, dtype=bool)
    for a, b in spans:
        covered[a // 10:b // 10 + 1] = True
    speech_ms = np.zeros_like(covered)
    for a, b in speech:
        speech_ms[a * 100 // RATE:min(len(audio), b) * 100 // RATE] = True
    fraction = covered[speech_ms].mean()
    assert fraction > 0.97, fraction
    print(f"{MINUTES:g} min: {len(cues)} cues, monotone and non-overlapping, {fraction:.1%} of the speech covered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
