#!/usr/bin/env python3
"""Seed corpora for the fuzz targets: a micro Canary-Qwen GGUF (every tensor and key the loader reads,
tiny dims, 300-token vocabulary), audio in each container, tokenizer strings, multipart bodies.
usage: make_seeds.py OUT_DIR FIXTURE_DIR VOCAB_INP MAKE_TEST_AUDIO_BIN"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("TRANSCRIBE_GGUF_PY", str(ROOT / ".deps" / "llama.cpp" / "gguf-py")))
import gguf  # noqa: E402

D, H, FF, K, C, MELS = 8, 2, 16, 3, 4, 16          # encoder
HID, LH, LKV, HD, LFF, VOCAB = 8, 2, 1, 4, 16, 300  # LM


def micro_frontend(w, t, biases=True):
    """mel.* and encoder.* keys and tensors of a 1-layer FastConformer (linear/conv biases optional)."""
    for k, v in dict(sample_rate=16000, n_fft=512, win_length=400, hop_length=160, n_mels=MELS).items():
        w.add_uint32("mel." + k, v)
    w.add_float32("mel.preemph", 0.97)
    w.add_float32("mel.log_guard", 2.0 ** -24)
    w.add_float32("mel.norm_eps", 1e-5)
    for k, v in dict(n_layers=1, d_model=D, n_heads=H, ff_dim=FF, conv_kernel=K, sub_channels=C, subsampling_factor=8).items():
        w.add_uint32("encoder." + k, v)
    w.add_float32("encoder.layer_norm_eps", 1e-5)
    w.add_float32("encoder.batch_norm_eps", 1e-5)
    w.add_bool("encoder.xscaling", not biases)
    bias = t if biases else (lambda *a, **k: None)
    t("mel.filterbank", MELS, 257)
    w.add_tensor("mel.window", np.hanning(400).astype(np.float32))
    for n in ("conv0", "dw1", "dw2"):
        t(f"enc.sub.{n}.weight", C, 1, 3, 3)
        t(f"enc.sub.{n}.bias", C)
    for n in ("pw1", "pw2"):
        t(f"enc.sub.{n}.weight", C, C)
        t(f"enc.sub.{n}.bias", C)
    t("enc.sub.out.weight", D, C * MELS // 8)
    t("enc.sub.out.bias", D)
    b = "enc.blk.0."
    for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
        t(b + n + ".weight", D, ones=True)
        t(b + n + ".bias", D)
    for ffn in ("feed_forward1", "feed_forward2"):
        t(b + ffn + ".up.weight", FF, D)
        bias(b + ffn + ".up.bias", FF)
        t(b + ffn + ".down.weight", D, FF)
        bias(b + ffn + ".down.bias", D)
    for n in ("q", "k", "v", "out"):
        t(b + f"attn.{n}.weight", D, D)
        bias(b + f"attn.{n}.bias", D)
    t(b + "attn.pos.weight", D, D)
    t(b + "attn.pos_bias_u", H, D // H)
    t(b + "attn.pos_bias_v", H, D // H)
    t(b + "conv.pw1.weight", 2 * D, D)
    bias(b + "conv.pw1.bias", 2 * D)
    t(b + "conv.dw.weight", D, K)
    bias(b + "conv.dw.bias", D)
    for n in ("weight", "bias", "running_mean"):
        t(b + "conv.bn." + n, D)
    t(b + "conv.bn.running_var", D, ones=True)
    t(b + "conv.pw2.weight", D, D)
    bias(b + "conv.pw2.bias", D)


def tensor_writer(w):
    rng = np.random.default_rng(0)

    def t(name, *shape, ones=False):
        x = np.ones(shape, np.float32) if ones else (rng.standard_normal(shape) * 0.3).astype(np.float32)
        w.add_tensor(name, x)
    return t


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def micro_model(path):
    w = gguf.GGUFWriter(str(path), "canary_qwen")
    w.add_name("micro")
    t = tensor_writer(w)
    micro_frontend(w, t)
    for k, v in dict(n_layers=1, hidden=HID, n_heads=LH, n_kv_heads=LKV, head_dim=HD, ff_dim=LFF, vocab_size=VOCAB,
                     n_ctx_train=512).items():
        w.add_uint32("llm." + k, v)
    w.add_float32("llm.rms_eps", 1e-6)
    w.add_float32("llm.rope_theta", 1e6)
    w.add_array("canary_qwen.prompt_prefix", [257, 104, 105, 10])
    w.add_array("canary_qwen.prompt_suffix", [258, 10, 257])
    w.add_uint32("canary_qwen.audio_token_id", 259)
    w.add_uint32("canary_qwen.eos_token_id", 258)
    w.add_uint32("canary_qwen.max_audio_ms", 40000)
    w.add_array("canary_qwen.languages", ["en"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    bs = [b for b in range(0x21, 0x7F)] + [b for b in range(0xA1, 0xAD)] + [b for b in range(0xAE, 0x100)]
    byte_chars, n = {}, 0
    for b in range(256):
        byte_chars[b] = chr(b) if b in bs else chr(256 + n)
        n += b not in bs
    tokens = [byte_chars[b] for b in range(256)] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audioplaceholder|>"]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "a n"]
    tokens += [m.replace(" ", "") for m in merges]
    tokens += [f"[PAD{i}]" for i in range(VOCAB - len(tokens))]
    types = [1] * 256 + [3] * 4 + [1] * len(merges) + [5] * (VOCAB - 256 - 4 - len(merges))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(258)
    w.add_pad_token_id(256)
    w.add_array("tokenizer.drop_ids", [256, 258, 259])
    t("proj.weight", HID, D)
    t("proj.bias", HID)
    t("token_embd.weight", VOCAB, HID)
    b = "llm.blk.0."
    t(b + "attn_norm.weight", HID, ones=True)
    t(b + "ffn_norm.weight", HID, ones=True)
    t(b + "attn_q.weight", LH * HD, HID)
    t(b + "attn_k.weight", LKV * HD, HID)
    t(b + "attn_v.weight", LKV * HD, HID)
    t(b + "attn_output.weight", HID, LH * HD)
    t(b + "attn_q_norm.weight", HD, ones=True)
    t(b + "attn_k_norm.weight", HD, ones=True)
    t(b + "ffn_gate.weight", LFF, HID)
    t(b + "ffn_up.weight", LFF, HID)
    t(b + "ffn_down.weight", HID, LFF)
    t("llm.output_norm.weight", HID, ones=True)
    finish(w)


def micro_parakeet(path, pieces=24, pred=8, joint=8):
    """A Parakeet-TDT GGUF (no conformer biases, xscaling on): SentencePiece vocabulary, transducer, durations."""
    w = gguf.GGUFWriter(str(path), "parakeet_tdt")
    w.add_name("micro-parakeet")
    t = tensor_writer(w)
    micro_frontend(w, t, biases=False)
    a = "parakeet_tdt."
    for k, v in dict(vocab_size=pieces, blank_id=pieces, pred_hidden=pred, pred_layers=1, joint_hidden=joint,
                     max_symbols=3, max_audio_ms=20000).items():
        w.add_uint32(a + k, v)
    w.add_array(a + "durations", [0, 1, 2])
    w.add_array(a + "punctuation", [".", "'"])
    w.add_array(a + "segment_separators", [".", "?", "!"])
    w.add_tokenizer_model("llama")
    toks = ["<unk>", "\u2581", "\u2581t", "h", "e", ".", "'", "<0x41>"] + [f"\u2581w{i}" for i in range(pieces - 8)]
    w.add_token_list(toks)
    w.add_token_scores([0.0] + [-float(i) for i in range(1, pieces)])
    w.add_token_types([2] + [1] * 6 + [6] + [1] * (pieces - 8))
    w.add_unk_token_id(0)
    t("pred.embd.weight", pieces + 1, pred)
    t("pred.lstm.0.weight", 4 * pred, 2 * pred)
    t("pred.lstm.0.bias", 4 * pred)
    t("joint.enc.weight", joint, D)
    t("joint.enc.bias", joint)
    t("joint.pred.weight", joint, pred)
    t("joint.pred.bias", joint)
    t("joint.out.weight", pieces + 1 + 3, joint)
    t("joint.out.bias", pieces + 1 + 3)
    finish(w)


def multipart(fields, file_bytes):
    out = b""
    for k, v in fields.items():
        out += f'--fuzzboundary\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    out += (b'--fuzzboundary\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            b"Content-Type: audio/wav\r\n\r\n" + file_bytes + b"\r\n--fuzzboundary--\r\n")
    return out


def main():
    out, fixture, vocab_inp, make_audio = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    for d in ("model", "audio", "tokenizer", "server"):
        (out / d).mkdir(parents=True, exist_ok=True)
    micro_model(out / "micro.gguf")
    shutil.copyfile(out / "micro.gguf", out / "model" / "micro.gguf")
    micro_parakeet(out / "model" / "micro-parakeet.gguf")
    wav = fixture / "audio" / "jfk_0p7s.wav"
    short = out / "short.wav"
    data = wav.read_bytes()
    short.write_bytes(data[:44] + data[44:44 + 3200])  # header claims more: a truncated wav, also a good seed
    shutil.copyfile(wav, out / "audio" / "jfk_0p7s.wav")
    subprocess.run([make_audio, str(wav), str(out / "audio")], check=True)
    shutil.copyfile(short, out / "audio" / "short.wav")
    for i, text in enumerate(vocab_inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")):
        (out / "tokenizer" / f"case{i:03d}.txt").write_text(text, encoding="utf-8")
    for i, fmt in enumerate(("json", "text", "srt", "vtt", "verbose_json")):
        (out / "server" / f"req{i}.bin").write_bytes(multipart({"model": "m", "response_format": fmt}, short.read_bytes()))
    # The streamed request with every format at once (the web page's): the formats list's parsing.
    (out / "server" / "formats.bin").write_bytes(multipart({"stream": "true", "formats": "text,json,srt,vtt,verbose_json",
                                                            "timestamp_granularities[]": "word"}, short.read_bytes()))
    (out / "server" / "nofile.bin").write_bytes(b'--fuzzboundary\r\nContent-Disposition: form-data; name="x"\r\n\r\ny\r\n--fuzzboundary--\r\n')
    print(f"seeds in {out}")


if __name__ == "__main__":
    main()
