"""What every transcribe converter shares: gguf-py from the fetched llama.cpp tree, the storage policy
(F32 for small and precision-critical tensors, --outtype for matrices), a lazily produced tensor plan
written one tensor at a time, a safetensors reader, NeMo's mel front end and FastConformer encoder (tensor names and GGUF
keys the C++ FastConformer block reads), and the command-line error convention."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GGUF_PY = Path(os.environ.get("TRANSCRIBE_GGUF_PY", ROOT / ".deps" / "llama.cpp" / "gguf-py"))
sys.path.insert(0, str(GGUF_PY))
try:
    import gguf  # noqa: E402,F401
except ImportError as exc:  # pragma: no cover - environment problem
    sys.exit(f"error: gguf-py not found at {GGUF_PY} ({exc}); run scripts/fetch-ggml.sh")

OUTTYPES = ("bf16", "f16", "f32")
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32}


class ConvertError(Exception):
    pass


class TensorSource(Protocol):
    """A checkpoint: names, shapes, and each tensor read on demand."""

    def has(self, name: str) -> bool: ...
    def shape(self, name: str) -> tuple[int, ...]: ...
    # (array in the stored dtype, dtype name); BF16 comes back as uint16 bit patterns.
    def raw(self, name: str) -> tuple[np.ndarray, str]: ...


def bf16_bits_from_f32(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even F32 -> BF16 bit patterns (exact for values that already are BF16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def as_f32(arr: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.float32)


def as_outtype(x: np.ndarray, outtype: str) -> np.ndarray:
    """An F32 array in the storage type of --outtype (BF16 as bit patterns)."""
    if outtype == "bf16":
        return bf16_bits_from_f32(x)
    return x.astype(np.float16) if outtype == "f16" else x.astype(np.float32)


KIND_TO_GGML = {
    "f32": (np.float32, gguf.GGMLQuantizationType.F32, 4),
    "f16": (np.float16, gguf.GGMLQuantizationType.F16, 2),
    "bf16": (np.uint16, gguf.GGMLQuantizationType.BF16, 2),
}


class Plan:
    """Ordered list of output tensors; each one produced lazily when written."""

    def __init__(self, src: TensorSource, outtype: str):
        self.src = src
        self.outtype = outtype
        self.items: list[tuple[str, tuple[int, ...], str, Callable[[], np.ndarray]]] = []

    def need(self, name: str, shape: tuple[int, ...] | None = None) -> str:
        if not self.src.has(name):
            raise ConvertError(f"missing tensor in checkpoint: {name}")
        if shape is not None and tuple(self.src.shape(name)) != tuple(shape):
            raise ConvertError(f"tensor {name} has shape {list(self.src.shape(name))}, expected {list(shape)}")
        return name

    def read_f32(self, name: str) -> np.ndarray:
        return as_f32(*self.src.raw(name))

    def f32(self, out: str, src: str, shape=None, reshape=None):
        self.need(src, shape)
        final = tuple(reshape if reshape is not None else self.src.shape(src))
        self.items.append((out, final, "f32", lambda: self.read_f32(src).reshape(final)))

    def matrix(self, out: str, src: str, shape=None, reshape=None):
        """A weight used by mul_mat (or get_rows): stored in --outtype."""
        self.need(src, shape)
        final = tuple(reshape if reshape is not None else self.src.shape(src))

        def produce():
            arr, dt = self.src.raw(src)
            if self.outtype == "bf16" and dt == "BF16":
                return arr.reshape(final)
            return as_outtype(as_f32(arr, dt).reshape(final), self.outtype)

        self.items.append((out, final, self.outtype, produce))

    def custom(self, out: str, shape, kind: str, producer: Callable[[], np.ndarray]):
        self.items.append((out, tuple(shape), kind, producer))

    def write(self, w) -> None:
        """Header, metadata, then each tensor produced, written and dropped in turn."""
        for name, shape, kind, _ in self.items:
            np_dt, ggml_t, width = KIND_TO_GGML[kind]
            w.add_tensor_info(name, shape, np.dtype(np_dt), int(np.prod(shape)) * width, raw_dtype=ggml_t)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for name, shape, kind, produce in self.items:
            arr = np.ascontiguousarray(produce(), dtype=KIND_TO_GGML[kind][0])
            if arr.shape != shape:
                raise ConvertError(f"internal: {name} produced {arr.shape}, expected {shape}")
            w.write_tensor_data(arr)
            del arr
        w.close()


# ----------------------------------------------------------------------------- safetensors

class SafeTensors:
    """A .safetensors file: header parsed up front, each tensor read on demand."""

    DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4), "I64": (np.int64, 8)}

    def __init__(self, path: Path):
        if not path.is_file():
            raise ConvertError(f"checkpoint file not found: {path}")
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ConvertError(f"{path}: not a safetensors file (too short)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100 * 1024 * 1024:
                raise ConvertError(f"{path}: not a safetensors file (header length {n})")
            try:
                self.header = json.loads(f.read(n))
            except json.JSONDecodeError as exc:
                raise ConvertError(f"{path}: corrupt safetensors header: {exc}") from None
        self.header.pop("__metadata__", None)
        self.data_start = 8 + n
        self.size = size
        self.path = path

    def has(self, name: str) -> bool:
        return name in self.header

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.header[name]["shape"])

    def raw(self, name: str) -> tuple[np.ndarray, str]:
        """(array in the stored dtype, dtype name); BF16 comes back as uint16 bit patterns."""
        info = self.header[name]
        dt = info["dtype"]
        if dt not in self.DTYPES:
            raise ConvertError(f"{self.path}: tensor {name} has unsupported dtype {dt}")
        np_dt, width = self.DTYPES[dt]
        b, e = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if e - b != count * width:
            raise ConvertError(f"{self.path}: tensor {name} has {e - b} bytes, expected {count * width}")
        if self.data_start + e > self.size:
            raise ConvertError(f"{self.path}: tensor {name} lies past the end of the file (truncated?)")
        # Plain reads rather than a memory map: only the tensor being converted is ever resident.
        arr = np.fromfile(self.path, dtype=np_dt, count=count, offset=self.data_start + b)
        return arr.reshape(info["shape"]), dt

    def f32(self, name: str) -> np.ndarray:
        return as_f32(*self.raw(name))


# ----------------------------------------------------------------------------- NeMo front end + encoder

def attention_context(enc: dict, where: str) -> tuple:
    """(att_context_style, [[left, right], ...]) as ConformerEncoder._calc_context_sizes reads them: one pair
    or a list of pairs (the first the default), -1 unlimited; chunked_limited needs left % (right + 1) == 0."""
    style = enc.get("att_context_style", "regular")
    if style not in ("regular", "chunked_limited"):
        raise ConvertError(f"{where}: att_context_style {style!r} is not supported (regular, chunked_limited)")
    sizes = enc.get("att_context_size") or [-1, -1]
    sizes = [list(sizes)] if isinstance(sizes[0], int) else [list(x) for x in sizes]
    for i, cs in enumerate(sizes):
        if len(cs) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= -1 for v in cs):
            raise ConvertError(f"{where}: att_context_size[{i}] {cs!r} is not a pair of integers >= -1")
        if style == "chunked_limited":
            if cs[0] > 0 and cs[0] % (cs[1] + 1) > 0:
                raise ConvertError(f"{where}: att_context_size[{i}][0] % (att_context_size[{i}][1] + 1) should be zero")
            if cs[1] < 0 and len(sizes) <= 1:
                raise ConvertError(f"{where}: right context can not be unlimited for chunked_limited style")
    return style, sizes


def conv_context_size(enc: dict, where: str) -> list:
    """The conv module's depthwise padding [left, right]: NeMo's conv_context_size ("causal": [K-1, 0]; a
    pair summing to K-1; none: (K-1)/2 each side)."""
    K = int(enc["conv_kernel_size"])
    cc = enc.get("conv_context_size")
    if cc is None:
        return [(K - 1) // 2, (K - 1) // 2]
    if cc == "causal":
        return [K - 1, 0]
    if not isinstance(cc, (list, tuple)) or len(cc) != 2 or cc[0] + cc[1] + 1 != K or min(cc) < 0:
        raise ConvertError(f"{where}: invalid conv_context_size {cc!r} for conv_kernel_size {K}")
    return [int(cc[0]), int(cc[1])]


def subsampled_features(n_mels: int, causal: bool) -> int:
    """The frequency bins the x8 dw_striding subsampling leaves (calc_length over feat_in, three stride-2 3x3
    convolutions: padding 1 each side, or causal 2 before and 1 after)."""
    for _ in range(3):
        n_mels = (n_mels + (3 if causal else 2) - 3) // 2 + 1
    return n_mels


def nemo_encoder_hparams(pre: dict, enc: dict, where: str) -> dict:
    """The preprocessor and ConformerEncoder config sections this engine supports, checked."""
    try:
        if enc.get("self_attention_model") != "rel_pos" or enc.get("subsampling") != "dw_striding":
            raise ConvertError(f"{where}: unsupported encoder (self_attention_model="
                               f"{enc.get('self_attention_model')}, subsampling={enc.get('subsampling')})")
        if enc.get("subsampling_factor") != 8:
            raise ConvertError(f"{where}: unsupported subsampling_factor {enc.get('subsampling_factor')}")
        # FilterbankFeatures: "per_feature" normalises; a falsy value or one normalize_batch does not know
        # ("NA", as diar_streaming_sortformer_4spk-v2 has) leaves the log-mel as it is.
        normalize = pre.get("normalize")
        if normalize == "per_feature":
            mel_normalize = "per_feature"
        elif not normalize or normalize in ("NA", "none", "None"):
            mel_normalize = "none"
        else:
            raise ConvertError(f"{where}: unsupported mel normalisation {normalize}")
        att_style, att_sizes = attention_context(enc, where)
        conv_norm = enc.get("conv_norm_type", "batch_norm")
        if conv_norm not in ("batch_norm", "layer_norm"):
            raise ConvertError(f"{where}: conv_norm_type {conv_norm} is not supported")
        conv_context = conv_context_size(enc, where)
        if not enc.get("untie_biases", True):
            raise ConvertError(f"{where}: untie_biases=false is not supported")
        sr = int(pre["sample_rate"])
        return {
            "sample_rate": sr,
            "n_fft": int(pre["n_fft"]),
            "win_length": int(round(pre["window_size"] * sr)),
            "hop_length": int(round(pre["window_stride"] * sr)),
            "n_mels": int(pre["features"]),
            "normalize": mel_normalize,
            "d_model": int(enc["d_model"]),
            "n_layers": int(enc["n_layers"]),
            "n_heads": int(enc["n_heads"]),
            "ff_dim": int(enc["d_model"]) * int(enc["ff_expansion_factor"]),
            "conv_kernel": int(enc["conv_kernel_size"]),
            "sub_channels": int(enc["subsampling_conv_channels"]),
            "feat_in": int(enc["feat_in"]),
            "xscaling": bool(enc.get("xscaling", True)),
            # Cache-aware streaming models (NeMo's causal_downsampling, conv_context_size, conv_norm_type,
            # att_context_style / att_context_size); the defaults are the offline FastConformer's.
            "causal_subsampling": bool(enc.get("causal_downsampling", False)),
            "conv_context": conv_context,
            "conv_norm": conv_norm,
            "att_context_style": att_style,
            "att_context_sizes": att_sizes,
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: preprocessor/encoder config lacks or mangles {exc}") from None


def add_frontend_keys(w, hp: dict) -> None:
    """mel.* and encoder.* keys (generic names: every family on NeMo's front end reads the same ones)."""
    w.add_uint32("mel.sample_rate", hp["sample_rate"])
    w.add_uint32("mel.n_fft", hp["n_fft"])
    w.add_uint32("mel.win_length", hp["win_length"])
    w.add_uint32("mel.hop_length", hp["hop_length"])
    w.add_uint32("mel.n_mels", hp["n_mels"])
    w.add_float32("mel.preemph", 0.97)
    w.add_float32("mel.log_guard", 2.0 ** -24)
    w.add_float32("mel.norm_eps", 1e-5)
    if hp.get("normalize", "per_feature") != "per_feature":  # absent: per_feature (every file before this key)
        w.add_string("mel.normalize", hp["normalize"])
    w.add_uint32("encoder.n_layers", hp["n_layers"])
    w.add_uint32("encoder.d_model", hp["d_model"])
    w.add_uint32("encoder.n_heads", hp["n_heads"])
    w.add_uint32("encoder.ff_dim", hp["ff_dim"])
    w.add_uint32("encoder.conv_kernel", hp["conv_kernel"])
    w.add_uint32("encoder.sub_channels", hp["sub_channels"])
    w.add_uint32("encoder.subsampling_factor", 8)
    w.add_float32("encoder.layer_norm_eps", 1e-5)
    w.add_float32("encoder.batch_norm_eps", 1e-5)
    w.add_bool("encoder.xscaling", hp["xscaling"])
    # Written only where they differ from the offline FastConformer (files without them read as that).
    if hp.get("causal_subsampling"):
        w.add_bool("encoder.causal_subsampling", True)
    K = hp["conv_kernel"]
    if hp.get("conv_context", [(K - 1) // 2] * 2) != [(K - 1) // 2] * 2:
        w.add_array("encoder.conv_context", hp["conv_context"])
    if hp.get("conv_norm", "batch_norm") != "batch_norm":
        w.add_string("encoder.conv_norm", hp["conv_norm"])
    if hp.get("att_context_sizes", [[-1, -1]]) != [[-1, -1]]:
        w.add_string("encoder.att_context_style", hp["att_context_style"])
        w.add_array("encoder.att_context_sizes", [v for pair in hp["att_context_sizes"] for v in pair])


def plan_frontend(p: Plan, hp: dict, pre_prefix: str, enc_prefix: str) -> None:
    """mel.* buffers and the FastConformer's enc.* tensors. Linear/conv biases of the conformer layers are
    optional (use_bias=false models have none); the subsampling keeps its biases.

    Storage: norms, biases, BatchNorm statistics, positional biases, the mel window/filterbank and the
    convolution kernels (subsampling and depthwise: ggml's depthwise conv is only trusted in F32) in
    F32; every other matrix in --outtype."""
    d, C, nm, n_fft = hp["d_model"], hp["sub_channels"], hp["n_mels"], hp["n_fft"]
    p.f32("mel.filterbank", pre_prefix + "featurizer.fb", (1, nm, n_fft // 2 + 1), (nm, n_fft // 2 + 1))
    p.f32("mel.window", pre_prefix + "featurizer.window", (hp["win_length"],))

    def bias(out: str, src: str, n: int):
        if p.src.has(src):
            p.f32(out, src, (n,))

    sub = enc_prefix + "pre_encode."
    p.f32("enc.sub.conv0.weight", sub + "conv.0.weight", (C, 1, 3, 3))
    p.f32("enc.sub.conv0.bias", sub + "conv.0.bias", (C,))
    for src, dst in (("2", "dw1"), ("5", "dw2")):
        p.f32(f"enc.sub.{dst}.weight", sub + f"conv.{src}.weight", (C, 1, 3, 3))
        p.f32(f"enc.sub.{dst}.bias", sub + f"conv.{src}.bias", (C,))
    for src, dst in (("3", "pw1"), ("6", "pw2")):
        p.f32(f"enc.sub.{dst}.weight", sub + f"conv.{src}.weight", (C, C, 1, 1), (C, C))
        p.f32(f"enc.sub.{dst}.bias", sub + f"conv.{src}.bias", (C,))
    p.matrix("enc.sub.out.weight", sub + "out.weight", (d, C * subsampled_features(nm, hp.get("causal_subsampling", False))))
    p.f32("enc.sub.out.bias", sub + "out.bias", (d,))

    ff, H, K = hp["ff_dim"], hp["n_heads"], hp["conv_kernel"]
    for i in range(hp["n_layers"]):
        s, o = f"{enc_prefix}layers.{i}.", f"enc.blk.{i}."
        for norm in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            p.f32(o + norm + ".weight", s + norm + ".weight", (d,))
            p.f32(o + norm + ".bias", s + norm + ".bias", (d,))
        for ffn in ("feed_forward1", "feed_forward2"):
            p.matrix(o + ffn + ".up.weight", s + ffn + ".linear1.weight", (ff, d))
            bias(o + ffn + ".up.bias", s + ffn + ".linear1.bias", ff)
            p.matrix(o + ffn + ".down.weight", s + ffn + ".linear2.weight", (d, ff))
            bias(o + ffn + ".down.bias", s + ffn + ".linear2.bias", d)
        for lin in ("q", "k", "v", "out"):
            p.matrix(o + f"attn.{lin}.weight", s + f"self_attn.linear_{lin}.weight", (d, d))
            bias(o + f"attn.{lin}.bias", s + f"self_attn.linear_{lin}.bias", d)
        p.matrix(o + "attn.pos.weight", s + "self_attn.linear_pos.weight", (d, d))
        p.f32(o + "attn.pos_bias_u", s + "self_attn.pos_bias_u", (H, d // H))
        p.f32(o + "attn.pos_bias_v", s + "self_attn.pos_bias_v", (H, d // H))
        p.matrix(o + "conv.pw1.weight", s + "conv.pointwise_conv1.weight", (2 * d, d, 1), (2 * d, d))
        bias(o + "conv.pw1.bias", s + "conv.pointwise_conv1.bias", 2 * d)
        p.f32(o + "conv.dw.weight", s + "conv.depthwise_conv.weight", (d, 1, K), (d, K))
        bias(o + "conv.dw.bias", s + "conv.depthwise_conv.bias", d)
        if hp.get("conv_norm", "batch_norm") == "layer_norm":  # NeMo keeps the name batch_norm for it
            for ln in ("weight", "bias"):
                p.f32(o + f"conv.norm.{ln}", s + f"conv.batch_norm.{ln}", (d,))
        else:
            for bn in ("weight", "bias", "running_mean", "running_var"):
                p.f32(o + f"conv.bn.{bn}", s + f"conv.batch_norm.{bn}", (d,))
        p.matrix(o + "conv.pw2.weight", s + "conv.pointwise_conv2.weight", (d, d, 1), (d, d))
        bias(o + "conv.pw2.bias", s + "conv.pointwise_conv2.bias", d)


def load_json(path: Path, what: str) -> dict:
    """A JSON file of a checkpoint folder; ConvertError naming WHAT where it is missing or not JSON."""
    if not path.is_file():
        raise ConvertError(f"{what} not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConvertError(f"{path}: invalid JSON: {exc}") from None


def add_qwen3_keys(w, lm: dict) -> None:
    """The llm.* keys of a Qwen3 decoder (blocks/qwen3.h reads them), from a converter's hyper-parameters."""
    for key in ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "ff_dim", "n_ctx_train"):
        w.add_uint32("llm." + key, lm[key])
    w.add_uint32("llm.vocab_size", lm["vocab"])
    w.add_float32("llm.rms_eps", lm["rms_eps"])
    w.add_float32("llm.rope_theta", lm["rope_theta"])


def run_converter(convert: Callable[[object], None], args) -> int:
    """Runs convert(args); a ConvertError becomes one line on stderr, exit 1, and no partial output file."""
    try:
        convert(args)
    except ConvertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        try:
            if Path(args.outfile).exists():
                Path(args.outfile).unlink()
        except OSError:
            pass
        return 1
    return 0


def open_nemo(path: str, sections: tuple, kind: str):
    """A .nemo archive, its config, the config's name for errors, and its checked preprocessor + encoder;
    CONFIG must have every one of SECTIONS (else: not a KIND config)."""
    from nemo_archive import NemoArchive  # nemo_archive imports this module
    nemo = NemoArchive(Path(path))
    cfg = nemo.config
    where = f"{nemo.path}:model_config.yaml"
    missing = [s for s in ("preprocessor", "encoder", *sections) if s not in cfg]
    if missing:
        raise ConvertError(f"{where}: no {'/'.join(missing)} section: not {kind} config")
    return nemo, cfg, where, nemo_encoder_hparams(cfg["preprocessor"], cfg["encoder"], where)


def nemo_converter_main(convert: Callable[[object], None], description: str) -> int:
    """The command line every .nemo converter takes: --nemo, -o, --outtype, --name."""
    import argparse
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--nemo", required=True, help="the model's .nemo archive")
    ap.add_argument("-o", "--outfile", required=True, help="output GGUF path")
    ap.add_argument("--outtype", choices=OUTTYPES, default="bf16")
    ap.add_argument("--name", default="", help="general.name (default: the archive's file name)")
    return run_converter(convert, ap.parse_args())
