#!/usr/bin/env python3
"""Write a synthetic Canary-Qwen checkpoint in the exact upstream layout, with seeded random BF16 weights.

  --preset full   the real shapes of nvidia/canary-qwen-2.5b (~5.1 GB): speed and memory work
  --preset small  the same layout at toy sizes (seconds): tests of this script and the converter

Output: OUT/checkpoint/{config.json, model.safetensors} and OUT/llm/{config.json, vocab.json,
merges.txt, tokenizer_config.json} (the tokenizer files are copied from --tokenizer-from, by default
the bundled fixture, which carries the real Qwen2/Qwen3 tokenizer). Tensors are generated and written
one at a time, so memory stays at one tensor (chunked for the embedding).
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

PRESETS = {
    "full": dict(d_model=1024, enc_layers=32, enc_heads=8, sub_channels=256, n_mels=128, conv_kernel=9,
                 hidden=2048, llm_layers=28, heads=16, kv_heads=8, head_dim=128, ff=6144, vocab=151936,
                 lora_r=128, lora_alpha=256),
    "small": dict(d_model=128, enc_layers=2, enc_heads=2, sub_channels=32, n_mels=128, conv_kernel=9,
                  hidden=128, llm_layers=2, heads=4, kv_heads=2, head_dim=32, ff=384, vocab=151936,
                  lora_r=8, lora_alpha=16),
}


def salm_config(p: dict) -> dict:
    return {
        "pretrained_llm": "Qwen/Qwen3-1.7B",
        "pretrained_asr": "nvidia/canary-1b-flash",
        "prompt_format": "qwen",
        "audio_locator_tag": "<|audioplaceholder|>",
        "lora": {"task_type": "CAUSAL_LM", "r": p["lora_r"], "lora_alpha": p["lora_alpha"], "lora_dropout": 0.01,
                 "target_modules": ["q_proj", "v_proj"]},
        "perception": {
            "target": "nemo.collections.speechlm2.modules.perception.AudioPerceptionModule",
            "output_dim": p["hidden"],
            "preprocessor": {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
                             "sample_rate": 16000, "normalize": "per_feature", "window_size": 0.025,
                             "window_stride": 0.01, "window": "hann", "features": p["n_mels"], "n_fft": 512,
                             "log": True, "frame_splicing": 1, "dither": 1e-05, "pad_to": 0, "pad_value": 0.0},
            "encoder": {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": p["n_mels"],
                        "feat_out": -1, "n_layers": p["enc_layers"], "d_model": p["d_model"],
                        "subsampling": "dw_striding", "subsampling_factor": 8,
                        "subsampling_conv_channels": p["sub_channels"], "causal_downsampling": False,
                        "ff_expansion_factor": 4, "self_attention_model": "rel_pos", "n_heads": p["enc_heads"],
                        "att_context_size": [-1, -1], "xscaling": False, "untie_biases": True,
                        "pos_emb_max_len": 5000, "conv_kernel_size": p["conv_kernel"], "conv_norm_type": "batch_norm",
                        "conv_context_size": None, "dropout": 0.1, "dropout_pre_encoder": 0.1, "dropout_emb": 0.0,
                        "dropout_att": 0.1},
            "modality_adapter": {"_target_": "nemo.collections.speechlm2.modules.perception.IdentityConnector",
                                 "d_model": p["d_model"]},
        },
        "torch_dtype": "bfloat16",
    }


def qwen3_config(p: dict) -> dict:
    return {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": p["head_dim"], "hidden_act": "silu",
            "hidden_size": p["hidden"], "initializer_range": 0.02, "intermediate_size": p["ff"],
            "max_position_embeddings": 40960, "max_window_layers": p["llm_layers"], "model_type": "qwen3",
            "num_attention_heads": p["heads"], "num_hidden_layers": p["llm_layers"],
            "num_key_value_heads": p["kv_heads"], "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
            "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False, "vocab_size": p["vocab"]}


def tensor_specs(p: dict):
    """(name, shape, init) in upstream order; init = ('normal', std) | ('const', v) | ('var',) | ('I64',)."""
    d, C, H = p["d_model"], p["sub_channels"], p["enc_heads"]
    specs = []
    lin = lambda name, o, i, bias=True: [(name + ".weight", (o, i), ("normal", i ** -0.5))] + (
        [(name + ".bias", (o,), ("normal", 0.02))] if bias else [])
    norm = lambda name, n: [(name + ".weight", (n,), ("one",)), (name + ".bias", (n,), ("normal", 0.02))]
    specs.append(("perception.preprocessor.featurizer.fb", (1, p["n_mels"], 257), ("fb",)))
    specs.append(("perception.preprocessor.featurizer.window", (400,), ("hann",)))
    e = "perception.encoder."
    specs += [(e + "pre_encode.conv.0.weight", (C, 1, 3, 3), ("normal", 1 / 3)), (e + "pre_encode.conv.0.bias", (C,), ("normal", 0.02))]
    for k in ("2", "5"):
        specs += [(e + f"pre_encode.conv.{k}.weight", (C, 1, 3, 3), ("normal", 1 / 3)), (e + f"pre_encode.conv.{k}.bias", (C,), ("normal", 0.02))]
    for k in ("3", "6"):
        specs += [(e + f"pre_encode.conv.{k}.weight", (C, C, 1, 1), ("normal", C ** -0.5)), (e + f"pre_encode.conv.{k}.bias", (C,), ("normal", 0.02))]
    specs += lin(e + "pre_encode.out", d, C * p["n_mels"] // 8)
    for i in range(p["enc_layers"]):
        L = f"{e}layers.{i}."
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            specs += norm(L + n, d)
        for ff in ("feed_forward1", "feed_forward2"):
            specs += lin(L + ff + ".linear1", 4 * d, d) + lin(L + ff + ".linear2", d, 4 * d)
        for x in ("q", "k", "v", "out"):
            specs += lin(L + f"self_attn.linear_{x}", d, d)
        specs += lin(L + "self_attn.linear_pos", d, d, bias=False)
        specs += [(L + "self_attn.pos_bias_u", (H, d // H), ("normal", 0.1)), (L + "self_attn.pos_bias_v", (H, d // H), ("normal", 0.1))]
        specs += [(L + "conv.pointwise_conv1.weight", (2 * d, d, 1), ("normal", d ** -0.5)), (L + "conv.pointwise_conv1.bias", (2 * d,), ("normal", 0.02))]
        specs += [(L + "conv.depthwise_conv.weight", (d, 1, p["conv_kernel"]), ("normal", p["conv_kernel"] ** -0.5)), (L + "conv.depthwise_conv.bias", (d,), ("normal", 0.02))]
        specs += [(L + "conv.batch_norm.weight", (d,), ("one",)), (L + "conv.batch_norm.bias", (d,), ("normal", 0.02)),
                  (L + "conv.batch_norm.running_mean", (d,), ("normal", 0.1)), (L + "conv.batch_norm.running_var", (d,), ("var",)),
                  (L + "conv.batch_norm.num_batches_tracked", (), ("I64",))]
        specs += [(L + "conv.pointwise_conv2.weight", (d, d, 1), ("normal", d ** -0.5)), (L + "conv.pointwise_conv2.bias", (d,), ("normal", 0.02))]
    specs += lin("perception.proj", p["hidden"], d)
    h, hd = p["hidden"], p["head_dim"]
    specs.append(("embed_tokens.weight", (p["vocab"], h), ("normal", 0.5)))
    m = "llm.base_model.model.model."
    for j in range(p["llm_layers"]):
        L = f"{m}layers.{j}."
        specs += [(L + "input_layernorm.weight", (h,), ("one",)), (L + "post_attention_layernorm.weight", (h,), ("one",))]
        for proj, rows in (("q", p["heads"] * hd), ("v", p["kv_heads"] * hd)):
            specs += [(L + f"self_attn.{proj}_proj.base_layer.weight", (rows, h), ("normal", h ** -0.5)),
                      (L + f"self_attn.{proj}_proj.lora_A.default.weight", (p["lora_r"], h), ("normal", h ** -0.5)),
                      (L + f"self_attn.{proj}_proj.lora_B.default.weight", (rows, p["lora_r"]), ("normal", 0.01 / p["lora_r"] ** 0.5))]
        specs += [(L + "self_attn.k_proj.weight", (p["kv_heads"] * hd, h), ("normal", h ** -0.5)),
                  (L + "self_attn.o_proj.weight", (h, p["heads"] * hd), ("normal", (p["heads"] * hd) ** -0.5)),
                  (L + "self_attn.q_norm.weight", (hd,), ("one",)), (L + "self_attn.k_norm.weight", (hd,), ("one",)),
                  (L + "mlp.gate_proj.weight", (p["ff"], h), ("normal", h ** -0.5)),
                  (L + "mlp.up_proj.weight", (p["ff"], h), ("normal", h ** -0.5)),
                  (L + "mlp.down_proj.weight", (h, p["ff"]), ("normal", p["ff"] ** -0.5))]
    specs.append((m + "norm.weight", (h,), ("one",)))
    return specs


def to_bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def slaney_filterbank(n_mels: int) -> np.ndarray:
    """Slaney-scale, Slaney-normalised triangular filters (librosa.filters.mel defaults), 0-8 kHz."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        return np.where(f >= 1000, 15 + np.log(np.maximum(f, 1e-10) / 1000) / (np.log(6.4) / 27), lin)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        return np.where(m >= 15, 1000 * np.exp((np.log(6.4) / 27) * (m - 15)), (200.0 / 3) * m)

    fft_freqs = np.linspace(0, 8000, 257)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0), hz_to_mel(8000), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return w[None].astype(np.float32)


