#!/usr/bin/env python3
"""transcribe-cli end to end: usage: test_cli.py CLI MODELS_DIR FIXTURE_DIR"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

CLI, MODELS, FIXTURE = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
F32 = str(MODELS / "canary-qwen-tiny-f32.gguf")
JFK = str(FIXTURE / "audio" / "jfk.wav")


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True)


class Cli(unittest.TestCase):
    def test_version_and_help(self):
        r = cli("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.decode(), r"^transcribe \d+\.\d+\.\d+")
        r = cli("--help")
        self.assertEqual(r.returncode, 0)
        for flag in ("--format", "--threads", "--backend", "--progress", "--max-new-tokens", "--kv-type", "--tokenize", "-o"):
            self.assertIn(flag, r.stdout.decode())

    def test_tokenize(self):
        r = cli("-m", F32, "--tokenize", "user\nTranscribe the following: ")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().strip(), "872 198 3167 3114 279 2701 25 220")

    def test_json_matches_golden(self):
        golden_ids = json.loads((FIXTURE / "golden" / "jfk" / "greedy_ids.json").read_text())
        golden_text = (FIXTURE / "golden" / "jfk" / "text.txt").read_text(encoding="utf-8")
        r = cli("-m", F32, "--kv-type", "f32", "--max-new-tokens", "16", "--json", "--threads", "2", JFK)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["tokens"], golden_ids)
        self.assertEqual(j["text"], golden_text)
        self.assertEqual(len(j["segments"]), 1)
        seg = j["segments"][0]
        self.assertEqual((seg["text"], seg["tokens"], seg["truncated"]), (golden_text, golden_ids, True))
        self.assertTrue(0 <= seg["t0_ms"] < 500 and 10500 < seg["t1_ms"] <= 11000, seg)
        self.assertTrue(j["truncated"])
        self.assertIn("truncated", r.stderr.decode())  # never silently
        for key in ("load_ms", "mel_ms", "encode_ms", "prefill_ms", "decode_ms"):
            self.assertGreaterEqual(j["timings"][key], 0)

    def test_srt_vtt_to_file_and_progress(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.srt"
            r = cli("-m", F32, "--max-new-tokens", "4", "--format", "srt", "-o", str(out), "--progress", JFK)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, b"")
            srt = out.read_text(encoding="utf-8")
            self.assertRegex(srt, r"^1\n00:00:00,[0-4]\d\d --> 00:00:1[01],\d\d\d\n")
            self.assertIn("100%", r.stderr.decode())
            r = cli("-m", F32, "--max-new-tokens", "4", "--format", "vtt", JFK)
            self.assertRegex(r.stdout.decode(), r"^WEBVTT\n\n00:00:00\.[0-4]\d\d --> 00:00:1[01]\.\d\d\d\n")

    def test_several_files(self):
        r = cli("-m", F32, "--max-new-tokens", "2", JFK, str(FIXTURE / "audio" / "jfk_0p7s.wav"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.decode().splitlines()), 2)

    def test_errors_are_one_clear_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            text = Path(tmp) / "notes.wav"
            text.write_text("not audio at all" * 100)
            cases = [
                (("-m", "/nonexistent.gguf", JFK), "FILE_NOT_FOUND"),
                (("-m", str(text), JFK), "BAD_GGUF"),
                (("-m", F32, "/nonexistent.wav"), "FILE_NOT_FOUND"),
                (("-m", F32, str(text)), "AUDIO_DECODE"),
                (("-m", F32, "--backend", "quantum", JFK), "INVALID_ARG"),
                (("-m", F32), "no audio file"),
                ((JFK,), "no model"),
            ]
            for args, needle in cases:
                r = cli(*args)
                self.assertNotEqual(r.returncode, 0, args)
                err = r.stderr.decode().strip().splitlines()
                self.assertEqual(len(err), 1, (args, err))
                self.assertIn(needle, err[0])
                self.assertTrue(err[0].startswith("transcribe-cli: error:"), err[0])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
