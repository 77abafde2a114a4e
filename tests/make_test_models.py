#!/usr/bin/env python3
"""Converts the tiny fixture into the GGUF files the tests load: F32 (parity), BF16 (the default
outtype), and one with a deliberately wrong LoRA scale (alpha = r, scale 1 instead of 4)."""
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


if __name__ == "__main__":
    main()
