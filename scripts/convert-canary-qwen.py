#!/usr/bin/env python3
"""Convert nvidia/canary-qwen-2.5b (NeMo SALM) + Qwen/Qwen3-1.7B files into one transcribe GGUF.

Only python3, numpy and the gguf-py package of the fetched llama.cpp tree are used: the safetensors
file is memory-mapped and read directly (BF16 included), and tensors are written one at a time so a
5 GB checkpoint never has more than one tensor's worth of converted data in memory.

Storage policy (see the issue and spec section 6):
  * norms, biases, BatchNorm statistics, positional biases, the mel window/filterbank: F32
  * convolution kernels (subsampling and depthwise): F32 (ggml's depthwise conv is only trusted in F32)
  * LoRA on q_proj / v_proj: not merged. The base weight is a matrix like any other and the adapter is
    stored beside it in F32 as attn_{q,v}.lora_a = A [r, in] and attn_{q,v}.lora_b = (alpha/r)*B [out, r];
    the model adds B(A x) to W x. That is the FP32 merge W + (alpha/r)*B*A of the spec computed in the
    other order, without re-rounding the merge to BF16 (which moves logits by ~4 on the real model) or
    storing the merged matrix in F32 (twice the bytes of the largest-but-one projection).
    transcribe-quantize merges the two in F32 before quantizing.
  * every other matrix: --outtype (bf16 default; the checkpoint is BF16 so bf16 is lossless)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from convert_common import (FILE_TYPE, OUTTYPES, ConvertError, Plan, SafeTensors, add_frontend_keys, add_qwen3_keys,
                            as_f32, gguf, load_json, nemo_encoder_hparams, plan_frontend, run_converter)

ARCH = "canary_qwen"
AUDIO_TAG_ID = 151669
PROMPT_PREFIX = [151644, 872, 198, 3167, 3114, 279, 2701, 25, 220]  # <|im_start|>user\nTranscribe the following: 
PROMPT_SUFFIX = [151645, 198, 151644, 77091, 198]                   # <|im_end|>\n<|im_start|>assistant\n
LLM_PREFIX = "llm.base_model.model.model."
ENC_PREFIX = "perception.encoder."


# ----------------------------------------------------------------------------- config

def salm_hparams(cfg: dict, path: Path) -> dict:
    try:
        perc = cfg["perception"]
        pre, enc = perc["preprocessor"], perc["encoder"]
        lora = cfg["lora"]
        tag = cfg["audio_locator_tag"]
        out_dim = perc["output_dim"]
    except (KeyError, TypeError) as exc:
        raise ConvertError(f"{path}: not a NeMo SALM config (missing key {exc})") from None
    hp = nemo_encoder_hparams(pre, enc, str(path))
    if tag != "<|audioplaceholder|>":
        raise ConvertError(f"{path}: unexpected audio_locator_tag {tag!r}")
    r, alpha = int(lora["r"]), float(lora["lora_alpha"])
    if r <= 0:
        raise ConvertError(f"{path}: lora.r must be positive, got {r}")
    targets = set(lora.get("target_modules", []))
    if not targets <= {"q_proj", "v_proj"}:
        raise ConvertError(f"{path}: LoRA target modules {sorted(targets)} not supported (q_proj, v_proj)")
    return {
        **hp,
        "output_dim": int(out_dim),
        "lora_scale": alpha / r,
        "lora_targets": targets,
    }


def qwen3_hparams(cfg: dict, path: Path) -> dict:
    if cfg.get("model_type") != "qwen3":
        raise ConvertError(f"{path}: not a Qwen3 config (model_type={cfg.get('model_type')!r})")
    try:
        return {
            "hidden": int(cfg["hidden_size"]),
            "n_layers": int(cfg["num_hidden_layers"]),
            "n_heads": int(cfg["num_attention_heads"]),
            "n_kv_heads": int(cfg["num_key_value_heads"]),
            "head_dim": int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]),
            "ff_dim": int(cfg["intermediate_size"]),
            "rms_eps": float(cfg["rms_norm_eps"]),
            "rope_theta": float(cfg["rope_theta"]),
            "vocab": int(cfg["vocab_size"]),
            "n_ctx_train": int(cfg["max_position_embeddings"]),
            "tied": bool(cfg.get("tie_word_embeddings", True)),
        }
    except KeyError as exc:
        raise ConvertError(f"{path}: Qwen3 config lacks {exc}") from None


# ----------------------------------------------------------------------------- tokenizer

def load_tokenizer(llm_dir: Path, vocab_size: int):
    vocab = load_json(llm_dir / "vocab.json", "tokenizer vocab.json")
    merges_path = llm_dir / "merges.txt"
    if not merges_path.is_file():
        raise ConvertError(f"tokenizer merges.txt not found: {merges_path}")
    merges = [ln for ln in merges_path.read_text(encoding="utf-8").split("\n")
              if ln and not ln.startswith("#version")]
    tcfg = load_json(llm_dir / "tokenizer_config.json", "tokenizer_config.json")
    added = {int(k): v["content"] for k, v in tcfg.get("added_tokens_decoder", {}).items()}
    added[AUDIO_TAG_ID] = "<|audioplaceholder|>"

    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [gguf.TokenType.UNUSED] * vocab_size
    for text, idx in vocab.items():
        if idx >= vocab_size:
            raise ConvertError(f"vocab.json id {idx} outside vocab_size {vocab_size}")
        tokens[idx] = text
        types[idx] = gguf.TokenType.NORMAL
    for idx, text in added.items():
        if idx >= vocab_size:
            raise ConvertError(f"added token id {idx} outside vocab_size {vocab_size}")
        tokens[idx] = text
        types[idx] = gguf.TokenType.CONTROL
    return tokens, types, merges


# ----------------------------------------------------------------------------- conversion

def build_plan(st: SafeTensors, hp: dict, lm: dict, outtype: str) -> Plan:
    p = Plan(st, outtype)
    plan_frontend(p, hp, "perception.preprocessor.", ENC_PREFIX)
    d = hp["d_model"]

    p.matrix("proj.weight", "perception.proj.weight", (lm["hidden"], d))
    p.f32("proj.bias", "perception.proj.bias", (lm["hidden"],))

    # Qwen3, with the LoRA adapters of q/v beside their base weights
    hd, nh, nkv, hid = lm["head_dim"], lm["n_heads"], lm["n_kv_heads"], lm["hidden"]
    p.matrix("token_embd.weight", "embed_tokens.weight", (lm["vocab"], hid))
    for j in range(lm["n_layers"]):
        s, o = f"{LLM_PREFIX}layers.{j}.", f"llm.blk.{j}."
        p.f32(o + "attn_norm.weight", s + "input_layernorm.weight", (hid,))
        p.f32(o + "ffn_norm.weight", s + "post_attention_layernorm.weight", (hid,))
        for proj, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
            base = s + f"self_attn.{proj}_proj."
            if proj + "_proj" in hp["lora_targets"]:
                p.need(base + "base_layer.weight", (rows, hid))
                p.need(base + "lora_A.default.weight")
                p.need(base + "lora_B.default.weight")
                r = st.shape(base + "lora_A.default.weight")[0]
                p.need(base + "lora_A.default.weight", (r, hid))
                p.need(base + "lora_B.default.weight", (rows, r))

                p.matrix(o + f"attn_{proj}.weight", base + "base_layer.weight", (rows, hid))
                p.f32(o + f"attn_{proj}.lora_a", base + "lora_A.default.weight", (r, hid))

                def scaled_b(base=base):
                    return (np.float32(hp["lora_scale"]) * st.f32(base + "lora_B.default.weight")).astype(np.float32)

                p.custom(o + f"attn_{proj}.lora_b", (rows, r), "f32", scaled_b)
            else:
                p.matrix(o + f"attn_{proj}.weight", base + "weight", (rows, hid))
        p.matrix(o + "attn_output.weight", s + "self_attn.o_proj.weight", (hid, nh * hd))
        p.f32(o + "attn_q_norm.weight", s + "self_attn.q_norm.weight", (hd,))
        p.f32(o + "attn_k_norm.weight", s + "self_attn.k_norm.weight", (hd,))
        p.matrix(o + "ffn_gate.weight", s + "mlp.gate_proj.weight", (lm["ff_dim"], hid))
        p.matrix(o + "ffn_up.weight", s + "mlp.up_proj.weight", (lm["ff_dim"], hid))
        p.matrix(o + "ffn_down.weight", s + "mlp.down_proj.weight", (hid, lm["ff_dim"]))
    p.f32("llm.output_norm.weight", LLM_PREFIX + "norm.weight", (hid,))
    return p


def convert(args) -> None:
    ckpt, llm_dir = Path(args.checkpoint), Path(args.llm)
    if not ckpt.is_dir():
        raise ConvertError(f"checkpoint directory not found: {ckpt}")
    if not llm_dir.is_dir():
        raise ConvertError(f"LLM directory not found: {llm_dir}")
    hp = salm_hparams(load_json(ckpt / "config.json", "SALM config.json"), ckpt / "config.json")
    lm = qwen3_hparams(load_json(llm_dir / "config.json", "Qwen3 config.json"), llm_dir / "config.json")
    if not lm["tied"]:
        raise ConvertError(f"{llm_dir / 'config.json'}: untied embeddings are not supported")
    if hp["output_dim"] != lm["hidden"]:
        raise ConvertError(f"perception.output_dim {hp['output_dim']} != Qwen3 hidden_size {lm['hidden']}")
    st = SafeTensors(ckpt / "model.safetensors")
    tokens, types, merges = load_tokenizer(llm_dir, lm["vocab"])
    plan = build_plan(st, hp, lm, args.outtype)

    out = Path(args.outfile)
    w = gguf.GGUFWriter(str(out), ARCH)
    w.add_name(args.name)
    w.add_file_type(FILE_TYPE[args.outtype])
    a = ARCH + "."
    add_frontend_keys(w, hp)
    # Qwen3
    add_qwen3_keys(w, lm)
    # family: prompt and audio limits
    w.add_array(a + "prompt_prefix", PROMPT_PREFIX)
    w.add_array(a + "prompt_suffix", PROMPT_SUFFIX)
    w.add_uint32(a + "audio_token_id", AUDIO_TAG_ID)
    w.add_uint32(a + "eos_token_id", 151645)
    w.add_uint32(a + "max_audio_ms", 40000)
    w.add_uint32(a + "max_tokens_train", 1024)
    w.add_float32(a + "lora_scale", hp["lora_scale"])
    w.add_array(a + "languages", ["en"])
    # tokenizer
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(151645)
    w.add_pad_token_id(151643)
    w.add_array("tokenizer.drop_ids", [151645, 151643, AUDIO_TAG_ID])  # what NeMo drops from transcripts

    plan.write(w)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(plan.items)} tensors, "
          f"LoRA scale {hp['lora_scale']:g}, outtype {args.outtype})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, help="canary-qwen-2.5b folder (config.json, model.safetensors)")
    ap.add_argument("--llm", required=True, help="Qwen3-1.7B folder (config.json, vocab.json, merges.txt, tokenizer_config.json)")
    ap.add_argument("-o", "--outfile", required=True, help="output GGUF path")
    ap.add_argument("--outtype", choices=OUTTYPES, default="bf16")
    ap.add_argument("--name", default="canary-qwen-2.5b")
    return run_converter(convert, ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
