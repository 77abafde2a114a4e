"""python3 -m transcribe.batch on Dask: a 40-line manifest over a local cluster of 2 workers equals the CLI
on each file; a worker killed mid-run loses nothing; --resume; the WER."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from transcribe.wer import corpus_wer, edit_distance

distributed = pytest.importorskip("distributed")

PARAKEET_CLIPS = ["jfk", "jfk_div8", "tone_noise_3s"]


def env(paths):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(paths["root"] / "bindings" / "python") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def manifest(paths, tmp_path, n=40, missing_at=None):
    """n lines cycling the Parakeet fixture clips (relative paths, as NeMo manifests often have them),
    with the golden transcripts as `text`; one missing file at missing_at."""
    audio = tmp_path / "audio"
    audio.mkdir(exist_ok=True)
    for c in PARAKEET_CLIPS:
        (audio / f"{c}.wav").write_bytes((paths["parakeet"] / "audio" / f"{c}.wav").read_bytes())
    lines = []
    for i in range(n):
        c = PARAKEET_CLIPS[i % 3]
        text = (paths["parakeet"] / "golden" / c / "text.txt").read_text().strip()
        lines.append({"audio_filepath": f"audio/{c}.wav", "duration": 1.0, "text": text, "n": i})
    if missing_at is not None:
        lines[missing_at] = {"audio_filepath": "audio/nothing.wav", "n": missing_at}
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, lines


def batch(paths, man, out, *extra, timeout=300):
    cmd = [sys.executable, "-m", "transcribe.batch", "--model", str(paths["models"] / "parakeet-tdt-tiny-f32.gguf"),
           "--manifest", str(man), "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env(paths), timeout=timeout)


def cli_text(paths, audio):
    r = subprocess.run([str(paths["cli"]), "-m", str(paths["models"] / "parakeet-tdt-tiny-f32.gguf"), "--json", str(audio)],
                       capture_output=True, timeout=60)
    return json.loads(r.stdout)


def test_wer_by_hand():
    assert edit_distance("a b c".split(), "a x c".split()) == 1
    assert edit_distance("a b c".split(), "a c".split()) == 1
    assert edit_distance("a b".split(), "a b c d".split()) == 2
    assert edit_distance([], "a".split()) == 1
    assert corpus_wer([("a b c d", "a b c d"), ("e f", "e")]) == (1 / 6, 1, 6)
    assert corpus_wer([("", "")]) == (0.0, 0, 0)


def test_manifest_on_a_local_cluster_equals_the_cli(paths, tmp_path):
    man, lines = manifest(paths, tmp_path, missing_at=17)
    out = tmp_path / "out.jsonl"
    r = batch(paths, man, out, "--workers", "2", "--timestamps")
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(got) == 40
    want = {c: cli_text(paths, paths["parakeet"] / "audio" / f"{c}.wav") for c in PARAKEET_CLIPS}
    for i, (line, inp) in enumerate(zip(got, lines)):
        assert {k: line[k] for k in inp} == inp, i  # every input field kept, in input order
        if i == 17:
            assert "FILE_NOT_FOUND" in line["error"] and "pred_text" not in line
            continue
        w = want[PARAKEET_CLIPS[i % 3]]
        assert line["pred_text"] == w["text"], i
        assert line["words"] == w["words"], i
        assert [s["text"] for s in line["segments"]] == [s["text"] for s in w["segments"]]
    # references = the goldens NeMo wrote, and the engine reproduces them: 0 errors
    assert "WER 0.00%" in r.stdout


def test_a_worker_killed_mid_run_loses_nothing(paths, tmp_path):
    """60 files of ~0.1-0.2 s each (the Canary-Qwen fixture, 96 new tokens) on a cluster of 2 workers with
    nannies; one worker is SIGKILLed once a few lines are out: the job still writes all 60, right."""
    canary = paths["models"] / "canary-qwen-tiny-f32.gguf"
    clips = ["jfk", "jfk_0p7s"]
    man = tmp_path / "in.jsonl"
    man.write_text("".join(json.dumps({"audio_filepath": str(paths["canary"] / "audio" / f"{clips[i % 2]}.wav"), "n": i}) + "\n"
                           for i in range(60)))
    want = {}
    for c in clips:
        r = subprocess.run([str(paths["cli"]), "-m", str(canary), "--json", "--max-new-tokens", "96",
                            str(paths["canary"] / "audio" / f"{c}.wav")], capture_output=True, timeout=60)
        want[c] = json.loads(r.stdout)["text"].strip()
    out = tmp_path / "out.jsonl"
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "transcribe.batch", "--model", str(canary), "--manifest", str(man),
                                 "--out", str(out), "--scheduler", cluster.scheduler_address, "--max-new-tokens", "96"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(paths))
        deadline = time.time() + 120
        while (not out.exists() or len(out.read_text().splitlines()) < 4) and time.time() < deadline:
            time.sleep(0.02)
        victim = sorted(client.run(os.getpid).values())[0]
        os.kill(victim, signal.SIGKILL)  # the nanny restarts it; its task goes to the other worker
        at_kill = len(out.read_text().splitlines())
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        assert victim not in client.run(os.getpid).values()
    finally:
        client.close()
        cluster.close()
    assert at_kill < 50, "the job was (nearly) over before the kill: the test proves nothing"
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["n"] for g in got] == list(range(60))
    assert all("error" not in g for g in got), [g for g in got if "error" in g]
    assert [g["pred_text"] for g in got] == [want[clips[i % 2]] for i in range(60)]


def test_resume_skips_what_is_done(paths, tmp_path):
    man, lines = manifest(paths, tmp_path, n=12)
    full = tmp_path / "full.jsonl"
    assert batch(paths, man, full, "--workers", "1").returncode == 0
    done = full.read_text().splitlines()
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join(done[:5]) + "\n" + done[5][:20])  # five lines and a torn sixth
    r = batch(paths, man, part, "--workers", "1", "--resume")
    assert r.returncode == 0, r.stderr
    assert "resuming after 5 lines" in r.stderr
    assert part.read_text() == full.read_text()


def test_draft_gives_the_cli_s_text(paths, tmp_path):
    """--draft: each worker drafts with the Parakeet fixture model; every line's text is the CLI's plain one."""
    canary = paths["models"] / "canary-qwen-tiny-f32.gguf"
    clips = ["jfk", "jfk_0p7s", "jfk_div8"]
    man = tmp_path / "in.jsonl"
    man.write_text("".join(json.dumps({"audio_filepath": str(paths["canary"] / "audio" / f"{c}.wav")}) + "\n"
                           for c in clips))
    want = [json.loads(subprocess.run([str(paths["cli"]), "-m", str(canary), "--json", "--max-new-tokens", "24",
                                       str(paths["canary"] / "audio" / f"{c}.wav")], capture_output=True,
                                      timeout=60).stdout)["text"].strip() for c in clips]
    out = tmp_path / "out.jsonl"
    r = subprocess.run([sys.executable, "-m", "transcribe.batch", "--model", str(canary), "--manifest", str(man),
                        "--out", str(out), "--workers", "1", "--max-new-tokens", "24",
                        "--draft", str(paths["models"] / "parakeet-tdt-tiny-f32.gguf")],
                       capture_output=True, text=True, env=env(paths), timeout=300)
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g.get("error") for g in got] == [None] * 3
    assert [g["pred_text"] for g in got] == want


def test_canary_task_keys_reach_the_model(paths, tmp_path):
    """NeMo's Canary manifest keys: source_lang / target_lang / pnc give each line the CLI's text for that
    task (canary-aed-tiny), an unknown language is that line's error."""
    model = paths["models"] / "canary-aed-tiny-f32.gguf"
    audio = str(paths["root"] / "tests" / "fixtures" / "canary-aed-tiny" / "audio" / "jfk_div8.wav")
    lines = [{"audio_filepath": audio, "source_lang": "en", "target_lang": "en", "pnc": "yes"},
             {"audio_filepath": audio, "source_lang": "en", "target_lang": "de", "pnc": "yes"},
             {"audio_filepath": audio, "source_lang": "en", "target_lang": "en", "pnc": "no"},
             {"audio_filepath": audio, "source_lang": "xx"}]
    flags = [["--language", "en"], ["--language", "en", "--translate-to", "de"], ["--language", "en", "--no-pnc"]]
    want = [json.loads(subprocess.run([str(paths["cli"]), "-m", str(model), "--json", *f, audio], capture_output=True,
                                      timeout=60).stdout)["text"].strip() for f in flags]
    assert want[0] != want[1]
    man, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    man.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = subprocess.run([sys.executable, "-m", "transcribe.batch", "--model", str(model), "--manifest", str(man),
                        "--out", str(out), "--workers", "1"], capture_output=True, text=True, env=env(paths), timeout=300)
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g.get("pred_text") for g in got[:3]] == want
    assert "en, de, es, fr" in got[3]["error"]


