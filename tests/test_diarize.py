#!/usr/bin/env python3
"""transcribe-diarize end to end on sortformer-tiny: usage: test_diarize.py DIARIZE MODELS_DIR FIXTURE_DIR"""
import json
import subprocess
import sys
import unittest
from pathlib import Path

DIARIZE, MODELS, FIXTURE = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
MODEL = str(MODELS / "sortformer-tiny-f32.gguf")
CLIPS = ("jfk", "conv2_budget", "conv3_meeting")


def run(*args):
    return subprocess.run([DIARIZE, *args], capture_output=True, text=True)


class Diarize(unittest.TestCase):
    def test_lines_rttm_and_json_are_nemos(self):
        """Default post-processing: NeMo's lines, its RTTM file, and --json's segments as NeMo parses them,
        probabilities one row of 4 per 80 ms frame (within preds.npy's tolerance)."""
        import numpy as np
        for clip in CLIPS:
            wav = str(FIXTURE / "audio" / f"{clip}.wav")
            golden = json.loads((FIXTURE / "golden" / clip / "segments.json").read_text())["default"]
            r = run("-m", MODEL, wav)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.splitlines(), golden["lines"], clip)
            r = run("-m", MODEL, "--rttm", wav)
            self.assertEqual(r.stdout, (FIXTURE / "golden" / clip / "segments.rttm").read_text(), clip)
            j = json.loads(run("-m", MODEL, "--json", wav).stdout)
            self.assertEqual(j["segments"], golden["segments"], clip)
            preds = np.load(FIXTURE / "golden" / clip / "preds.npy")
            self.assertEqual(np.asarray(j["probs"]).shape, preds.shape)
            self.assertLess(np.abs(np.asarray(j["probs"]) - preds).max(), 1e-3)

    def test_released_postprocessing_yaml_files(self):
        """--postprocessing with each of the four released YAML files the fixture ships: NeMo's lines."""
        for clip in CLIPS:
            sets = json.loads((FIXTURE / "golden" / clip / "segments.json").read_text())
            for name, s in sets.items():
                if name == "default":
                    continue
                r = run("-m", MODEL, "--postprocessing", str(FIXTURE / "postprocessing" / f"{name}.yaml"),
                        str(FIXTURE / "audio" / f"{clip}.wav"))
                self.assertEqual(r.stdout.splitlines(), s["lines"], f"{clip} {name}")

    def test_streaming_lines_are_nemos(self):
        """--streaming with the fixture's scaled speaker-cache sizes: NeMo's forward_streaming segments, for the
        default post-processing and the four released sets."""
        golden = json.loads((FIXTURE / "golden" / "conv3_meeting" / "streaming.json").read_text())
        p = golden["params"]
        sizes = ["--spkcache-len", p["spkcache_len"], "--fifo-len", p["fifo_len"], "--spkcache-update-period",
                 p["spkcache_update_period"], "--chunk-len", p["chunk_len"], "--chunk-left-context",
                 p["chunk_left_context"], "--chunk-right-context", p["chunk_right_context"]]
        wav = str(FIXTURE / "audio" / "conv3_meeting.wav")
        for name, s in golden["postprocessing"].items():
            yaml = [] if name == "default" else ["--postprocessing", str(FIXTURE / "postprocessing" / f"{name}.yaml")]
            r = run("-m", MODEL, "--streaming", *map(str, sizes), *yaml, wav)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.splitlines(), s["lines"], name)
        # Without --streaming the same sizes change nothing: a 15 s clip is diarized offline.
        r = run("-m", MODEL, *map(str, sizes), wav)
        want = json.loads((FIXTURE / "golden" / "conv3_meeting" / "segments.json").read_text())["default"]["lines"]
        self.assertEqual(r.stdout.splitlines(), want)

    def test_errors_are_one_clear_line(self):
        wav = str(FIXTURE / "audio" / "jfk.wav")
        for args, says in ((["-m", str(MODELS / "parakeet-tdt-tiny-f32.gguf"), wav], "not a Sortformer diarizer"),
                           (["-m", MODEL, "--streaming", "--spkcache-len", "8", wav], "invalid sizes"),
                           (["-m", MODEL, "--postprocessing", "/nonexistent.yaml", wav], "cannot open"),
                           (["-m", MODEL, "/nonexistent.wav"], "nonexistent")):
            r = run(*args)
            self.assertEqual(r.returncode, 1, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(says, r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
