#!/usr/bin/env python3
"""Convert an OpenAI Whisper checkpoint (tiny ... large-v3-turbo, the .en models) into one transcribe GGUF
(architecture whisper).

PATH is what `whisper.load_model` reads: a `torch.save`d dict {"dims", "model_state_dict"} (read with a
restricted unpickler, no torch), its tokenizer whisper's `multilingual.tiktoken` (or `gpt2.tiktoken` for
the .en models) beside the checkpoint or given with --tokenizer; or a Hugging Face folder (config.json,
model.safetensors, vocab.json, added_tokens.json, generation_config.json with its alignment_heads), read
with transformers' names mapped back to openai/whisper's: both layouts of the same weights give the same
GGUF tensors. The mel filterbank is librosa's Slaney
filterbank, which whisper ships as `mel_filters.npz`; it is computed here the same way (or read from
--mel-filters).

Storage: the attention and MLP matrices and the token embedding in --outtype; the convolutions, position
tables, biases and LayerNorms in F32. The key projections have no bias in Whisper; none is written.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import sys
from pathlib import Path

import numpy as np

from convert_common import FILE_TYPE, OUTTYPES, ConvertError, Plan, SafeTensors, gguf, run_converter

ARCH = "whisper"
LAYER_NORM_EPS = 1e-5
SAMPLE_RATE, N_FFT, HOP_LENGTH, CHUNK_SECONDS = 16000, 400, 160, 30

# whisper/tokenizer.py LANGUAGES, in token order (the first num_languages of them are a model's).
LANGUAGE_CODES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi "
    "ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd "
    "gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue").split()

# OpenAI's published alignment heads (whisper/__init__.py _ALIGNMENT_HEADS: base85 of a gzipped bool
# array [n_text_layer, n_text_head]), for the released models, keyed by their dims.
ALIGNMENT_HEADS = {
    "tiny.en": b"ABzY8J1N>@0{>%R00Bk>$p{7v037`oCl~+#00",
    "tiny": b"ABzY8bu8Lr0{>%RKn9Fp%m@SkK7Kt=7ytkO",
    "base.en": b"ABzY8;40c<0{>%RzzG;p*o+Vo09|#PsxSZm00",
    "base": b"ABzY8KQ!870{>%RzyTQH3`Q^yNP!>##QT-<FaQ7m",
    "small.en": b"ABzY8>?_)10{>%RpeA61k&I|OI3I$65C{;;pbCHh0B{qLQ;+}v00",
    "small": b"ABzY8DmU6=0{>%Rpa?J`kvJ6qF(V^F86#Xh7JUGMK}P<N0000",
    "medium.en": b"ABzY8usPae0{>%R7<zz_OvQ{)4kMa0BMw6u5rT}kRKX;$NfYBv00*Hl@qhsU00",
    "medium": b"ABzY8B0Jh+0{>%R7}kK1fFL7w6%<-Pf*t^=N)Qr&0RR9",
    "large-v1": b"ABzY8r9j$a0{>%R7#4sLmoOs{s)o3~84-RPdcFk!JR<kSfC2yj",
    "large-v2": b"ABzY8zd+h!0{>%R7=D0pU<_bnWW*tkYAhobTNnu$jnkEkXqp)j;w1Tzk)UH3X%SZd&fFZ2fC2yj",
    "large-v3": b"ABzY8gWO1E0{>%R7(9S+Kn!D~%ngiGaR?*L!iJG9p-nab0JQ=-{D1-g00",
    "large-v3-turbo": b"ABzY8j^C+e0{>%RARaKHP%t(lGR*)0g!tONPyhe`",
}
# (n_mels, n_audio_layer, n_audio_state, n_text_layer, n_vocab) of each released model. large-v1 and
# large-v2 share theirs: large-v2's heads are taken unless --model-name says large-v1.
RELEASED_DIMS = {
    (80, 4, 384, 4, 51864): "tiny.en", (80, 4, 384, 4, 51865): "tiny",
    (80, 6, 512, 6, 51864): "base.en", (80, 6, 512, 6, 51865): "base",
    (80, 12, 768, 12, 51864): "small.en", (80, 12, 768, 12, 51865): "small",
    (80, 24, 1024, 24, 51864): "medium.en", (80, 24, 1024, 24, 51865): "medium",
    (80, 32, 1280, 32, 51865): "large-v2", (128, 32, 1280, 32, 51866): "large-v3",
    (128, 32, 1280, 4, 51866): "large-v3-turbo",
}
DIM_KEYS = ("n_mels", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_vocab", "n_text_ctx",
            "n_text_state", "n_text_head", "n_text_layer")


# ----------------------------------------------------------------------------- tokenizer

def bytes_to_unicode() -> dict:
    """GPT-2's reversible byte -> printable character map (how GGUF stores byte-level tokens)."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def read_ranks(path: Path) -> list:
    """A .tiktoken file: one `base64(token) rank` line per token, ranks 0..n-1 in order."""
    if not path.is_file():
        raise ConvertError(f"tokenizer file not found: {path} (whisper's multilingual.tiktoken or gpt2.tiktoken; "
                           "pass --tokenizer)")
    tokens = []
    for lineno, line in enumerate(path.read_text(encoding="ascii", errors="strict").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or int(parts[1]) != len(tokens):
            raise ConvertError(f"{path}:{lineno}: not a tiktoken rank line in order")
        tokens.append(base64.b64decode(parts[0]))
    if len(tokens) < 256:
        raise ConvertError(f"{path}: {len(tokens)} tokens, fewer than the 256 bytes")
    return tokens


def bpe_split(ranks: dict, piece: bytes, max_rank: int | None = None) -> list:
    """tiktoken's byte-pair merge: repeatedly join the adjacent pair whose join has the lowest rank (only
    ranks below MAX_RANK)."""
    parts = [bytes([b]) for b in piece]
    while True:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (max_rank is None or r < max_rank) and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            return parts
        parts[best:best + 2] = [parts[best] + parts[best + 1]]


def merges_from_ranks(tokens: list) -> list:
    """The merge list that reproduces tiktoken's ranks: each multi-byte token is the join of the two parts
    BPE leaves it in with only the lower ranks available, in rank order."""
    ranks = {t: i for i, t in enumerate(tokens)}
    u = bytes_to_unicode()
    text = lambda b: "".join(u[x] for x in b)
    merges = []
    for rank, tok in enumerate(tokens):
        if len(tok) < 2:
            continue
        parts = bpe_split(ranks, tok, max_rank=rank)
        if len(parts) != 2:
            raise ConvertError(f"tokenizer token {rank} is not the merge of two lower-ranked tokens")
        merges.append(f"{text(parts[0])} {text(parts[1])}")
    return merges


def special_tokens(n_ranks: int, num_languages: int) -> list:
    """whisper.tokenizer.get_encoding's specials, in id order after the ranks."""
    return (["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in LANGUAGE_CODES[:num_languages]] +
            ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"] +
            [f"<|{i * 0.02:.2f}|>" for i in range(1501)])


def non_speech_tokens(tokens: list) -> list:
    """whisper's Tokenizer.non_speech_tokens: ids of symbols that are not speech. Each symbol is one
    pre-tokenizer piece (punctuation with an optional leading space), so BPE over its bytes is tiktoken's
    encoding of it."""
    ranks = {t: i for i, t in enumerate(tokens)}
    encode = lambda s: [ranks[p] for p in bpe_split(ranks, s.encode("utf-8"))]
    symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
    symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
    miscellaneous = set("♩♪♫♬♭♮♯")
    result = {encode(" -")[0], encode(" '")[0]}
    for symbol in symbols + list(miscellaneous):
        for ids in (encode(symbol), encode(" " + symbol)):
            if len(ids) == 1 or symbol in miscellaneous:
                result.add(ids[0])
    return sorted(result)


# ----------------------------------------------------------------------------- front end

def hz_to_mel(f):
    """librosa's Slaney mel scale (htk=False)."""
    f = np.asanyarray(f, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, f / f_sp)


def mel_to_hz(m):
    m = np.asanyarray(m, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def slaney_filterbank(n_mels: int) -> np.ndarray:
    """librosa.filters.mel(sr=16000, n_fft=400, n_mels=N) (Slaney scale and norm): whisper's mel_filters.npz."""
    fftfreqs = np.fft.rfftfreq(N_FFT, 1.0 / SAMPLE_RATE)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(SAMPLE_RATE / 2.0), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    weights = np.zeros((n_mels, len(fftfreqs)))
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(np.float32)


def hann_periodic() -> np.ndarray:
    """torch.hann_window(400) (periodic), in float32 as torch makes it."""
    n = np.arange(N_FFT, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)).astype(np.float32)


# ----------------------------------------------------------------------------- checkpoint

def read_dims(ckpt, where: str) -> dict:
    dims = ckpt.meta.get("dims")
    if not isinstance(dims, dict) or any(dims.get(k) is None for k in DIM_KEYS):
        raise ConvertError(f"{where}: no 'dims' with {', '.join(DIM_KEYS)}: not an OpenAI Whisper checkpoint "
                           "(what whisper.load_model reads)")
    d = {k: int(dims[k]) for k in DIM_KEYS}
    if d["n_audio_state"] % d["n_audio_head"] or d["n_text_state"] % d["n_text_head"] or d["n_vocab"] < 51864:
        raise ConvertError(f"{where}: inconsistent Whisper dims {d}")
    return d


# ----------------------------------------------------------------------------- Hugging Face layout

HF_DIMS = {"n_mels": "num_mel_bins", "n_audio_ctx": "max_source_positions", "n_audio_state": "d_model",
           "n_audio_head": "encoder_attention_heads", "n_audio_layer": "encoder_layers", "n_vocab": "vocab_size",
           "n_text_ctx": "max_target_positions", "n_text_state": "d_model", "n_text_head": "decoder_attention_heads",
           "n_text_layer": "decoder_layers"}
# openai/whisper's module names -> transformers' (models/whisper/convert_openai_to_hf.py, read backwards).
HF_PARTS = [(".attn_ln.", ".self_attn_layer_norm."), (".cross_attn_ln.", ".encoder_attn_layer_norm."),
            (".cross_attn.", ".encoder_attn."), (".attn.", ".self_attn."), (".query.", ".q_proj."),
            (".key.", ".k_proj."), (".value.", ".v_proj."), (".out.", ".out_proj."), (".mlp.0.", ".fc1."),
            (".mlp.2.", ".fc2."), (".mlp_ln.", ".final_layer_norm."), (".blocks.", ".layers.")]
HF_WHOLE = {"encoder.positional_embedding": "model.encoder.embed_positions.weight",
            "decoder.positional_embedding": "model.decoder.embed_positions.weight",
            "decoder.token_embedding.weight": "model.decoder.embed_tokens.weight",
            "encoder.ln_post.weight": "model.encoder.layer_norm.weight", "encoder.ln_post.bias": "model.encoder.layer_norm.bias",
            "decoder.ln.weight": "model.decoder.layer_norm.weight", "decoder.ln.bias": "model.decoder.layer_norm.bias"}


def hf_name(name: str) -> str:
    if name in HF_WHOLE:
        return HF_WHOLE[name]
    for ours, theirs in HF_PARTS:
        name = name.replace(ours, theirs)
    return "model." + name


class HFCheckpoint:
    """A Hugging Face Whisper folder, its tensors under openai/whisper's names."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.st = SafeTensors(folder / "model.safetensors")
        self.config = read_json(folder / "config.json")
        self.meta = {"dims": {k: self.config.get(v) for k, v in HF_DIMS.items()}}

    def has(self, name: str) -> bool:
        return self.st.has(hf_name(name))

    def shape(self, name: str) -> tuple:
        return self.st.shape(hf_name(name))

    def raw(self, name: str):
        return self.st.raw(hf_name(name))


def read_json(path: Path):
    import json
    if not path.is_file():
        raise ConvertError(f"{path.name} not found in {path.parent} (a Hugging Face Whisper folder has config.json, "
                           "model.safetensors, vocab.json, added_tokens.json, generation_config.json)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConvertError(f"{path}: not JSON ({exc})")


def hf_ranks(folder: Path, n_ranks_expected: int) -> list:
    """vocab.json's byte-level tokens below the specials, as the bytes tiktoken ranks."""
    vocab = read_json(folder / "vocab.json")
    from_char = {c: b for b, c in bytes_to_unicode().items()}
    tokens = [None] * n_ranks_expected
    for text, i in vocab.items():
        if 0 <= i < n_ranks_expected:
            try:
                tokens[i] = bytes(from_char[c] for c in text)
            except KeyError:
                raise ConvertError(f"{folder / 'vocab.json'}: token {i} is not byte-level ({text!r})")
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        raise ConvertError(f"{folder / 'vocab.json'}: {len(missing)} of the first {n_ranks_expected} ids are missing "
                           f"(first {missing[0]})")
    return tokens


def alignment_heads(d: dict, model_name: str) -> tuple:
    """(pairs [layer, head], where they come from)."""
    name = model_name or RELEASED_DIMS.get((d["n_mels"], d["n_audio_layer"], d["n_audio_state"], d["n_text_layer"],
                                            d["n_vocab"]))
    if name and name in ALIGNMENT_HEADS:
        mask = np.frombuffer(gzip.decompress(base64.b85decode(ALIGNMENT_HEADS[name])), dtype=bool)
        if mask.size == d["n_text_layer"] * d["n_text_head"]:
            layers, heads = np.nonzero(mask.reshape(d["n_text_layer"], d["n_text_head"]))
            return [[int(l), int(h)] for l, h in zip(layers, heads)], f"OpenAI's published heads of {name}"
    # Whisper.__init__'s default: every head of the last half of the decoder layers.
    return ([[l, h] for l in range(d["n_text_layer"] // 2, d["n_text_layer"]) for h in range(d["n_text_head"])],
            "the last half of the decoder layers, every head (whisper's default)")


def build_plan(src, d: dict, outtype: str) -> Plan:
    p = Plan(src, outtype)
    A, T, M = d["n_audio_state"], d["n_text_state"], d["n_mels"]

    def attention(o: str, s: str, width: int):
        for proj, name in (("q", "query"), ("k", "key"), ("v", "value"), ("o", "out")):
            p.matrix(f"{o}_{proj}.weight", f"{s}.{name}.weight", (width, width))
            if proj != "k":  # whisper's key projection has no bias
                p.f32(f"{o}_{proj}.bias", f"{s}.{name}.bias", (width,))

    def norm(o: str, s: str, width: int):
        p.f32(o + ".weight", s + ".weight", (width,))
        p.f32(o + ".bias", s + ".bias", (width,))

    def mlp(o: str, s: str, width: int):
        p.matrix(o + "ffn_up.weight", s + "mlp.0.weight", (4 * width, width))
        p.f32(o + "ffn_up.bias", s + "mlp.0.bias", (4 * width,))
        p.matrix(o + "ffn_down.weight", s + "mlp.2.weight", (width, 4 * width))
        p.f32(o + "ffn_down.bias", s + "mlp.2.bias", (width,))

    p.f32("enc.conv1.weight", "encoder.conv1.weight", (A, M, 3))
    p.f32("enc.conv1.bias", "encoder.conv1.bias", (A,))
    p.f32("enc.conv2.weight", "encoder.conv2.weight", (A, A, 3))
    p.f32("enc.conv2.bias", "encoder.conv2.bias", (A,))
    # As stored (whisper adds the checkpoint's table, not a fresh sinusoid).
    p.f32("enc.pos_enc", "encoder.positional_embedding", (d["n_audio_ctx"], A))
    for i in range(d["n_audio_layer"]):
        s, o = f"encoder.blocks.{i}.", f"enc.blk.{i}."
        norm(o + "attn_norm", s + "attn_ln", A)
        attention(o + "attn", s + "attn", A)
        norm(o + "ffn_norm", s + "mlp_ln", A)
        mlp(o, s, A)
    norm("enc.post_norm", "encoder.ln_post", A)

    p.matrix("dec.token_embd.weight", "decoder.token_embedding.weight", (d["n_vocab"], T))
    p.f32("dec.pos_enc", "decoder.positional_embedding", (d["n_text_ctx"], T))
    for i in range(d["n_text_layer"]):
        s, o = f"decoder.blocks.{i}.", f"dec.blk.{i}."
        norm(o + "attn_norm", s + "attn_ln", T)
        attention(o + "attn", s + "attn", T)
        norm(o + "xattn_norm", s + "cross_attn_ln", T)
        attention(o + "xattn", s + "cross_attn", T)
        norm(o + "ffn_norm", s + "mlp_ln", T)
        mlp(o, s, T)
    norm("dec.output_norm", "decoder.ln", T)
    return p


def convert(args) -> None:
    from nemo_archive import TorchCheckpoint  # imports convert_common
    path = Path(args.checkpoint)
    if not path.exists():
        raise ConvertError(f"checkpoint not found: {path}")
    hf = path.is_dir()
    src = HFCheckpoint(path) if hf else TorchCheckpoint(path.read_bytes(), str(path))
    d = read_dims(src, str(path / "config.json") if hf else str(path))
    multilingual = d["n_vocab"] >= 51865
    num_languages = d["n_vocab"] - 51765 - int(multilingual)
    if num_languages > len(LANGUAGE_CODES):
        raise ConvertError(f"{path}: {num_languages} languages, more than whisper knows ({len(LANGUAGE_CODES)})")
    n_specials = len(special_tokens(0, num_languages))
    if hf:
        tok_path = path / "vocab.json"
        ranks = hf_ranks(path, d["n_vocab"] - n_specials)
        added = read_json(path / "added_tokens.json")
        for name, i in added.items():
            if name in special_tokens(0, num_languages) and i != d["n_vocab"] - n_specials + special_tokens(0, num_languages).index(name):
                raise ConvertError(f"{path / 'added_tokens.json'}: {name} is id {i}, not where whisper puts it")
    else:
        tok_path = Path(args.tokenizer) if args.tokenizer else path.parent / (
            "multilingual.tiktoken" if multilingual else "gpt2.tiktoken")
        ranks = read_ranks(tok_path)
    specials = special_tokens(len(ranks), num_languages)
    if len(ranks) + len(specials) != d["n_vocab"]:
        raise ConvertError(f"{tok_path}: {len(ranks)} tokens + {len(specials)} specials != the model's vocabulary "
                           f"of {d['n_vocab']} (the wrong tokenizer for this model?)")
    if args.mel_filters:
        filters = np.load(args.mel_filters)[f"mel_{d['n_mels']}"].astype(np.float32)
    else:
        filters = slaney_filterbank(d["n_mels"])
    if filters.shape != (d["n_mels"], N_FFT // 2 + 1):
        raise ConvertError(f"mel filterbank of shape {filters.shape}, expected {(d['n_mels'], N_FFT // 2 + 1)}")
    plan = build_plan(src, d, args.outtype)
    plan.custom("mel.window", (N_FFT,), "f32", hann_periodic)
    plan.custom("mel.filterbank", filters.shape, "f32", lambda: filters)

    first = len(ranks)
    ids = {name: first + i for i, name in enumerate(specials[:2])}
    at = {t: first + i for i, t in enumerate(specials)}
    heads, heads_from = alignment_heads(d, args.model_name)
    if hf and (path / "generation_config.json").is_file() and "alignment_heads" in read_json(path / "generation_config.json"):
        heads = [[int(l), int(h)] for l, h in read_json(path / "generation_config.json")["alignment_heads"]]
        heads_from = "the folder's generation_config.json"
    u = bytes_to_unicode()

    out = Path(args.outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), ARCH)
    w.add_name(args.name or path.name if hf else args.name or path.stem)
    w.add_file_type(FILE_TYPE[args.outtype])
    w.add_uint32("mel.sample_rate", SAMPLE_RATE)
    w.add_uint32("mel.n_fft", N_FFT)
    w.add_uint32("mel.win_length", N_FFT)
    w.add_uint32("mel.hop_length", HOP_LENGTH)
    w.add_uint32("mel.n_mels", d["n_mels"])
    w.add_float32("mel.preemph", 0.0)
    w.add_float32("mel.log_guard", 1e-10)
    w.add_float32("mel.norm_eps", 0.0)
    w.add_string("mel.normalize", "none")
    w.add_string("mel.variant", "whisper")  # reflect-padded STFT, last frame dropped, log10, clamp to max - 8, (x + 4) / 4
    a = ARCH + "."
    w.add_uint32(a + "n_audio_ctx", d["n_audio_ctx"])
    w.add_uint32(a + "enc_layers", d["n_audio_layer"])
    w.add_uint32(a + "enc_hidden", d["n_audio_state"])
    w.add_uint32(a + "enc_heads", d["n_audio_head"])
    w.add_uint32(a + "enc_inner", 4 * d["n_audio_state"])
    w.add_uint32(a + "dec_layers", d["n_text_layer"])
    w.add_uint32(a + "dec_hidden", d["n_text_state"])
    w.add_uint32(a + "dec_heads", d["n_text_head"])
    w.add_uint32(a + "dec_inner", 4 * d["n_text_state"])
    w.add_uint32(a + "max_sequence_length", d["n_text_ctx"])
    w.add_string(a + "dec_activation", "gelu")
    w.add_float32(a + "norm_eps", LAYER_NORM_EPS)
    w.add_bool(a + "multilingual", multilingual)
    for key, token in (("eot", "<|endoftext|>"), ("sot", "<|startoftranscript|>"), ("translate", "<|translate|>"),
                       ("transcribe", "<|transcribe|>"), ("sot_lm", "<|startoflm|>"), ("sot_prev", "<|startofprev|>"),
                       ("no_speech", "<|nospeech|>"), ("no_timestamps", "<|notimestamps|>"), ("timestamp_begin", "<|0.00|>")):
        w.add_uint32(a + "token." + key, at[token])
    w.add_array(a + "languages", LANGUAGE_CODES[:num_languages])
    w.add_array(a + "language_tokens", [at[f"<|{c}|>"] for c in LANGUAGE_CODES[:num_languages]])
    w.add_array(a + "non_speech_tokens", non_speech_tokens(ranks))
    w.add_array(a + "alignment_heads", [x for pair in heads for x in pair])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(["".join(u[b] for b in t) for t in ranks] + specials)
    w.add_token_types([1] * len(ranks) + [3] * len(specials))  # NORMAL, CONTROL (decoded as their literal text)
    w.add_token_merges(merges_from_ranks(ranks))
    # Timestamp tokens are not text (whisper's Tokenizer.decode drops ids >= timestamp_begin).
    w.add_array("tokenizer.drop_ids", list(range(at["<|0.00|>"], d["n_vocab"])))
    plan.write(w)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(plan.items)} tensors, vocabulary {d['n_vocab']}, "
          f"{num_languages} languages{'' if multilingual else ' (English-only model)'}, alignment heads: {heads_from}, "
          f"outtype {args.outtype})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True,
                    help="OpenAI's checkpoint (model.pt: {dims, model_state_dict}) or a Hugging Face Whisper folder")
    ap.add_argument("-o", "--outfile", required=True, help="output GGUF path")
    ap.add_argument("--outtype", choices=OUTTYPES, default="f16")
    ap.add_argument("--tokenizer", default="", help="the .tiktoken file (default: multilingual.tiktoken or "
                    "gpt2.tiktoken beside the checkpoint)")
    ap.add_argument("--mel-filters", default="", help="whisper's mel_filters.npz (default: the same filterbank computed)")
    ap.add_argument("--model-name", default="", choices=[""] + list(ALIGNMENT_HEADS),
                    help="which released model this is, for its alignment heads (default: recognised by its dims)")
    ap.add_argument("--name", default="", help="general.name (default: the checkpoint's file name)")
    return run_converter(convert, ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