def test_hotwords_keys_reach_the_model(paths, tmp_path):
    """A manifest line's hotwords (a list or a comma-separated string) and hotword_weight: NeMo's boosted
    transcript (the parakeet-hotwords golden of parakeet-rnnt-tiny); a line without them: the plain one."""
    root = paths["root"] / "tests" / "fixtures"
    want = json.loads((root / "parakeet-hotwords" / "golden" / "parakeet-rnnt-tiny" / "case0" / "jfk.json").read_text())
    plain = json.loads((root / "parakeet-rnnt-tiny" / "golden" / "jfk" / "hypothesis.json").read_text())["text"]
    audio = str(root / "parakeet-rnnt-tiny" / "audio" / "jfk.wav")
    lines = [{"audio_filepath": audio, "hotwords": want["phrases"], "hotword_weight": want["alpha"]},
             {"audio_filepath": audio, "hotwords": ",".join(want["phrases"]), "hotword_weight": want["alpha"]},
             {"audio_filepath": audio}]
    man, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    man.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = subprocess.run([sys.executable, "-m", "transcribe.batch", "--model", str(paths["models"] / "parakeet-rnnt-tiny-f32.gguf"),
                        "--manifest", str(man), "--out", str(out), "--workers", "1"], capture_output=True, text=True,
                       env=env(paths), timeout=300)
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g.get("pred_text") for g in got] == [want["text"], want["text"], plain]


