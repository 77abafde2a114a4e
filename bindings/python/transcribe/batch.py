"""Transcribe a NeMo manifest on a Dask cluster.

    python3 -m transcribe.batch --model M.gguf --manifest IN.jsonl --out OUT.jsonl
        [--scheduler ADDRESS] [--workers N] [--threads-per-worker T] [--timestamps] [--resume]
        [--vad VAD.gguf] [--draft DRAFT.gguf] [--diarize SORTFORMER.gguf]

IN.jsonl has one JSON object a line with `audio_filepath` (relative paths are taken from the manifest's
folder first), optionally `duration` and `text`, and NeMo's Canary task keys `source_lang` (the speech's
language), `target_lang` (the text's: another one translates) and `pnc` ("yes"/"no": punctuation and
capitals), for models with a task prompt, and `hotwords` (a list of phrases or a comma-separated string,
with `hotword_weight`) for Parakeet models, and `prompt` (context, as the server's field) for Canary-Qwen. Every output line keeps its input fields and adds
`pred_text` (and `segments` / `words` with --timestamps; with --diarize each of them has `speaker`,
"speaker_<k>" as NeMo names them, and --timestamps is implied); a file that fails gets an `error` field
instead, never a lost line. Lines come out in input order, written as soon as their turn comes, so
--resume skips what OUT already holds. Without --scheduler a local cluster of N worker processes
starts here; with one, that cluster's workers are used (each must be able to import this package and
read the model and audio paths). Each worker loads the model once (a worker plugin) and runs one file at
a time with T threads. With `text` references the corpus WER is printed at the end."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .wer import corpus_wer

PLUGIN_NAME = "transcribe-model"


class ModelPlugin:
    """A Dask worker plugin: the model, loaded once per worker process and kept on the worker."""

    name = PLUGIN_NAME

    def __init__(self, model: str, threads: int, max_new_tokens: int, vad: str | None, draft: str | None = None,
                 diarize: str | None = None):
        self.model, self.threads, self.max_new_tokens, self.vad = model, threads, max_new_tokens, vad
        self.draft, self.diarize = draft, diarize

    def setup(self, worker):
        from . import Model
        worker.transcribe_model = Model(self.model, threads=self.threads)
        worker.transcribe_options = {"max_new_tokens": self.max_new_tokens, "vad": self.vad, "draft": self.draft,
                                     "diarize": self.diarize}

    def teardown(self, worker):
        model = getattr(worker, "transcribe_model", None)
        if model is not None:
            model.close()


def task_options(entry: dict) -> dict:
    """The transcribe() arguments of a line's NeMo Canary keys (source_lang, target_lang, pnc), its hotwords and
    its prompt."""
    options = {}
    if isinstance(entry.get("source_lang"), str):
        options["language"] = entry["source_lang"]
    if isinstance(entry.get("target_lang"), str):
        options["translate_to"] = entry["target_lang"]
    pnc = entry.get("pnc")
    if pnc is not None:
        options["punctuation"] = str(pnc).strip().lower() not in ("no", "false", "0")
    hotwords = entry.get("hotwords")
    if isinstance(hotwords, str) or (isinstance(hotwords, list) and all(isinstance(h, str) for h in hotwords)):
        options["hotwords"] = hotwords
    if isinstance(entry.get("hotword_weight"), (int, float)) and not isinstance(entry.get("hotword_weight"), bool):
        options["hotword_weight"] = float(entry["hotword_weight"])
    if isinstance(entry.get("prompt"), str):
        options["prompt"] = entry["prompt"]
    return options


def transcribe_entry(path: str, timestamps: bool, task: dict | None = None) -> dict:
    """The task a worker runs: the fields to add to a manifest line (pred_text..., or error)."""
    from distributed import get_worker

    from . import TranscribeError
    worker = get_worker()
    try:
        r = worker.transcribe_model.transcribe(path, **worker.transcribe_options, **(task or {}))
    except TranscribeError as exc:
        return {"error": str(exc)}
    out = {"pred_text": r.text.strip()}
    diarized = worker.transcribe_options.get("diarize") is not None
    if timestamps or diarized:
        def who(item, fields):
            if diarized and item.speaker >= 0:
                fields["speaker"] = f"speaker_{item.speaker}"
            return fields
        out["segments"] = [who(s, {"t0_ms": s.t0_ms, "t1_ms": s.t1_ms, "text": s.text.strip()}) for s in r.segments]
        out["words"] = [who(w, {"word": w.word, "t0_ms": w.t0_ms, "t1_ms": w.t1_ms}) for w in r.words]
    return out


def read_manifest(path: Path) -> list:
    """(entry, resolved audio path or None, parse error or None) per non-empty line."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or not isinstance(entry.get("audio_filepath"), str):
                    raise ValueError("no audio_filepath")
            except ValueError as exc:
                rows.append(({"manifest_line": n, "raw": line.rstrip("\n")}, None, f"line {n}: not a manifest entry ({exc})"))
                continue
            audio = Path(entry["audio_filepath"])
            if not audio.is_absolute() and (path.parent / audio).exists():
                audio = path.parent / audio
            rows.append((entry, str(audio), None))
    return rows


