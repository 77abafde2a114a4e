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
        r = stream("-m", MODEL, str(JFK))  # --vad is required: this model does not transcribe as it hears
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not transcribe as it hears", r.stderr.decode())


STREAMING = FIXTURE.parent / "streaming-tiny"
HYBRID = str(MODELS / "streaming-hybrid-tiny-f32.gguf")
EOU = str(MODELS / "streaming-eou-tiny-f32.gguf")


class NativeStream(unittest.TestCase):
    """A cache-aware streaming model without --vad: NeMo's streaming run of the whole input (its goldens in
    streaming-tiny), a delta a step, completed turns whose tokens join into NeMo's final streaming ids."""

    def golden(self, sub, clip, at):
        return json.loads((STREAMING / sub / "golden" / clip / at / "stream.json").read_text())

    def test_a_delta_a_step_and_one_turn_of_nemos_ids(self):
        for at, flag in (("att_70_13", []), ("att_70_1", ["--att-context-size", "70,1"])):
            g = self.golden("", "librivox_0890", at)
            r = stream("-m", HYBRID, str(STREAMING / "audio" / "librivox_0890.wav"), "--no-pace", "--json", *flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            ev = events(r.stdout)
            deltas = [e for e in ev if e["type"] == "delta"]
            completed = [e for e in ev if e["type"] == "completed"]
            self.assertEqual([e["step"] for e in deltas], list(range(g["n_steps"])), at)
            so_far = []
            for e, step in zip(deltas, g["steps"]):
                so_far += e["tokens"]
                self.assertEqual(so_far, step["rnnt_ids"], f"{at} step {e['step']}")
            self.assertEqual(len(completed), 1, at)  # no end-of-utterance token: the end ends the one turn
            self.assertEqual(completed[0]["tokens"], g["final_rnnt_ids"], at)
            self.assertEqual(completed[0]["text"], g["final_rnnt_text"], at)
            ends = [e["audio_end_ms"] for e in deltas]
            self.assertEqual(ends, sorted(ends), at)

    def test_the_ctc_head_streams_its_ids(self):
        g = self.golden("", "cards_005", "att_70_6")
        r = stream("-m", HYBRID, str(STREAMING / "audio" / "cards_005.wav"), "--no-pace", "--json",
                   "--att-context-size", "70,6", "--decoder-type", "ctc")
        self.assertEqual(r.returncode, 0, r.stderr)
        completed = [e for e in events(r.stdout) if e["type"] == "completed"]
        self.assertEqual(completed[0]["tokens"], g["final_ctc_collapsed"])

    def test_eou_ends_each_turn_and_raw_stdin_streams_the_same(self):
        clip = STREAMING / "eou" / "audio" / "eou_two_utts.wav"
        g = self.golden("eou", "eou_two_utts", "att_70_1")
        r = stream("-m", EOU, str(clip), "--no-pace", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        completed = [e for e in events(r.stdout) if e["type"] == "completed"]
        eou = 1  # <EOU>
        self.assertEqual(len(completed), len(g["eou_events"]))  # the clip ends with its second <EOU>
        for e in completed:
            self.assertEqual(e["tokens"][-1], eou)
            self.assertNotIn(eou, e["tokens"][:-1])
            self.assertTrue(e["text"].endswith("<EOU>"), e["text"])
        self.assertEqual(sum((e["tokens"] for e in completed), []), g["final_rnnt_ids"])
        self.assertEqual([e["item"] for e in completed], list(range(len(completed))))
        self.assertEqual(completed[1]["audio_start_ms"], completed[0]["audio_end_ms"])
        raw = stream("-m", EOU, "-", "--json", stdin=frames(clip))
        self.assertEqual(raw.returncode, 0, raw.stderr)
        self.assertEqual([e for e in events(raw.stdout) if e["type"] == "completed"], completed)

    def test_with_a_vad_each_turn_is_the_models_streaming_run_over_that_turns_audio(self):
        clip = STREAMING / "audio" / "jfk.wav"
        with wave.open(str(clip)) as w:
            self.assertEqual(w.getframerate(), 16000)
            pcm = w.readframes(w.getnframes())
        r = stream("-m", HYBRID, "--vad", VAD, str(clip), "--no-pace", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        ev = events(r.stdout)
        completed = [e for e in ev if e["type"] == "completed"]
        self.assertGreater(len(completed), 0)
        for c in completed:
            deltas = "".join(e["text"] for e in ev if e["type"] == "delta" and e["item"] == c["item"])
            self.assertEqual(deltas.strip(), c["text"].strip(), c)
        with tempfile.TemporaryDirectory() as d:
            for c in completed[:1]:  # (every turn, in-process: test_native_live_stream.cpp)
                turn = Path(d) / f"turn{c['item']}.wav"
                with wave.open(str(turn), "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(16000)
                    w.writeframes(pcm[c["audio_start_ms"] * 32:c["audio_end_ms"] * 32])
                alone = stream("-m", HYBRID, str(turn), "--no-pace", "--json")
                self.assertEqual(alone.returncode, 0, alone.stderr)
                texts = [e["text"] for e in events(alone.stdout) if e["type"] == "completed"]
                self.assertEqual(c["text"].strip(), "".join(texts).strip(), c)

    def test_errors(self):
        r = stream("-m", HYBRID, str(STREAMING / "audio" / "cards_005.wav"), "--no-pace", "--att-context-size", "70,2")
        self.assertEqual(r.returncode, 1)
        self.assertIn("70,13, 70,6, 70,1, 70,0", r.stderr.decode())
        r = stream("-m", HYBRID, "-", "--rate", "8000", stdin=b"\0" * 3200)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--rate 16000", r.stderr.decode())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