def test_prompt_key_reaches_the_model(paths, tmp_path):
    """A manifest line's prompt (Canary-Qwen's context, the server's field): the CLI's --prompt text; a line
    without one: the plain text."""
    model = paths["models"] / "canary-qwen-tiny-f32.gguf"
    audio = str(paths["root"] / "tests" / "fixtures" / "canary-qwen-tiny" / "audio" / "jfk_0p7s.wav")
    flags = [["--prompt", "Names: Kennedy"], []]
    want = [json.loads(subprocess.run([str(paths["cli"]), "-m", str(model), "--json", "--max-new-tokens", "12", *f, audio],
                                      capture_output=True, timeout=60).stdout)["text"].strip() for f in flags]
    assert want[0] != want[1]
    man, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    man.write_text(json.dumps({"audio_filepath": audio, "prompt": "Names: Kennedy"}) + "\n" +
                   json.dumps({"audio_filepath": audio}) + "\n")
    r = subprocess.run([sys.executable, "-m", "transcribe.batch", "--model", str(model), "--manifest", str(man),
                        "--out", str(out), "--workers", "1", "--max-new-tokens", "12"], capture_output=True, text=True,
                       env=env(paths), timeout=300)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x).get("pred_text") for x in out.read_text().splitlines()] == want


def test_diarize_gives_the_cli_s_speakers(paths, tmp_path):
    """--diarize: each line's segments and words carry the CLI --diarize run's speakers."""
    parakeet = paths["models"] / "parakeet-tdt-tiny-f32.gguf"
    diarizer = paths["models"] / "sortformer-tiny-f32.gguf"
    wav = paths["root"] / "tests" / "fixtures" / "sortformer-tiny" / "audio" / "conv2_budget.wav"
    man = tmp_path / "in.jsonl"
    man.write_text(json.dumps({"audio_filepath": str(wav)}) + "\n")
    want = json.loads(subprocess.run([str(paths["cli"]), "-m", str(parakeet), "--json", "--timestamps", "word",
                                      "--diarize", str(diarizer), str(wav)], capture_output=True, timeout=60).stdout)
    out = tmp_path / "out.jsonl"
    r = subprocess.run([sys.executable, "-m", "transcribe.batch", "--model", str(parakeet), "--manifest", str(man),
                        "--out", str(out), "--workers", "1", "--diarize", str(diarizer)],
                       capture_output=True, text=True, env=env(paths), timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())
    assert [s["speaker"] for s in got["segments"]] == [s["speaker"] for s in want["segments"]]
    assert [w["speaker"] for w in got["words"]] == [w["speaker"] for w in want["words"]]
