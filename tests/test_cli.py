#!/usr/bin/env python3
"""transcribe-cli end to end: usage: test_cli.py CLI MODELS_DIR FIXTURE_DIR PARAKEET_FIXTURE_DIR"""
import json
import struct
import subprocess
import sys
import tempfile
import unittest
import wave
from pathlib import Path

CLI, MODELS, FIXTURE = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
F32 = str(MODELS / "canary-qwen-tiny-f32.gguf")
JFK = str(FIXTURE / "audio" / "jfk.wav")
PARAKEET_FIXTURE = Path(sys.argv[4])
PARAKEET = str(MODELS / "parakeet-tdt-tiny-f32.gguf")
FRAME_MS = 80  # Parakeet's encoder frame: 10 ms hop x 8


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True)


class Cli(unittest.TestCase):
    def test_qwen3_asr_prompt_and_language_reach_the_model(self):
        """Qwen3-ASR with --prompt (the system context) and --language en (forced: "language English<asr_text>"
        ends the prompt): the reference's greedy ids for that prompt, the language reported in JSON; an
        unlisted language refused naming the model's."""
        q = FIXTURE.parent / "qwen3-asr-tiny"
        golden = json.loads((q / "golden" / "jfk_2p37s" / "forced_en" / "greedy.json").read_text())
        model = str(MODELS / "qwen3-asr-tiny-f32.gguf")
        r = cli("-m", model, "--kv-type", "f32", "--max-new-tokens", "20", "--json", "--prompt", golden["context"],
                "--language", "en", str(q / "audio" / "jfk_2p37s.wav"))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["tokens"], golden["ids"])
        self.assertEqual(out["language"], "English")
        self.assertEqual(out["text"], golden["text"].strip())
        r = cli("-m", model, "--language", "xx", str(q / "audio" / "jfk_2p37s.wav"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Cantonese", r.stderr.decode())

    def test_qwen3_forced_aligner_times_another_models_words(self):
        """--align-with a Qwen3-ForcedAligner GGUF: the transcript's words with the aligner's times (in order,
        the segment spanning them); the aligner as the transcriber, or the transcriber as the aligner,
        refused saying what each is for."""
        q = FIXTURE.parent / "qwen3-asr-tiny"
        asr, aligner = str(MODELS / "qwen3-asr-tiny-f32.gguf"), str(MODELS / "qwen3-aligner-tiny-f32.gguf")
        wav = str(q / "audio" / "jfk_2p37s.wav")
        r = cli("-m", asr, "--align-with", aligner, "--max-new-tokens", "12", "--json", "--timestamps", "word", wav)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertTrue(out["words"])
        self.assertEqual(out["words"], [w for s in out["segments"] for w in s["words"]])
        for s in out["segments"]:
            self.assertEqual((s["t0_ms"], s["t1_ms"]), (s["words"][0]["t0_ms"], s["words"][-1]["t1_ms"]))
        times = [t for w in out["words"] for t in (w["t0_ms"], w["t1_ms"])]
        self.assertEqual(times, sorted(times))  # fix_timestamp leaves them non-decreasing
        r = cli("-m", aligner, wav)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--align-with", r.stderr.decode())
        # --text: a given transcript aligned by -m (the reference's align(): qwen3-aligner-tiny's golden items).
        g = json.loads((FIXTURE.parent / "qwen3-aligner-tiny" / "golden" / "jfk_2p37s_zh" / "align.json").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            text = Path(tmp) / "text.txt"
            text.write_text(g["text"], encoding="utf-8")
            r = cli("-m", aligner, "--kv-type", "f32", "--text", str(text), "--language", g["language"], "--json", wav)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["text"], g["text"])
            self.assertEqual([(w["word"], w["t0_ms"], w["t1_ms"]) for w in out["words"]],
                             [(i["text"], round(i["start_time"] * 1000), round(i["end_time"] * 1000)) for i in g["items"]])
            r = cli("-m", asr, "--text", str(text), wav)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("nor is a forced aligner", r.stderr.decode())
        r = cli("-m", asr, "--align-with", asr, wav)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("nor is a forced aligner", r.stderr.decode())

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

    def test_files_decoded_together_equal_one_at_a_time(self):
        """Five files (the four clips, jfk again) with --batch 3: each file's JSON has the tokens it has with
        --batch 1, which are the reference's greedy ids; in the order given."""
        clips = ("jfk", "jfk_0p7s", "jfk_div8", "tone_noise_3s", "jfk")
        files = [str(FIXTURE / "audio" / f"{c}.wav") for c in clips]
        outs = {}
        for batch in ("3", "1"):
            r = cli("-m", F32, "--kv-type", "f32", "--max-new-tokens", "16", "--json", "--batch", batch, *files)
            self.assertEqual(r.returncode, 0, r.stderr)
            text, docs, at = r.stdout.decode(), [], 0
            dec = json.JSONDecoder()
            while at < len(text.rstrip()):
                doc, at = dec.raw_decode(text, at)
                docs.append(doc)
                while at < len(text) and text[at].isspace():
                    at += 1
            outs[batch] = docs
        self.assertEqual(len(outs["3"]), 5)
        for c, together, alone in zip(clips, outs["3"], outs["1"]):
            golden = json.loads((FIXTURE / "golden" / c / "greedy_ids.json").read_text())
            self.assertEqual(together["tokens"], alone["tokens"], c)
            self.assertEqual(together["tokens"], golden[:len(together["tokens"])], c)
            self.assertEqual(together["text"], alone["text"], c)

    def test_parakeet_ctc_and_rnnt_words_and_segments_are_nemos(self):
        """A Parakeet-CTC model (parakeet-ctc-tiny), a hybrid's CTC head (parakeet-tdt-ctc-tiny with
        --decoder-type ctc) and a Parakeet-RNNT model (parakeet-rnnt-tiny): the JSON's text, words and
        segments are NeMo's."""
        ctc, rnnt = PARAKEET_FIXTURE.parent / "parakeet-ctc-tiny", PARAKEET_FIXTURE.parent / "parakeet-rnnt-tiny"
        for fixture, clip, model, flags in (
                (ctc, "jfk", "parakeet-ctc-tiny-f32.gguf", []), (ctc, "tone_noise_3s", "parakeet-ctc-tiny-f32.gguf", []),
                (ctc, "jfk", "parakeet-tdt-ctc-tiny-f32.gguf", ["--decoder-type", "ctc"]),
                (rnnt, "jfk", "parakeet-rnnt-tiny-f32.gguf", []), (rnnt, "jfk_div8", "parakeet-rnnt-tiny-f32.gguf", ["--decoder-type", "rnnt"])):
            r = cli("-m", str(MODELS / model), *flags, "--json", str(fixture / "audio" / f"{clip}.wav"))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            hyp = json.loads((fixture / "golden" / clip / "hypothesis.json").read_text())
            self.assertEqual(j["text"], hyp["text"], clip)
            self.assertEqual([(w["word"], w["t0_ms"], w["t1_ms"]) for w in j["words"]],
                             [(w["word"], w["start_offset"] * FRAME_MS, w["end_offset"] * FRAME_MS)
                              for w in hyp["timestamp"]["word"]], clip)
            self.assertEqual([(s["text"], s["t0_ms"], s["t1_ms"]) for s in j["segments"]],
                             [(s["segment"], s["start_offset"] * FRAME_MS, s["end_offset"] * FRAME_MS)
                              for s in hyp["timestamp"]["segment"]], clip)

    def test_hotwords_from_a_list_and_a_file_give_nemos_boosted_text(self):
        """--hotwords "a,b" and --hotwords FILE with --hotword-weight: NeMo's boosted transcript (the
        parakeet-hotwords goldens of parakeet-rnnt-tiny and parakeet-ctc-tiny); a model without hotwords
        (Canary-Qwen) is one clear line."""
        hot = PARAKEET_FIXTURE.parent / "parakeet-hotwords" / "golden"
        for model, case, clip in (("parakeet-rnnt-tiny", "case0", "jfk"), ("parakeet-ctc-tiny", "case0", "jfk_div8")):
            want = json.loads((hot / model / case / f"{clip}.json").read_text())
            audio = str(PARAKEET_FIXTURE / "audio" / f"{clip}.wav")
            with tempfile.TemporaryDirectory() as tmp:
                phrases = Path(tmp) / "phrases.txt"
                phrases.write_text("\n".join(want["phrases"]) + "\n")
                for arg in (",".join(want["phrases"]), str(phrases)):
                    r = cli("-m", str(MODELS / f"{model}-f32.gguf"), "--hotwords", arg, "--hotword-weight",
                            str(want["alpha"]), "--json", audio)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(json.loads(r.stdout)["text"], want["text"], (model, arg))
        r = cli("-m", F32, "--hotwords", "jfk", JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"hotwords", r.stderr)

    def test_prompt_is_context_for_canary_qwen_and_refused_elsewhere(self):
        """--prompt reaches Canary-Qwen's chat prompt (where: tests/test_canary_qwen_prompt.cpp): other ids
        than the reference's without one; a model without a text prompt (Parakeet) is one clear line."""
        golden = json.loads((FIXTURE / "golden" / "jfk" / "greedy_ids.json").read_text())[:8]
        plain = cli("-m", F32, "--kv-type", "f32", "--max-new-tokens", "8", "--json", JFK)
        prompted = cli("-m", F32, "--kv-type", "f32", "--max-new-tokens", "8", "--json", "--prompt", "Names: Kennedy", JFK)
        self.assertEqual(json.loads(plain.stdout)["tokens"], golden)
        self.assertNotEqual(json.loads(prompted.stdout)["tokens"], golden)
        r = cli("-m", PARAKEET, "--prompt", "Kennedy", JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"takes no text prompt", r.stderr)

    def test_align_with_a_ctc_model_gives_nfas_words_and_segments(self):
        """--align-with parakeet-ctc-tiny: parakeet-tdt-tiny's transcript of each clip placed as NeMo Forced
        Aligner places it (the parakeet-ctc-alignment goldens: every word's and segment's times); Canary-Qwen's
        transcript gets words too (its text's words, in order, inside the audio); a model without a CTC head
        as the aligner is one clear line."""
        golden = PARAKEET_FIXTURE.parent / "parakeet-ctc-alignment" / "golden"
        ctc = str(MODELS / "parakeet-ctc-tiny-f32.gguf")
        for clip in ("jfk", "jfk_div8", "tone_noise_3s"):
            r = cli("-m", str(MODELS / "parakeet-tdt-tiny-f32.gguf"), "--align-with", ctc, "--json",
                    str(PARAKEET_FIXTURE / "audio" / f"{clip}.wav"))
            self.assertEqual(r.returncode, 0, r.stderr)
            j, g = json.loads(r.stdout), json.loads((golden / f"tdt_text_{clip}.json").read_text())
            self.assertEqual([(w["word"], w["t0_ms"], w["t1_ms"]) for w in j["words"]],
                             [(w["text"], round(w["t_start"] * 1000), round(w["t_end"] * 1000)) for w in g["words"]], clip)
            self.assertEqual([(s["text"], s["t0_ms"], s["t1_ms"]) for s in j["segments"]],
                             [(s["text"], round(s["t_start"] * 1000), round(s["t_end"] * 1000)) for s in g["segments"]], clip)
        r = cli("-m", F32, "--max-new-tokens", "12", "--align-with", ctc, "--json", JFK)  # a text the frames hold
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertGreater(len(j["words"]), 2)
        self.assertEqual([w["word"] for w in j["words"]], [w for w in j["text"].split(" ") if w])
        ends = [(w["t0_ms"], w["t1_ms"]) for w in j["words"]]
        self.assertTrue(all(0 <= a < b <= 11040 for a, b in ends), ends)
        self.assertEqual(ends, sorted(ends))
        r = cli("-m", F32, "--align-with", str(MODELS / "parakeet-tdt-tiny-f32.gguf"), JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"neither has a CTC head", r.stderr)

    def test_decoder_type_picks_a_hybrids_head(self):
        """--decoder-type: a hybrid's transducer by default and with tdt (parakeet-tdt-tiny's text), a head a
        model lacks is one clear line naming what it has, an unknown type is a usage error."""
        hybrid, jfk = str(MODELS / "parakeet-tdt-ctc-tiny-f32.gguf"), str(PARAKEET_FIXTURE / "audio" / "jfk.wav")
        want = json.loads((PARAKEET_FIXTURE / "golden" / "jfk" / "hypothesis.json").read_text())["text"]
        for flags in ([], ["--decoder-type", "tdt"], ["--decoder-type", "rnnt"]):
            r = cli("-m", hybrid, *flags, "--json", jfk)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["text"], want, flags)
        r = cli("-m", str(MODELS / "parakeet-ctc-tiny-f32.gguf"), "--decoder-type", "tdt", jfk)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"no transducer head (it has a CTC head)", r.stderr)
        r = cli("-m", F32, "--decoder-type", "ctc", JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"has no CTC head", r.stderr)
        r = cli("-m", hybrid, "--decoder-type", "attention", jfk)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"decoder-type", r.stderr)

    def test_canary_aed_tasks_are_nemos(self):
        """A Canary AED model (canary-aed-tiny, F32 cache): transcription, translation (--translate-to), the
        prompt's timestamps (--timestamps word) and beam search (--beam 4) give NeMo's ids and text; an unknown
        language or a task the model lacks is one clear line."""
        fixture = PARAKEET_FIXTURE.parent / "canary-aed-tiny"
        model = str(MODELS / "canary-aed-tiny-f32.gguf")
        wav = str(fixture / "audio" / "jfk_div8.wav")
        golden = fixture / "golden" / "jfk_div8"
        for task, flags in (("asr_en_pnc", []), ("ast_en_de", ["--translate-to", "de"]),
                            ("asr_en_timestamps", ["--timestamps", "word"])):
            r = cli("-m", model, "--kv-type", "f32", "--json", *flags, wav)
            self.assertIn(r.returncode, (0,), r.stderr)
            j = json.loads(r.stdout)
            g = json.loads((golden / task / "greedy.json").read_text())
            self.assertEqual(j["tokens"], g["hypothesis"]["y_sequence"], task)
            want_text = g["timestamps"]["text_after"] if task == "asr_en_timestamps" else g["hypothesis"]["text"]
            self.assertEqual(j["text"], want_text, task)
            b = cli("-m", model, "--kv-type", "f32", "--json", "--beam", "4", *flags, wav)
            beam = json.loads((golden / task / "beam.json").read_text())
            self.assertEqual(json.loads(b.stdout)["tokens"], beam["best"]["y_sequence"], task)
        for flags, says in ((["--language", "xx"], "en, de, es, fr"), (["--translate-to", "it"], "en, de, es, fr")):
            r = cli("-m", model, *flags, wav)
            self.assertEqual(r.returncode, 1)
            self.assertIn(says, r.stderr.decode())
        r = cli("-m", PARAKEET, "--translate-to", "de", wav)
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not translate", r.stderr.decode())
        r = cli("-m", PARAKEET, "--beam", "4", wav)
        self.assertEqual(r.returncode, 1)
        self.assertIn("greedily only", r.stderr.decode())

    def test_canary_aed_max_generation_delta_caps_the_tokens(self):
        """decoding.greedy / beam max_generation_delta >= 0 (NeMo: max length = min(max_sequence_length,
        src_len + delta), src_len every encoder output frame): jfk_div8 has 26 output frames (25 valid), so
        delta 2 leaves min(40, 26 + 2) - 9 prompt tokens = 19 new tokens, flagged truncated; beam search
        runs 19 steps after the prompt's, so at most 20 tokens."""
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
        from nemo_archive import NemoArchive, write_nemo
        import tarfile
        import yaml
        fixture = PARAKEET_FIXTURE.parent / "canary-aed-tiny"
        wav = str(fixture / "audio" / "jfk_div8.wav")
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            with tarfile.open(fixture / "model.nemo") as tar:
                tar.extractall(tmp / "parts")
            cfg = yaml.safe_load((tmp / "parts" / "model_config.yaml").read_text())
            cfg["decoding"]["greedy"] = {"max_generation_delta": 2}
            cfg["decoding"]["beam"]["max_generation_delta"] = 2
            (tmp / "parts" / "model_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
            write_nemo(tmp / "delta.nemo", {p.name: p for p in (tmp / "parts").iterdir() if p.is_file()})
            gguf = tmp / "delta.gguf"
            converter = Path(__file__).resolve().parent.parent / "scripts" / "convert-canary-aed.py"
            subprocess.run([sys.executable, str(converter), "--nemo", str(tmp / "delta.nemo"), "-o", str(gguf),
                            "--outtype", "f32"], check=True, capture_output=True)
            r = cli("-m", str(gguf), "--json", "--translate-to", "de", wav)  # NeMo runs this task to its cap
            j = json.loads(r.stdout)
            self.assertEqual(len(j["tokens"]), 19, r.stderr)
            self.assertTrue(j["truncated"])
            b = json.loads(cli("-m", str(gguf), "--json", "--beam", "4", "--translate-to", "de", wav).stdout)
            self.assertLessEqual(len(b["tokens"]), 20)

    def test_diarize_attributes_every_word_and_segment(self):
        """--diarize with the Sortformer fixture model and the Parakeet fixture model: every JSON segment and
        word has a speaker, a segment's words share its speaker, SRT cues carry "[Speaker k]"; a transcriber
        given as the diarizer and the diarizer given as the transcriber are one clear line. A model without
        word times (Canary-Qwen) is transcribed turn by turn: every segment a speaker, a txt line per turn."""
        diarizer = str(MODELS / "sortformer-tiny-f32.gguf")
        wav = str(PARAKEET_FIXTURE.parent / "sortformer-tiny" / "audio" / "conv2_budget.wav")
        r = cli("-m", PARAKEET, "--diarize", diarizer, "--json", "--timestamps", "word", wav)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertTrue(j["segments"])
        for seg in j["segments"]:
            self.assertRegex(seg["speaker"], r"^speaker_[0-3]$")
            self.assertEqual({w["speaker"] for w in seg["words"]}, {seg["speaker"]})
        plain = json.loads(cli("-m", PARAKEET, "--json", wav).stdout)
        self.assertEqual(j["text"], plain["text"])  # the same words, now attributed
        srt = cli("-m", PARAKEET, "--diarize", diarizer, "--format", "srt", wav).stdout.decode()
        cues = [c.split("\n", 2)[2] for c in srt.strip().split("\n\n")]
        self.assertTrue(all(c.startswith("[Speaker ") for c in cues), cues)
        r = cli("-m", F32, "--diarize", diarizer, "--max-new-tokens", "4", "--json", wav)
        self.assertEqual(r.returncode, 0, r.stderr)
        turns = json.loads(r.stdout)["segments"]
        self.assertGreater(len({seg["speaker"] for seg in turns}), 1)
        for seg in turns:
            self.assertRegex(seg["speaker"], r"^speaker_[0-3]$")
        txt = cli("-m", F32, "--diarize", diarizer, "--max-new-tokens", "4", wav).stdout.decode()
        self.assertTrue(all(line.startswith("[Speaker ") for line in txt.splitlines() if line.strip()), txt)
        for args, says in ((["-m", PARAKEET, "--diarize", PARAKEET, wav], "not a Sortformer diarizer"),
                           (["-m", diarizer, wav], "is a diarizer")):
            r = cli(*args)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn(says, r.stderr.decode())

    def test_draft_model_gives_the_plain_ids(self):
        """--draft with the Parakeet fixture model: every clip's ids, text and segments are the plain run's
        (the reference's greedy ids); the JSON timings count the draft; a model that cannot take a draft,
        and a draft that does not load, are clear errors."""
        clips = ("jfk", "jfk_div8", "tone_noise_3s")
        files = [str(FIXTURE / "audio" / f"{c}.wav") for c in clips]
        for c, f in zip(clips, files):
            r = cli("-m", F32, "--kv-type", "f32", "--max-new-tokens", "16", "--json", "--draft", PARAKEET, f)
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            golden = json.loads((FIXTURE / "golden" / c / "greedy_ids.json").read_text())
            self.assertEqual(j["tokens"], golden[:len(j["tokens"])], c)
            plain = json.loads(cli("-m", F32, "--kv-type", "f32", "--max-new-tokens", "16", "--json", f).stdout)
            self.assertEqual((j["text"], j["segments"]), (plain["text"], plain["segments"]), c)
            self.assertGreater(j["timings"]["draft_ms"], 0, c)
            self.assertLessEqual(j["timings"]["n_accepted_tokens"], j["timings"]["n_drafted_tokens"])
        r = cli("-m", PARAKEET, "--draft", F32, JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not decode with a draft", r.stderr.decode())
        r = cli("-m", F32, "--draft", "/nonexistent/draft.gguf", JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn("/nonexistent/draft.gguf", r.stderr.decode())
        self.assertIn("--draft", cli("--help").stdout.decode())

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
                (("-m", F32, "--max-audio-s", "5", JFK), "INPUT_TOO_LONG"),
                ((JFK,), "no model"),
            ]
            for args, needle in cases:
                r = cli(*args)
                self.assertNotEqual(r.returncode, 0, args)
                err = r.stderr.decode().strip().splitlines()
                self.assertEqual(len(err), 1, (args, err))
                self.assertIn(needle, err[0])
                self.assertTrue(err[0].startswith("transcribe-cli: error:"), err[0])


class ParakeetCli(unittest.TestCase):
    def test_a_v3_vocabulary_loads_and_runs(self):
        """parakeet-tdt-0.6b-v3's layout (make-synthetic-checkpoint --preset small-v3: an 8192-piece
        vocabulary, a joint of 8192 + blank + 5 durations): it converts, loads and transcribes, every id in
        the vocabulary, words timed."""
        root = Path(__file__).resolve().parent.parent
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            for cmd in ([sys.executable, str(root / "scripts" / "make-synthetic-checkpoint.py"), "--family", "parakeet-tdt",
                         "--preset", "small-v3", "--out", str(tmp / "v3")],
                        [sys.executable, str(root / "scripts" / "convert-parakeet.py"), "--nemo", str(tmp / "v3" / "model.nemo"),
                         "-o", str(tmp / "v3.gguf"), "--outtype", "f32"]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("vocab 8192 + blank", r.stdout)
            r = cli("-m", str(tmp / "v3.gguf"), "--json", str(PARAKEET_FIXTURE / "audio" / "jfk.wav"))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            ids = [t for s in j["segments"] for t in s["tokens"]]
            self.assertTrue(ids)
            self.assertTrue(all(0 <= t < 8192 for t in ids))
            self.assertGreater(max(ids), 1024)  # the random joint reaches past v2's vocabulary
            self.assertTrue(j["words"])

    def test_json_words_are_nemos(self):
        """--json with a word-timed model: words (top level and per segment) with NeMo's texts and times."""
        for clip in ("jfk", "jfk_div8", "tone_noise_3s"):
            hyp = json.loads((PARAKEET_FIXTURE / "golden" / clip / "hypothesis.json").read_text())
            r = cli("-m", PARAKEET, "--json", str(PARAKEET_FIXTURE / "audio" / f"{clip}.wav"))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual(j["text"], hyp["text"])
            want = [{"word": w["word"], "t0_ms": w["start_offset"] * FRAME_MS, "t1_ms": w["end_offset"] * FRAME_MS}
                    for w in hyp["timestamp"]["word"]]
            self.assertEqual(j["words"], want, clip)
            self.assertEqual([w for s in j["segments"] for w in s["words"]], want, clip)
            self.assertEqual([s["text"] for s in j["segments"]], [s["segment"] for s in hyp["timestamp"]["segment"]])
        r = cli("-m", PARAKEET, "--json", "--timestamps", "segment", JFK)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertNotIn("words", j)
        self.assertNotIn("words", j["segments"][0])

    def test_subtitle_cues_follow_words(self):
        r = cli("-m", PARAKEET, "--format", "srt", JFK)
        self.assertEqual(r.returncode, 0, r.stderr)
        words = json.loads(cli("-m", PARAKEET, "--json", JFK).stdout)["words"]
        cues = r.stdout.decode().strip().split("\n\n")
        self.assertGreater(len(cues), 1)
        joined = []
        for cue in cues:
            _, times, text = cue.split("\n", 2)
            self.assertLessEqual(len(text), 42, cue)
            t0, t1 = [int(t[:2]) * 3600000 + int(t[3:5]) * 60000 + int(t[6:8]) * 1000 + int(t[9:12])
                      for t in times.split(" --> ")]
            self.assertLessEqual(t1 - t0, 7000, cue)
            joined += text.split(" ")
            self.assertIn(t0, [w["t0_ms"] for w in words])
            self.assertIn(t1, [w["t1_ms"] for w in words])
        self.assertEqual(joined, [w["word"] for w in words])

    def test_stream_prints_the_transcript_as_it_is_decoded(self):
        for model, audio in ((PARAKEET, JFK), (F32, str(FIXTURE / "audio" / "jfk_0p7s.wav"))):
            plain = cli("-m", model, "--max-new-tokens", "8", audio)
            streamed = cli("-m", model, "--max-new-tokens", "8", "--stream", audio)
            self.assertEqual(streamed.returncode, 0, streamed.stderr)
            self.assertEqual(streamed.stdout, plain.stdout)
        r = cli("-m", PARAKEET, "--stream", "--format", "json", JFK)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--stream", r.stderr.decode())

    def test_word_timestamps_need_a_model_that_gives_them(self):
        r = cli("-m", F32, "--timestamps", "word", JFK)
        self.assertEqual(r.returncode, 1)
        err = r.stderr.decode().strip().splitlines()
        self.assertEqual(len(err), 1, err)
        self.assertIn("gives no word times", err[0])

    def test_long_audio_keeps_each_pieces_words(self):
        """Four copies of jfk with 2 s of silence between them, cut into 15 s pieces: every copy gets words,
        at times inside that copy (each piece's words shifted by where the piece starts), in order."""
        with wave.open(JFK) as w:
            rate, pcm = w.getframerate(), w.readframes(w.getnframes())
        gap = b"\0\0" * (2 * rate)
        period_ms = (len(pcm) // 2 + 2 * rate) * 1000 // rate
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "long.wav"
            with wave.open(str(path), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(rate)
                w.writeframes((pcm + gap) * 4)
            r = cli("-m", PARAKEET, "--json", "--chunk-ms", "15000", str(path))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
        words = j["words"]
        self.assertEqual([w["t0_ms"] for w in words], sorted(w["t0_ms"] for w in words))
        self.assertEqual(sum(len(s["words"]) for s in j["segments"]), len(words))
        for k in range(4):  # a piece per copy (cut in the silence): words starting in that copy's speech
            inside = [w for w in words if k * period_ms <= w["t0_ms"] < k * period_ms + 11000]
            self.assertGreaterEqual(len(inside), 3, k)
        self.assertTrue(all(w["t1_ms"] <= 4 * period_ms for w in words))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
