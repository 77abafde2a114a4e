#!/usr/bin/env python3
"""Converts the tiny fixtures into the GGUF files the tests load. Canary-Qwen: F32 (parity), BF16 (the
default outtype), F16, and one with a deliberately wrong LoRA scale (alpha = r, scale 1 instead of 4).
Parakeet (TDT, CTC, the TDT+CTC hybrid, RNNT): F32 and BF16 from the .nemo archives."""
import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def convert(converter, ckpt, llm, out, outtype):
    cmd = [sys.executable, converter, "--checkpoint", str(ckpt), "--llm", str(llm), "-o", str(out),
           "--outtype", outtype, "--name", "canary-qwen-tiny"]
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--converter", required=True)
    ap.add_argument("--parakeet-fixture", required=True)
    ap.add_argument("--parakeet-converter", required=True)
    ap.add_argument("--parakeet-ctc-fixture", required=True)
    ap.add_argument("--canary-aed-fixture", required=True)
    ap.add_argument("--canary-aed-converter", required=True)
    a = ap.parse_args()
    fixture, out = Path(a.fixture), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt, llm = fixture / "checkpoint", fixture / "llm"
    convert(a.converter, ckpt, llm, out / "canary-qwen-tiny-f32.gguf", "f32")
    convert(a.converter, ckpt, llm, out / "canary-qwen-tiny-bf16.gguf", "bf16")
    convert(a.converter, ckpt, llm, out / "canary-qwen-tiny-f16.gguf", "f16")

    wrong = out / "wrong-lora-scale"
    if wrong.exists():
        shutil.rmtree(wrong)
    wrong.mkdir()
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["lora"]["lora_alpha"] = cfg["lora"]["r"]
    (wrong / "config.json").write_text(json.dumps(cfg))
    os.symlink((ckpt / "model.safetensors").resolve(), wrong / "model.safetensors")
    convert(a.converter, wrong, llm, out / "canary-qwen-tiny-wrong-lora.gguf", "f32")

    fixtures = Path(a.parakeet_fixture).parent
    for name, fixture_dir in (("parakeet-tdt-tiny", a.parakeet_fixture), ("parakeet-ctc-tiny", a.parakeet_ctc_fixture),
                              ("parakeet-tdt-ctc-tiny", fixtures / "parakeet-tdt-ctc-tiny"),
                              ("parakeet-rnnt-tiny", fixtures / "parakeet-rnnt-tiny")):
        nemo = Path(fixture_dir) / "model.nemo"
        for outtype in ("f32", "bf16"):
            subprocess.run([sys.executable, a.parakeet_converter, "--nemo", str(nemo), "-o",
                            str(out / f"{name}-{outtype}.gguf"), "--outtype", outtype, "--name", name], check=True)

    nemo = Path(a.canary_aed_fixture) / "model.nemo"
    for outtype in ("f32", "bf16"):
        subprocess.run([sys.executable, a.canary_aed_converter, "--nemo", str(nemo), "-o",
                        str(out / f"canary-aed-tiny-{outtype}.gguf"), "--outtype", outtype, "--name", "canary-aed-tiny"],
                       check=True)
    fixtures = Path(a.canary_aed_fixture).parent
    sortformer = Path(__file__).resolve().parent.parent / "scripts" / "convert-sortformer.py"
    for outtype in ("f32", "bf16"):
        subprocess.run([sys.executable, str(sortformer), "--nemo", str(fixtures / "sortformer-tiny" / "model.nemo"), "-o",
                        str(out / f"sortformer-tiny-{outtype}.gguf"), "--outtype", outtype, "--name", "sortformer-tiny"],
                       check=True)
    whisper = Path(__file__).resolve().parent.parent / "scripts" / "convert-whisper.py"
    for outtype in ("f32", "f16"):
        subprocess.run([sys.executable, str(whisper), "--checkpoint", str(fixtures / "whisper-tiny" / "model.pt"), "-o",
                        str(out / f"whisper-tiny-{outtype}.gguf"), "--outtype", outtype, "--name", "whisper-tiny"],
                       check=True)
    qwen3_asr = Path(__file__).resolve().parent.parent / "scripts" / "convert-qwen3-asr.py"
    for outtype in ("f32", "bf16"):
        subprocess.run([sys.executable, str(qwen3_asr), "--checkpoint", str(fixtures / "qwen3-asr-tiny" / "checkpoint"),
                        "-o", str(out / f"qwen3-asr-tiny-{outtype}.gguf"), "--outtype", outtype, "--name", "qwen3-asr-tiny"],
                       check=True)
        subprocess.run([sys.executable, str(qwen3_asr), "--checkpoint", str(fixtures / "qwen3-aligner-tiny" / "checkpoint"),
                        "-o", str(out / f"qwen3-aligner-tiny-{outtype}.gguf"), "--outtype", outtype, "--name",
                        "qwen3-aligner-tiny"], check=True)
    # The cache-aware streaming models (streaming-tiny: a hybrid RNNT+CTC with four lookaheads, an EOU model).
    for name, nemo in (("streaming-hybrid-tiny", fixtures / "streaming-tiny" / "model.nemo"),
                       ("streaming-eou-tiny", fixtures / "streaming-tiny" / "eou" / "model.nemo")):
        subprocess.run([sys.executable, a.parakeet_converter, "--nemo", str(nemo), "-o", str(out / f"{name}-f32.gguf"),
                        "--outtype", "f32", "--name", name], check=True)
    v2 = Path(a.canary_aed_fixture).parent / "canary-aed-v2-tiny" / "model.nemo"
    subprocess.run([sys.executable, a.canary_aed_converter, "--nemo", str(v2), "-o", str(out / "canary-aed-v2-tiny-f32.gguf"),
                    "--outtype", "f32", "--name", "canary-aed-v2-tiny"], check=True)


if __name__ == "__main__":
    main()
