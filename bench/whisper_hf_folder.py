#!/usr/bin/env python3
"""OpenAI's Whisper checkpoint (model.pt + multilingual.tiktoken + mel_filters.npz, as
scripts/make-synthetic-checkpoint.py --family whisper writes them) rewritten as a Hugging Face folder
(transformers' names and files: config.json, generation_config.json, preprocessor_config.json, tokenizer.json,
vocab.json, merges.txt, model.safetensors), for engines whose converters read only that layout (the seed
system's scripts/convert-whisper.py). Bench use: the same weights in both layouts.
  usage: bench/whisper_hf_folder.py CHECKPOINT_DIR OUT_DIR"""
import base64
import json
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from nemo_archive import TorchCheckpoint  # noqa: E402

RENAMES = [("encoder.positional_embedding", "encoder.embed_positions.weight"),
           ("decoder.positional_embedding", "decoder.embed_positions.weight"),
           ("decoder.token_embedding", "decoder.embed_tokens"), ("encoder.ln_post", "encoder.layer_norm"),
           ("decoder.ln.", "decoder.layer_norm."), (".blocks.", ".layers."), (".cross_attn_ln", ".encoder_attn_layer_norm"),
           (".cross_attn.", ".encoder_attn."), (".attn_ln", ".self_attn_layer_norm"),
           (".attn.", ".self_attn."), (".query", ".q_proj"), (".key", ".k_proj"), (".value", ".v_proj"),
           (".out.", ".out_proj."), (".mlp.0", ".fc1"), (".mlp.2", ".fc2"), (".mlp_ln", ".final_layer_norm")]
LANGUAGES = ["en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi",
             "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la",
             "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy",
             "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be",
             "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
             "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"]


def byte_chars():
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    char, n = {}, 0
    for b in range(256):
        char[b] = chr(b) if b in printable else chr(256 + n)
        n += b not in printable
    return char


def main() -> int:
    src_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    ck = TorchCheckpoint((src_dir / "model.pt").read_bytes(), "model.pt")
    d = ck.meta["dims"]
    header, offset = {}, 0
    with open(out / "body.tmp", "wb") as body:
        for name in ck.tensors:
            arr, _ = ck.raw(name)
            hf = name
            for a, b in RENAMES:
                hf = hf.replace(a, b)
            data = np.ascontiguousarray(arr.astype(np.float16)).tobytes()
            header["model." + hf] = {"dtype": "F16", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
            body.write(data)
            offset += len(data)
    head = json.dumps(header).encode()
    with open(out / "model.safetensors", "wb") as f, open(out / "body.tmp", "rb") as body:
        f.write(struct.pack("<Q", len(head)) + head)
        while chunk := body.read(1 << 24):
            f.write(chunk)
    (out / "body.tmp").unlink()

    n_lang = d["n_vocab"] - 51765 - int(d["n_vocab"] >= 51865)
    langs = LANGUAGES[:n_lang]
    char = byte_chars()
    ranks = [l.split() for l in (src_dir / "multilingual.tiktoken").read_text().splitlines() if l]
    vocab = {"".join(char[b] for b in base64.b64decode(t)): int(r) for t, r in ranks}
    # GPT-2 merges from the ranks: each token of two or more bytes is the merge of the split whose parts
    # both exist with the lowest rank pair, as tiktoken's byte-pair encoding builds it.
    by_rank = sorted(vocab.items(), key=lambda kv: kv[1])
    merges = []
    for tok, _ in by_rank:
        if len(tok) < 2:
            continue
        best = None
        for i in range(1, len(tok)):
            a, b = tok[:i], tok[i:]
            if a in vocab and b in vocab:
                key = max(vocab[a], vocab[b])
                if best is None or key < best[0]:
                    best = (key, a, b)
        if best:
            merges.append(f"{best[1]} {best[2]}")
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in langs] + [
        "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    specials += [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
    added = [{"id": len(ranks) + i, "content": t, "special": True} for i, t in enumerate(specials)]
    (out / "vocab.json").write_text(json.dumps(vocab))
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (out / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": merges},
                                                    "added_tokens": added}))
    W = d["n_audio_state"]
    (out / "config.json").write_text(json.dumps({
        "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "d_model": W,
        "encoder_layers": d["n_audio_layer"], "encoder_attention_heads": d["n_audio_head"], "encoder_ffn_dim": 4 * W,
        "decoder_layers": d["n_text_layer"], "decoder_attention_heads": d["n_text_head"], "decoder_ffn_dim": 4 * W,
        "num_mel_bins": d["n_mels"], "max_source_positions": d["n_audio_ctx"], "max_target_positions": d["n_text_ctx"],
        "vocab_size": d["n_vocab"], "activation_function": "gelu", "scale_embedding": False}))
    sot = len(ranks) + 1
    (out / "generation_config.json").write_text(json.dumps({
        "decoder_start_token_id": sot, "no_timestamps_token_id": sot + n_lang + 5, "prev_sot_token_id": sot + n_lang + 3,
        "begin_suppress_tokens": [220, len(ranks)], "suppress_tokens": [],
        "lang_to_id": {f"<|{c}|>": sot + 1 + i for i, c in enumerate(langs)}}))
    with np.load(src_dir / "mel_filters.npz") as f:
        mel = f[f"mel_{d['n_mels']}"]
    (out / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": d["n_mels"], "n_fft": 400,
        "hop_length": 160, "sampling_rate": 16000, "chunk_length": 30, "n_samples": 480000, "nb_max_frames": 3000,
        "mel_filters": mel.T.tolist() if mel.shape[0] != d["n_mels"] else mel.tolist()}))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