def produce(rng, name, shape, init, chunk_rows=8192):
    """Yields the tensor's bytes in row chunks."""
    kind = init[0]
    if kind == "I64":
        yield np.array(0, dtype=np.int64).tobytes()
        return
    if kind == "fb":
        yield to_bf16(slaney_filterbank(shape[1])).tobytes()
        return
    if kind == "hann":
        yield to_bf16(np.hanning(shape[0]).astype(np.float32)).tobytes()
        return
    rows = shape[0] if shape else 1
    rest = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    for r0 in range(0, rows, chunk_rows):
        n = min(chunk_rows, rows - r0) * rest
        if kind == "normal":
            x = rng.standard_normal(n, dtype=np.float32) * np.float32(init[1])
        elif kind == "one":
            x = 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)
        elif kind == "var":
            x = rng.uniform(0.5, 1.5, n).astype(np.float32)
        else:
            raise ValueError(kind)
        yield to_bf16(x).tobytes()


def write_checkpoint(out: Path, p: dict, seed: int) -> None:
    specs = tensor_specs(p)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, init in specs:
        dtype, width = ("I64", 8) if init[0] == "I64" else ("BF16", 2)
        n = (int(np.prod(shape)) if shape else 1) * width
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    rng = np.random.default_rng(seed)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, shape, init in specs:
            for chunk in produce(rng, name, shape, init):
                f.write(chunk)
    print(f"wrote {out} ({offset / 1e9:.2f} GB of tensors, {len(specs)} tensors)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tokenizer-from", default=str(ROOT / "tests" / "fixtures" / "canary-qwen-tiny" / "llm"))
    a = ap.parse_args()
    p = PRESETS[a.preset]
    out = Path(a.out)
    (out / "checkpoint").mkdir(parents=True, exist_ok=True)
    (out / "llm").mkdir(parents=True, exist_ok=True)
    (out / "checkpoint" / "config.json").write_text(json.dumps(salm_config(p), indent=2))
    (out / "llm" / "config.json").write_text(json.dumps(qwen3_config(p), indent=2))
    src = Path(a.tokenizer_from)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        if not (src / name).is_file():
            print(f"error: tokenizer file not found: {src / name}", file=sys.stderr)
            return 1
        shutil.copyfile(src / name, out / "llm" / name)
    write_checkpoint(out / "checkpoint" / "model.safetensors", p, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
