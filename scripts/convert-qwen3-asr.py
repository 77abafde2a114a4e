#!/usr/bin/env python3
"""Convert a Qwen3-ASR checkpoint folder (Qwen/Qwen3-ASR-0.6B, -1.7B, or their -hf conversions) or its forced
aligner's (Qwen/Qwen3-ForcedAligner-0.6B) into one transcribe GGUF.

The folder: config.json (model_type qwen3_asr), model.safetensors or model-*.safetensors with
model.safetensors.index.json, vocab.json, merges.txt, tokenizer_config.json, preprocessor_config.json
(WhisperFeatureExtractor), and optionally chat_template.json. The aligner's folder is the same but for its
config (thinker_config.model_type qwen3_forced_aligner, classify_num, timestamp_token_id,
timestamp_segment_time) and its head (classify_num timestamp classes, not the vocabulary): it becomes a
`qwen3_forced_aligner` GGUF, which places a transcript's words (--align-with). Only python3, numpy and the
fetched llama.cpp tree's gguf-py are used.

Storage: norms, biases, the first convolution's kernel, the position table and the mel window/filterbank
in F32; every other matrix (the other two convolutions' kernels as [channels, 9 channels]) in --outtype
(bf16 default: the release is BF16, so bf16 is lossless).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from convert_common import (FILE_TYPE, OUTTYPES, ConvertError, Plan, SafeTensors, add_qwen3_keys, as_outtype, gguf,
                            load_json, run_converter)

ARCH = "qwen3_asr"
ALIGNER_ARCH = "qwen3_forced_aligner"
# The reference's model classes name the checkpoint's tensors thinker.*; Hugging Face's native
# Qwen3ASRForConditionalGeneration keeps the same names below its model.* prefix where it has one.
PREFIXES = ("thinker.", "model.thinker.", "")
# What the released processor's chat template renders for one audio and a system context
# (qwen_asr/inference/qwen3_asr.py _build_text_prompt): the text around {context} and the audio.
PROMPT_SYSTEM = "<|im_start|>system\n"
PROMPT_USER = "<|im_end|>\n<|im_start|>user\n<|audio_start|>"
PROMPT_ASSISTANT = "<|audio_end|><|im_end|>\n<|im_start|>assistant\n"
REQUIRED_TOKENS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>",
                   "<asr_text>")
# What the aligner's input (Qwen3ForceAlignProcessor.encode_timestamp) is made of.
ALIGNER_TOKENS = ("<|audio_start|>", "<|audio_end|>", "<|audio_pad|>", "<timestamp>")
MAX_ASR_INPUT_SECONDS = 1200         # qwen_asr/inference/utils.py: the longest chunk transcribe() decodes
MAX_FORCE_ALIGN_INPUT_SECONDS = 180  # and the longest it aligns


class ShardedSafeTensors:
    """model.safetensors, or the shards a model.safetensors.index.json names, as one tensor source."""

    def __init__(self, folder: Path):
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            weight_map = load_json(index, "safetensors index").get("weight_map", {})
            files = {name: folder / f for name, f in weight_map.items()}
            opened = {f: SafeTensors(f) for f in sorted(set(files.values()))}
            self.where = {name: opened[f] for name, f in files.items()}
        elif (folder / "model.safetensors").is_file():
            st = SafeTensors(folder / "model.safetensors")
            self.where = {name: st for name in st.header if name != "__metadata__"}
        else:
            raise ConvertError(f"{folder}: no model.safetensors or model.safetensors.index.json")

    def has(self, name):
        return name in self.where

    def shape(self, name):
        return self.where[name].shape(name)

    def raw(self, name):
        return self.where[name].raw(name)

    def f32(self, name):
        return self.where[name].f32(name)


def is_aligner(cfg: dict) -> bool:
    """The reference builds the timestamp head where the thinker's model_type names the forced aligner."""
    th = cfg.get("thinker_config") if isinstance(cfg.get("thinker_config"), dict) else {}
    return "forced_aligner" in str(th.get("model_type", "")) or cfg.get("model_type") == "qwen3_forced_aligner"


def aligner_hparams(cfg: dict, where: str) -> dict:
    th = cfg.get("thinker_config", {})
    try:
        out = {"classify_num": int(th["classify_num"]),
               "timestamp_token_id": int(cfg.get("timestamp_token_id", th.get("timestamp_token_id"))),
               "segment_ms": float(cfg.get("timestamp_segment_time", th.get("timestamp_segment_time")))}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: a forced aligner config without classify_num, timestamp_token_id or "
                           f"timestamp_segment_time ({exc})") from None
    if out["classify_num"] <= 0 or out["segment_ms"] <= 0:
        raise ConvertError(f"{where}: classify_num {out['classify_num']}, timestamp_segment_time {out['segment_ms']}")
    return out