def already_done(out: Path, rows: list) -> int:
    """How many leading lines of OUT match the manifest (a partly written last line is dropped)."""
    if not out.exists():
        return 0
    done, keep = 0, 0
    with open(out, "rb") as f:
        data = f.read()
    for line in data.split(b"\n"):
        if done >= len(rows):
            break
        try:
            j = json.loads(line)
        except ValueError:
            break
        want = rows[done][0]
        if any(j.get(k) != v for k, v in want.items()):
            break
        done += 1
        keep += len(line) + 1
    with open(out, "r+b") as f:
        f.truncate(keep)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m transcribe.batch", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scheduler", help="address of a running Dask scheduler (default: start a local cluster)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="local cluster workers")
    ap.add_argument("--threads-per-worker", type=int, default=1, help="engine threads per worker")
    ap.add_argument("--timestamps", action="store_true", help="add segments and words to each line")
    ap.add_argument("--resume", action="store_true", help="keep OUT's lines and transcribe only the rest")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--vad", help="a Silero VAD GGUF: speech-aware long audio")
    ap.add_argument("--draft", help="speculative decoding: a faster model's GGUF drafts each file (same text, sooner)")
    ap.add_argument("--diarize", help="a Sortformer GGUF: speakers on every segment and word (implies --timestamps)")
    a = ap.parse_args(argv)

    from distributed import Client, LocalCluster, as_completed

    manifest, out = Path(a.manifest), Path(a.out)
    rows = read_manifest(manifest)
    start = already_done(out, rows) if a.resume else 0
    if not a.resume and out.exists():
        out.unlink()
    if start:
        print(f"resuming after {start} lines already in {out}", file=sys.stderr)
    model = str(Path(a.model).resolve())
    cluster = None
    if a.scheduler:
        client = Client(a.scheduler)
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        draft = str(Path(a.draft).resolve()) if a.draft else None
        diarize = str(Path(a.diarize).resolve()) if a.diarize else None
        client.register_worker_plugin(ModelPlugin(model, a.threads_per_worker, a.max_new_tokens, a.vad, draft, diarize),
                                      name=PLUGIN_NAME)
        futures, results = {}, {}
        for i in range(start, len(rows)):
            entry, audio, problem = rows[i]
            if problem:
                results[i] = {"error": problem}
            else:
                futures[client.submit(transcribe_entry, str(Path(audio).resolve()) if Path(audio).exists() else audio,
                                      a.timestamps, task_options(entry), pure=False)] = i
        t0, written = time.time(), start
        with open(out, "a", encoding="utf-8") as f:
            def flush():
                nonlocal written
                while written in results:
                    f.write(json.dumps({**rows[written][0], **results.pop(written)}, ensure_ascii=False) + "\n")
                    written += 1
                f.flush()
                print(f"\r{written}/{len(rows)} lines ({time.time() - t0:.0f} s)", end="", file=sys.stderr, flush=True)
            flush()
            for fut in as_completed(list(futures)):
                i = futures.pop(fut)
                try:
                    results[i] = fut.result()
                except Exception as exc:  # noqa: BLE001 - a task lost for good (e.g. its workers kept dying)
                    results[i] = {"error": f"{type(exc).__name__}: {exc}"}
                flush()
        print(file=sys.stderr)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    with open(out, encoding="utf-8") as f:
        done = [json.loads(line) for line in f if line.strip()]
    pairs = [(d["text"], d.get("pred_text", "")) for d in done if isinstance(d.get("text"), str)]
    failed = sum("error" in d for d in done)
    if pairs:
        wer, errors, words = corpus_wer(pairs)
        print(f"WER {100 * wer:.2f}% ({errors} errors / {words} words, {len(pairs)} lines with text)")
    print(f"{len(done)} lines in {out}, {failed} failed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
