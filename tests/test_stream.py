#!/usr/bin/env python3
"""transcribe-stream end to end: usage: test_stream.py BIN_DIR MODELS_DIR TINY_FIXTURE_DIR

Each turn the stream prints is checked against transcribe-cli run on a WAV of that turn's samples alone
(cut from the 16-bit source at the turn's sample indices, so the samples are the same)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import wave
from pathlib import Path

BIN, MODELS, FIXTURE = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
STREAM = str(BIN / "transcribe-stream")
CLI = str(BIN / "transcribe-cli")
MODEL = str(MODELS / "parakeet-tdt-tiny-f32.gguf")
VAD = str(MODELS / "silero-vad-v5.gguf")
JFK = FIXTURE / "audio" / "jfk.wav"
SHORT = FIXTURE / "audio" / "jfk_0p7s.wav"


def stream(*args, stdin=None):
    return subprocess.run([STREAM, *args], capture_output=True, input=stdin)


def events(out):
    return [json.loads(line) for line in out.decode().splitlines()]


def frames(path):
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return w.readframes(w.getnframes())


class Stream(unittest.TestCase):
    def test_turns_transcribe_as_the_cli_does_on_their_samples(self):
        r = stream("-m", MODEL, "--vad", VAD, str(JFK), "--no-pace", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = events(r.stdout)
        completed = [e for e in ev if e["type"] == "completed"]
        # Silero finds five stretches of speech in jfk.wav, 228 to 1092 ms apart: with 500 ms of silence
        # ending a turn, 3 or 4 turns.
        self.assertIn(len(completed), (3, 4), ev)
        self.assertEqual([e["item"] for e in completed], list(range(len(completed))))
        for e in ev:  # each turn: started first, completed last
            mine = [x["type"] for x in ev if x["item"] == e["item"]]
            self.assertEqual((mine[0], mine[-1]), ("speech_started", "completed"))
        pcm = frames(JFK)
        with tempfile.TemporaryDirectory() as tmp:
            for e in completed:
                a, b = e["audio_start_ms"] * 16, e["audio_end_ms"] * 16
                self.assertLess(a, b)
                path = os.path.join(tmp, f"turn{e['item']}.wav")
                with wave.open(path, "wb") as w:
                    w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
                    w.writeframes(pcm[2 * a:2 * b])
                c = subprocess.run([CLI, "-m", MODEL, path], capture_output=True)
                self.assertEqual(c.returncode, 0, c.stderr)
                self.assertEqual(e["text"], c.stdout.decode().strip(), f"turn {e['item']}")

    def test_raw_stdin_gives_the_files_events(self):
        from_file = stream("-m", MODEL, "--vad", VAD, str(JFK), "--no-pace", "--json")
        from_stdin = stream("-m", MODEL, "--vad", VAD, "-", "--json", stdin=frames(JFK))
        self.assertEqual(from_stdin.returncode, 0, from_stdin.stderr)
        completed = lambda out: [e for e in events(out) if e["type"] == "completed"]
        self.assertEqual(completed(from_stdin.stdout), completed(from_file.stdout))

    def test_real_time_pace_and_the_plain_transcript(self):
        began = time.monotonic()
        r = stream("-m", MODEL, "--vad", VAD, str(SHORT))
        took = time.monotonic() - began
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(took, 0.7)  # the clip's 0.7 s handed over as they would be recorded
        lines = r.stdout.decode().splitlines()
        self.assertTrue(lines, "no turn printed")
        for line in lines:  # not a terminal: turns only, "[mm:ss.cc --> mm:ss.cc] text"
            self.assertRegex(line, r"^\[\d\d:\d\d\.\d\d --> \d\d:\d\d\.\d\d\] ")

    def test_errors(self):
        r = stream("-m", MODEL, "--vad", VAD, "/nonexistent.wav", "--no-pace")
        self.assertEqual(r.returncode, 1)
        self.assertIn("transcribe-stream: error:", r.stderr.decode())
        r = stream("-m", "/nonexistent.gguf", "--vad", VAD, str(JFK))
        self.assertEqual(r.returncode, 1)
        self.assertIn("FILE_NOT_FOUND", r.stderr.decode())
        r = stream("-m", MODEL, "--vad", MODEL, str(JFK))  # not a VAD
        self.assertEqual(r.returncode, 1)
        self.assertIn("VAD model", r.stderr.decode())
        r = stream("-m", MODEL, str(JFK))  # --vad is required
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