def hparams(cfg: dict, where: str) -> tuple:
    if cfg.get("model_type") not in ("qwen3_asr", "qwen3_forced_aligner"):
        raise ConvertError(f"{where}: not a Qwen3-ASR config (model_type={cfg.get('model_type')!r}, expected 'qwen3_asr')")
    try:
        th = cfg["thinker_config"]
        a, t = th["audio_config"], th["text_config"]
        audio = {k: int(a[k]) for k in ("num_mel_bins", "encoder_layers", "encoder_attention_heads", "encoder_ffn_dim",
                                        "d_model", "n_window", "output_dim", "n_window_infer", "downsample_hidden_size")}
        text = {
            "hidden": int(t["hidden_size"]), "n_layers": int(t["num_hidden_layers"]),
            "n_heads": int(t["num_attention_heads"]), "n_kv_heads": int(t["num_key_value_heads"]),
            "head_dim": int(t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"]),
            "ff_dim": int(t["intermediate_size"]), "rms_eps": float(t["rms_norm_eps"]),
            "rope_theta": float(t.get("rope_theta", 5000000.0)), "vocab": int(t["vocab_size"]),
            "n_ctx_train": int(t["max_position_embeddings"]), "tied": bool(t.get("tie_word_embeddings", False)),
        }
        audio_token_id = int(th["audio_token_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: not a Qwen3-ASR config (missing or bad key {exc})") from None
    if a.get("activation_function", "gelu") != "gelu" or t.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"{where}: activations {a.get('activation_function')}/{t.get('hidden_act')} not supported")
    if a.get("scale_embedding"):
        raise ConvertError(f"{where}: scale_embedding not supported")
    rs = t.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type", "default")) != "default":
        raise ConvertError(f"{where}: rope_type {rs.get('rope_type')!r} not supported")
    if audio["d_model"] % audio["encoder_attention_heads"] or audio["output_dim"] != text["hidden"]:
        raise ConvertError(f"{where}: inconsistent dims (audio output_dim {audio['output_dim']}, text hidden {text['hidden']})")
    if audio["n_window_infer"] % (2 * audio["n_window"]):
        raise ConvertError(f"{where}: n_window_infer {audio['n_window_infer']} is not a multiple of 2 * n_window")
    return audio, text, audio_token_id, list(cfg.get("support_languages") or [])


def conv_out_features(n_mels: int, channels: int) -> int:
    f = n_mels
    for _ in range(3):
        f = (f - 1) // 2 + 1  # kernel 3, stride 2, padding 1
    return channels * f


def tokens_per_chunk(n_window: int) -> int:
    n = 2 * n_window
    for _ in range(3):
        n = (n - 1) // 2 + 1
    return n


def sinusoids(length: int, channels: int) -> np.ndarray:
    """SinusoidsPositionEmbedding(length, channels): sin | cos of t * exp(-log(10000)/(channels/2 - 1) * i), as
    torch computes it in float32."""
    inc = np.log(10000) / (channels // 2 - 1)
    inv = np.exp(np.float32(-inc) * np.arange(channels // 2, dtype=np.float32)).astype(np.float32)
    scaled = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1).astype(np.float32)


def hf_mel_filters(n_mels: int, n_fft: int, sr: int) -> np.ndarray:
    """transformers' mel_filter_bank(1 + n_fft // 2, n_mels, 0, 8000, sr, norm="slaney", mel_scale="slaney"),
    the WhisperFeatureExtractor's filters, as [n_mels, n_fft // 2 + 1] float32."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        mels = 3.0 * f / 200.0
        return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-300) / 1000.0) * (27.0 / np.log(6.4)), mels)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), 200.0 * m / 3.0)

    filter_freqs = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(8000.0), n_mels + 2))
    fft_freqs = np.linspace(0, sr // 2, 1 + n_fft // 2)
    diff = np.diff(filter_freqs)
    slopes = filter_freqs[None, :] - fft_freqs[:, None]
    down, up = -slopes[:, :-2] / diff[:-1], slopes[:, 2:] / diff[1:]
    fb = np.maximum(np.zeros(1), np.minimum(down, up))
    fb *= (2.0 / (filter_freqs[2:n_mels + 2] - filter_freqs[:n_mels]))[None, :]
    return fb.T.astype(np.float32)


def hann_periodic(n: int) -> np.ndarray:
    k = np.arange(n, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * k / n)).astype(np.float32)


def load_tokenizer(folder: Path, vocab_size: int, required: tuple):
    vocab = load_json(folder / "vocab.json", "tokenizer vocab.json")
    merges_path = folder / "merges.txt"
    if not merges_path.is_file():
        raise ConvertError(f"tokenizer merges.txt not found: {merges_path}")
    merges = [ln for ln in merges_path.read_text(encoding="utf-8").split("\n") if ln and not ln.startswith("#version")]
    tcfg = load_json(folder / "tokenizer_config.json", "tokenizer_config.json")
    added = {int(k): (v["content"], bool(v.get("special", False))) for k, v in tcfg.get("added_tokens_decoder", {}).items()}
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [gguf.TokenType.UNUSED] * vocab_size
    for text, idx in vocab.items():
        if idx >= vocab_size:
            raise ConvertError(f"vocab.json id {idx} outside vocab_size {vocab_size}")
        tokens[idx], types[idx] = text, gguf.TokenType.NORMAL
    for idx, (text, _) in added.items():
        if idx >= vocab_size:
            raise ConvertError(f"added token id {idx} outside vocab_size {vocab_size}")
        tokens[idx], types[idx] = text, gguf.TokenType.CONTROL
    ids = {text: idx for idx, (text, _) in added.items()}
    missing = [t for t in required if t not in ids]
    if missing:
        raise ConvertError(f"{folder / 'tokenizer_config.json'}: no added token {', '.join(missing)}: not Qwen3-ASR's tokenizer")
    special = sorted(idx for idx, (_, sp) in added.items() if sp)
    return tokens, types, merges, ids, special


def build_plan(st, prefix: str, audio: dict, text: dict, outtype: str, head_rows: int = 0) -> Plan:
    """HEAD_ROWS: the aligner's timestamp classes (its own head, never tied); 0: the vocabulary's."""
    p = Plan(st, outtype)
    a, t = prefix + "audio_tower.", prefix + "model."
    d, ch, nm = audio["d_model"], audio["downsample_hidden_size"], audio["num_mel_bins"]
    # The first convolution (one input channel) in F32; the other two as the [channels, 9 channels] matrices
    # their im2col products read (in --outtype: the encoder's costliest products after the blocks').
    # The encoder keeps its maps channels first: a matrix's columns are ordered taps then input channels
    # ([out, kh, kw, in]), conv_out's frequency then channels ([d, f, c]).
    p.f32("enc.down1.weight", a + "conv2d1.weight", (ch, 1, 3, 3))
    for i in (1, 2, 3):
        if i > 1:
            p.need(a + f"conv2d{i}.weight", (ch, ch, 3, 3))
            p.custom(f"enc.down{i}.weight", (ch, 9 * ch), outtype,
                     lambda src=a + f"conv2d{i}.weight": as_outtype(
                         p.read_f32(src).transpose(0, 2, 3, 1).reshape(ch, 9 * ch), outtype))
        p.f32(f"enc.down{i}.bias", a + f"conv2d{i}.bias", (ch,))
    n_freq = conv_out_features(nm, ch) // ch
    p.need(a + "conv_out.weight", (d, ch * n_freq))
    p.custom("enc.conv_out.weight", (d, ch * n_freq), outtype,
             lambda: as_outtype(p.read_f32(a + "conv_out.weight").reshape(d, ch, n_freq).transpose(0, 2, 1).reshape(d, -1),
                                outtype))
    n_pos = tokens_per_chunk(audio["n_window"])
    p.custom("enc.pos_enc", (n_pos, d), "f32", lambda: sinusoids(n_pos, d))
    for j in range(audio["encoder_layers"]):
        s, o = a + f"layers.{j}.", f"enc.blk.{j}."
        for src, dst in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("out_proj", "attn_o")):
            p.matrix(o + dst + ".weight", s + f"self_attn.{src}.weight", (d, d))
            p.f32(o + dst + ".bias", s + f"self_attn.{src}.bias", (d,))
        p.matrix(o + "ffn_up.weight", s + "fc1.weight", (audio["encoder_ffn_dim"], d))
        p.f32(o + "ffn_up.bias", s + "fc1.bias", (audio["encoder_ffn_dim"],))
        p.matrix(o + "ffn_down.weight", s + "fc2.weight", (d, audio["encoder_ffn_dim"]))
        p.f32(o + "ffn_down.bias", s + "fc2.bias", (d,))
        for src, dst in (("self_attn_layer_norm", "attn_norm"), ("final_layer_norm", "ffn_norm")):
            p.f32(o + dst + ".weight", s + src + ".weight", (d,))
            p.f32(o + dst + ".bias", s + src + ".bias", (d,))
    p.f32("enc.post_norm.weight", a + "ln_post.weight", (d,))
    p.f32("enc.post_norm.bias", a + "ln_post.bias", (d,))
    p.matrix("enc.proj1.weight", a + "proj1.weight", (d, d))
    p.f32("enc.proj1.bias", a + "proj1.bias", (d,))
    p.matrix("enc.proj2.weight", a + "proj2.weight", (audio["output_dim"], d))
    p.f32("enc.proj2.bias", a + "proj2.bias", (audio["output_dim"],))

    hd, nh, nkv, hid, ff = text["head_dim"], text["n_heads"], text["n_kv_heads"], text["hidden"], text["ff_dim"]
    p.matrix("token_embd.weight", t + "embed_tokens.weight", (text["vocab"], hid))
    for j in range(text["n_layers"]):
        s, o = t + f"layers.{j}.", f"llm.blk.{j}."
        p.f32(o + "attn_norm.weight", s + "input_layernorm.weight", (hid,))
        p.f32(o + "ffn_norm.weight", s + "post_attention_layernorm.weight", (hid,))
        p.matrix(o + "attn_q.weight", s + "self_attn.q_proj.weight", (nh * hd, hid))
        p.matrix(o + "attn_k.weight", s + "self_attn.k_proj.weight", (nkv * hd, hid))
        p.matrix(o + "attn_v.weight", s + "self_attn.v_proj.weight", (nkv * hd, hid))
        p.matrix(o + "attn_output.weight", s + "self_attn.o_proj.weight", (hid, nh * hd))
        p.f32(o + "attn_q_norm.weight", s + "self_attn.q_norm.weight", (hd,))
        p.f32(o + "attn_k_norm.weight", s + "self_attn.k_norm.weight", (hd,))
        p.matrix(o + "ffn_gate.weight", s + "mlp.gate_proj.weight", (ff, hid))
        p.matrix(o + "ffn_up.weight", s + "mlp.up_proj.weight", (ff, hid))
        p.matrix(o + "ffn_down.weight", s + "mlp.down_proj.weight", (hid, ff))
    p.f32("llm.output_norm.weight", t + "norm.weight", (hid,))
    if head_rows:
        p.matrix("llm.output.weight", prefix + "lm_head.weight", (head_rows, hid))
    elif st.has(prefix + "lm_head.weight") and not text["tied"]:
        p.matrix("llm.output.weight", prefix + "lm_head.weight", (text["vocab"], hid))
    return p


def convert(args) -> None:
    folder = Path(args.checkpoint)
    if not folder.is_dir():
        raise ConvertError(f"checkpoint directory not found: {folder}")
    cfg = load_json(folder / "config.json", "config.json")
    audio, text, audio_token_id, languages = hparams(cfg, str(folder / "config.json"))
    aligner = aligner_hparams(cfg, str(folder / "config.json")) if is_aligner(cfg) else None
    arch = ALIGNER_ARCH if aligner else ARCH
    pre = load_json(folder / "preprocessor_config.json", "preprocessor_config.json")
    if pre.get("feature_extractor_type", "WhisperFeatureExtractor") != "WhisperFeatureExtractor":
        raise ConvertError(f"{folder / 'preprocessor_config.json'}: feature extractor "
                           f"{pre.get('feature_extractor_type')!r}, expected WhisperFeatureExtractor")
    n_fft, hop, sr = int(pre.get("n_fft", 400)), int(pre.get("hop_length", 160)), int(pre.get("sampling_rate", 16000))
    n_mels = int(pre.get("feature_size", audio["num_mel_bins"]))
    if n_mels != audio["num_mel_bins"]:
        raise ConvertError(f"preprocessor feature_size {n_mels} != audio num_mel_bins {audio['num_mel_bins']}")
    st = ShardedSafeTensors(folder)
    prefix = next((p for p in PREFIXES if st.has(p + "audio_tower.conv2d1.weight")), None)
    if prefix is None:
        raise ConvertError(f"{folder}: no audio_tower.conv2d1.weight under thinker.: not a Qwen3-ASR checkpoint")
    tokens, types, merges, ids, special = load_tokenizer(folder, text["vocab"], ALIGNER_TOKENS if aligner else REQUIRED_TOKENS)
    if ids["<|audio_pad|>"] != audio_token_id:
        raise ConvertError(f"config audio_token_id {audio_token_id} is not <|audio_pad|> ({ids['<|audio_pad|>']})")
    if aligner and ids["<timestamp>"] != aligner["timestamp_token_id"]:
        raise ConvertError(f"config timestamp_token_id {aligner['timestamp_token_id']} is not <timestamp> ({ids['<timestamp>']})")
    plan = build_plan(st, prefix, audio, text, args.outtype, aligner["classify_num"] if aligner else 0)
    plan.custom("mel.window", (n_fft,), "f32", lambda: hann_periodic(n_fft))
    filters = hf_mel_filters(n_mels, n_fft, sr)
    plan.custom("mel.filterbank", filters.shape, "f32", lambda: filters)

    out = Path(args.outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), arch)
    w.add_name(args.name or folder.resolve().name)
    w.add_file_type(FILE_TYPE[args.outtype])
    # The WhisperFeatureExtractor as the processor runs it: no padding, frames = samples // hop.
    w.add_uint32("mel.sample_rate", sr)
    w.add_uint32("mel.n_fft", n_fft)
    w.add_uint32("mel.win_length", n_fft)
    w.add_uint32("mel.hop_length", hop)
    w.add_uint32("mel.n_mels", n_mels)
    w.add_float32("mel.preemph", 0.0)
    w.add_float32("mel.log_guard", 1e-10)
    w.add_float32("mel.norm_eps", 0.0)
    w.add_string("mel.normalize", "none")
    w.add_string("mel.variant", "whisper")
    w.add_uint32("mel.whisper_pad_samples", 0)
    w.add_uint32("mel.whisper_min_frames", 0)
    e = arch + "."
    w.add_uint32(e + "enc_layers", audio["encoder_layers"])
    w.add_uint32(e + "enc_hidden", audio["d_model"])
    w.add_uint32(e + "enc_heads", audio["encoder_attention_heads"])
    w.add_uint32(e + "enc_inner", audio["encoder_ffn_dim"])
    w.add_uint32(e + "enc_conv_channels", audio["downsample_hidden_size"])
    w.add_uint32(e + "enc_out_dim", audio["output_dim"])
    w.add_uint32(e + "n_window", audio["n_window"])
    w.add_uint32(e + "n_window_infer", audio["n_window_infer"])
    w.add_float32(e + "norm_eps", 1e-5)
    add_qwen3_keys(w, text)
    w.add_uint32(e + "audio_token_id", audio_token_id)
    if aligner:
        w.add_uint32("llm.head_rows", aligner["classify_num"])
        w.add_uint32(e + "audio_start_token_id", ids["<|audio_start|>"])
        w.add_uint32(e + "audio_end_token_id", ids["<|audio_end|>"])
        w.add_uint32(e + "timestamp_token_id", aligner["timestamp_token_id"])
        w.add_float32(e + "timestamp_segment_ms", aligner["segment_ms"])
        w.add_uint32(e + "max_audio_ms", MAX_FORCE_ALIGN_INPUT_SECONDS * 1000)
    else:
        w.add_string(e + "prompt_system", PROMPT_SYSTEM)
        w.add_string(e + "prompt_user", PROMPT_USER)
        w.add_string(e + "prompt_assistant", PROMPT_ASSISTANT)
        w.add_array(e + "eos_token_ids", [ids["<|im_end|>"], ids["<|endoftext|>"]])  # what generate() stops at
        w.add_uint32(e + "max_audio_ms", MAX_ASR_INPUT_SECONDS * 1000)
        w.add_array(e + "languages", languages or ["English"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_array("tokenizer.drop_ids", special)  # batch_decode(skip_special_tokens=True)
    plan.write(w)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(plan.items)} tensors, outtype {args.outtype})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, help="the Qwen3-ASR or Qwen3-ForcedAligner folder (config.json, safetensors, tokenizer files)")
    ap.add_argument("-o", "--outfile", required=True, help="output GGUF path")
    ap.add_argument("--outtype", choices=OUTTYPES, default="bf16")
    ap.add_argument("--name", default="", help="general.name (default: the folder's name)")
    return run_converter(convert, ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
