#!/usr/bin/env python3
"""OpenAI's Whisper checkpoint (model.pt + multilingual.tiktoken + mel_filters.npz, as
scripts/make-synthetic-checkpoint.py --family whisper writes them) rewritten as a Hugging Face folder
(transformers' names and files: config.json, generation_config.json, preprocessor_config.json, tokenizer.json,
vocab.json, merges.txt, model.safetensors), for engines whose converters read only that layout (the seed
system's scripts/convert-whisper.py). Bench use: the same weights in both layouts.
  usage: bench/whisper_hf_folder.py CHECKPOINT_DIR OUT_DIR"""
import importlib.util
import json
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from nemo_archive import TorchCheckpoint  # noqa: E402

# The converter's own tables, read the other way: openai/whisper's names -> transformers', the tokenizer's
# byte map, merges and specials, the dims' config keys.
_spec = importlib.util.spec_from_file_location("convert_whisper", ROOT / "scripts" / "convert-whisper.py")
cw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cw)


def main() -> int:
    src_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    ck = TorchCheckpoint((src_dir / "model.pt").read_bytes(), "model.pt")
    d = ck.meta["dims"]
    header, offset = {}, 0
    with open(out / "body.tmp", "wb") as body:
        for name in ck.tensors:
            arr, _ = ck.raw(name)
            data = np.ascontiguousarray(arr.astype(np.float16)).tobytes()
            header[cw.hf_name(name)] = {"dtype": "F16", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
            body.write(data)
            offset += len(data)
    head = json.dumps(header).encode()
    with open(out / "model.safetensors", "wb") as f, open(out / "body.tmp", "rb") as body:
        f.write(struct.pack("<Q", len(head)) + head)
        while chunk := body.read(1 << 24):
            f.write(chunk)
    (out / "body.tmp").unlink()

    n_lang = d["n_vocab"] - 51765 - int(d["n_vocab"] >= 51865)
    ranks = cw.read_ranks(src_dir / "multilingual.tiktoken")
    u = cw.bytes_to_unicode()
    vocab = {"".join(u[b] for b in tok): rank for rank, tok in enumerate(ranks)}
    merges = cw.merges_from_ranks(ranks)
    specials = cw.special_tokens(len(ranks), n_lang)
    added = [{"id": len(ranks) + i, "content": t, "special": True} for i, t in enumerate(specials)]
    (out / "vocab.json").write_text(json.dumps(vocab))
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (out / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": merges},
                                                    "added_tokens": added}))
    W = d["n_audio_state"]
    (out / "config.json").write_text(json.dumps({
        **{hf: d[ours] for ours, hf in cw.HF_DIMS.items()}, "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper", "encoder_ffn_dim": 4 * W, "decoder_ffn_dim": 4 * W, "activation_function": "gelu",
        "scale_embedding": False}))
    sot = len(ranks) + 1
    (out / "generation_config.json").write_text(json.dumps({
        "decoder_start_token_id": sot, "no_timestamps_token_id": sot + n_lang + 5, "prev_sot_token_id": sot + n_lang + 3,
        "begin_suppress_tokens": [220, len(ranks)], "suppress_tokens": [],
        "lang_to_id": {f"<|{c}|>": sot + 1 + i for i, c in enumerate(cw.LANGUAGE_CODES[:n_lang])}}))
    with np.load(src_dir / "mel_filters.npz") as f:
        mel = f[f"mel_{d['n_mels']}"]
    (out / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": d["n_mels"], "n_fft": 400,
        "hop_length": 160, "sampling_rate": 16000, "chunk_length": 30, "n_samples": 480000, "nb_max_frames": 3000,
        "mel_filters": mel.tolist()}))  # [n_mels, 201], as the folders of tiny ... large-v2 hold it
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
