#!/usr/bin/env python3
"""transcribe-vad and --vad end to end.
usage: test_vad.py BUILD_TOOLS_DIR MODELS_DIR TINY_FIXTURE SILERO_FIXTURE"""
import json
import subprocess
import sys
import tempfile
import unittest
import wave
from pathlib import Path

import numpy as np

TOOLS, MODELS, TINY, SILERO = (Path(a) for a in sys.argv[1:5])
VAD_TOOL, CLI = str(TOOLS / "transcribe-vad"), str(TOOLS / "transcribe-cli")
VAD = str(MODELS / "silero-vad-v5.gguf")
ASR = str(MODELS / "canary-qwen-tiny-bf16.gguf")
CLIPS = {"jfk": TINY / "audio" / "jfk.wav", "tone_noise_3s": TINY / "audio" / "tone_noise_3s.wav",
         "vad_mix_public": SILERO / "audio" / "vad_mix_public.wav"}


def run(*args, timeout=600):
    return subprocess.run([*args], capture_output=True, timeout=timeout)


def read_wav(path):
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def write_wav(path, samples):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.astype("<i2").tobytes())


class VadTool(unittest.TestCase):
    def test_json_matches_onnxruntime(self):
        golden = json.loads((SILERO / "v5" / "segments.json").read_text())
        for clip, wav in CLIPS.items():
            r = run(VAD_TOOL, "-m", VAD, "--json", str(wav))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            ref = np.load(SILERO / "v5" / f"{clip}.probs.npy")
            self.assertEqual(len(j["probs"]), len(ref), clip)
            self.assertLessEqual(float(np.abs(np.array(j["probs"]) - ref).max()), 1e-4, clip)
            want = [(s["start_ms"], s["end_ms"]) for s in golden["clips"][clip]["segments"]]
            self.assertEqual([(s["start_ms"], s["end_ms"]) for s in j["segments"]], want, clip)

    def test_parameters_and_errors(self):
        wav = str(CLIPS["jfk"])
        plain = run(VAD_TOOL, "-m", VAD, wav).stdout.decode().splitlines()
        self.assertEqual(plain[0], "0.290\t2.238")
        # A long minimum silence joins jfk's five regions into fewer.
        joined = run(VAD_TOOL, "-m", VAD, "--min-silence-ms", "2000", wav).stdout.decode().splitlines()
        self.assertLess(len(joined), len(plain))
        self.assertGreater(len(joined), 0)
        r = run(VAD_TOOL, "-m", VAD, "/nonexistent.wav")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("error", r.stderr.decode())
        r = run(VAD_TOOL, "-m", ASR, wav)  # a transcription model is not a VAD
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("UNSUPPORTED_ARCH", r.stderr.decode())
        r = run(CLI, "-m", ASR, "--vad", ASR, wav)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("VAD model", r.stderr.decode())


class VadTranscription(unittest.TestCase):
    def test_silence_only_gives_nothing_and_runs_no_decoder(self):
        with tempfile.TemporaryDirectory() as tmp:
            wav = Path(tmp) / "silence.wav"
            write_wav(wav, np.zeros(16000 * 65, dtype=np.int16))
            r = run(CLI, "-m", ASR, "--vad", VAD, "--json", str(wav))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual((j["text"], j["segments"], j["tokens"]), ("", [], []))
            t = j["timings"]
            self.assertEqual((t["n_prefill_tokens"], t["n_decode_tokens"]), (0, 0))
            self.assertEqual((t["mel_ms"], t["encode_ms"], t["prefill_ms"], t["decode_ms"]), (0, 0, 0, 0))
            self.assertGreater(t["vad_ms"], 0)
            # Without --vad the same file is decoded, as before.
            r = run(CLI, "-m", ASR, "--json", "--max-new-tokens", "2", str(wav))
            self.assertGreater(json.loads(r.stdout)["timings"]["n_prefill_tokens"], 0)

    def test_six_minutes_of_speech_and_silence(self):
        """Speech clips between silences of 1-20 s: every cue lies inside a clip (give or take the 30 ms
        padding), no cue is longer than ~7 s or 42 characters, and the silence costs no decoding."""
        rng = np.random.default_rng(7)
        jfk, mix = read_wav(CLIPS["jfk"]), read_wav(CLIPS["vad_mix_public"])
        parts, placed, at = [], [], 0
        while at + 16000 * 32 <= 16000 * 360:  # room for the longest gap and clip
            gap = np.zeros(int(16000 * rng.uniform(1, 20)), dtype=np.int16)
            clip = jfk if len(placed) % 2 == 0 else mix
            parts += [gap, clip]
            at += len(gap)
            placed.append((at, at + len(clip)))
            at += len(clip)
        parts.append(np.zeros(16000 * 360 - at, dtype=np.int16))
        audio = np.concatenate(parts)
        self.assertEqual(len(audio), 16000 * 360)
        speech_s = sum(e - b for b, e in placed) / 16000
        with tempfile.TemporaryDirectory() as tmp:
            wav = Path(tmp) / "six_minutes.wav"
            write_wav(wav, audio)
            r = run(CLI, "-m", ASR, "--vad", VAD, "--json", "--max-new-tokens", "200", "--threads", "2", str(wav))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            segs = [s for s in j["segments"] if s["text"].strip()]
            self.assertGreater(len(segs), len(placed))  # each clip has several speech regions
            slack = 40  # ms: the 30 ms padding plus rounding
            for s in segs:
                inside = [p for p in placed if p[0] / 16 - slack <= s["t0_ms"] and s["t1_ms"] <= p[1] / 16 + slack]
                self.assertTrue(inside, f"cue {s['t0_ms']}-{s['t1_ms']} ms is not inside any speech clip {placed}")
                self.assertLessEqual(s["t1_ms"] - s["t0_ms"], 7100, s)
                self.assertLessEqual(len(s["text"].strip()), 42, s)
            # Every clip gets text, none of the silence does (checked above), and the model heard only
            # speech: its audio is the speech regions, so prefill covers well under the 6 minutes.
            for b, e in placed:
                self.assertTrue(any(b / 16 - slack <= s["t0_ms"] < e / 16 for s in segs), (b, e))
            encoded_s = j["timings"]["n_prefill_tokens"] / 12.5  # 12.5 audio rows a second (8x subsampling)
            self.assertLess(encoded_s, speech_s * 1.2 + 30)
            srt = run(CLI, "-m", ASR, "--vad", VAD, "--format", "srt", "--max-new-tokens", "200", str(wav))
            self.assertEqual(srt.returncode, 0, srt.stderr)
            self.assertEqual(srt.stdout.decode().count(" --> "), len(segs))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
