"""A NeMo `.nemo` archive read without torch or NeMo: the tar's members, the YAML config, and the
`torch.save`d state dict (a zip of one pickle plus raw storages) through a restricted unpickler that
builds nothing but tensor references; each tensor's bytes are read from the zip only when asked for.
Needs python3-yaml and numpy."""

from __future__ import annotations

import collections
import io
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from convert_common import ConvertError

# torch storage class -> (numpy dtype, our dtype name)
STORAGES = {
    "FloatStorage": (np.float32, "F32"),
    "HalfStorage": (np.float16, "F16"),
    "BFloat16Storage": (np.uint16, "BF16"),
    "DoubleStorage": (np.float64, "F64"),
    "LongStorage": (np.int64, "I64"),
    "IntStorage": (np.int32, "I32"),
    "ShortStorage": (np.int16, "I16"),
    "CharStorage": (np.int8, "I8"),
    "ByteStorage": (np.uint8, "U8"),
    "BoolStorage": (np.bool_, "BOOL"),
}


class _StorageType:
    def __init__(self, name: str):
        self.name = name


class _TensorRef:
    def __init__(self, key: str, storage: str, offset: int, size: tuple, stride: tuple):
        self.key, self.storage, self.offset, self.size, self.stride = key, storage, offset, size, stride


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    key, storage_type = storage
    return _TensorRef(key, storage_type, int(storage_offset), tuple(size), tuple(stride))


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


class _Unpickler(pickle.Unpickler):
    """Only the globals a state dict needs; anything else is refused (a pickle can run code)."""

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "torch" and name in STORAGES:
            return _StorageType(name)
        raise ConvertError(f"checkpoint pickle refers to {module}.{name}, which a plain state dict never does")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise ConvertError(f"checkpoint pickle has an unexpected persistent id {pid!r:.80}")
        storage_type = pid[1]
        if not isinstance(storage_type, _StorageType):
            raise ConvertError(f"checkpoint storage of unsupported type {storage_type!r:.80}")
        return (str(pid[2]), storage_type.name)


class TorchCheckpoint:
    """A torch.save zip: names, shapes, and raw arrays read on demand."""

    def __init__(self, data: bytes, what: str):
        self.what = what
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise ConvertError(f"{what}: not a torch zip checkpoint (legacy pickle-only checkpoints are not supported)")
        pkls = [n for n in self.zip.namelist() if n.endswith("/data.pkl")]
        if len(pkls) != 1:
            raise ConvertError(f"{what}: expected one data.pkl in the checkpoint, found {len(pkls)}")
        self.root = pkls[0][: -len("data.pkl")]
        try:
            state = _Unpickler(io.BytesIO(self.zip.read(pkls[0]))).load()
        except ConvertError:
            raise
        except Exception as exc:  # noqa: BLE001 - a corrupt pickle raises many kinds
            raise ConvertError(f"{what}: unreadable checkpoint pickle ({exc})")
        # The weights may sit under a key beside other entries (Lightning's "state_dict", OpenAI Whisper's
        # "model_state_dict" beside its "dims"): those others are kept as meta.
        self.meta = {}
        for key in ("state_dict", "model_state_dict"):
            if isinstance(state, dict) and isinstance(state.get(key), dict):
                self.meta = {k: v for k, v in state.items() if k != key}
                state = state[key]
                break
        if not isinstance(state, dict):
            raise ConvertError(f"{what}: the checkpoint is not a state dict")
        self.tensors = {k: v for k, v in state.items() if isinstance(v, _TensorRef)}

    def has(self, name: str) -> bool:
        return name in self.tensors

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].size

    def raw(self, name: str) -> tuple[np.ndarray, str]:
        t = self.tensors[name]
        np_dt, dt = STORAGES[t.storage]
        try:
            buf = self.zip.read(f"{self.root}data/{t.key}")
        except KeyError:
            raise ConvertError(f"{self.what}: storage {t.key} of {name} is missing (truncated archive?)") from None
        storage = np.frombuffer(buf, dtype=np.dtype(np_dt).newbyteorder("<"))
        count = int(np.prod(t.size)) if t.size else 1
        span = t.offset + (sum((s - 1) * st for s, st in zip(t.size, t.stride)) + 1 if count else 0)
        if span > storage.size:
            raise ConvertError(f"{self.what}: tensor {name} reaches past its storage")
        itemsize = storage.itemsize
        arr = np.lib.stride_tricks.as_strided(storage[t.offset:], shape=t.size,
                                              strides=tuple(s * itemsize for s in t.stride))
        return np.array(arr, dtype=np_dt), dt


class NemoArchive:
    """A .nemo tar: model_config.yaml, model_weights.ckpt and the artifacts the config names `nemo:<file>`."""

    def __init__(self, path: Path):
        if not path.is_file():
            raise ConvertError(f".nemo file not found: {path}")
        self.path = path
        try:
            with tarfile.open(path, "r:*") as tar:
                self.members = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ConvertError(f"{path}: not a .nemo archive ({exc})")
        if not self.members:
            raise ConvertError(f"{path}: not a .nemo archive (no files in it)")
        cfg = self.member("model_config.yaml")
        try:
            import yaml
        except ImportError as exc:
            raise ConvertError(f"python3-yaml is needed to read {path} ({exc})")
        try:
            self.config = yaml.safe_load(cfg.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            raise ConvertError(f"{path}: model_config.yaml is not valid YAML{at}: {getattr(exc, 'problem', exc)}")
        if not isinstance(self.config, dict):
            raise ConvertError(f"{path}: model_config.yaml is not a mapping")

    def member(self, name: str) -> bytes:
        name = name[len("nemo:"):] if name.startswith("nemo:") else name
        if Path(name).name not in self.members:
            raise ConvertError(f"{self.path}: no member {name} in the archive")
        return self.members[Path(name).name]

    def checkpoint(self) -> TorchCheckpoint:
        return TorchCheckpoint(self.member("model_weights.ckpt"), f"{self.path}:model_weights.ckpt")


# ----------------------------------------------------------------------------- writing (synthetic checkpoints)

_DTYPE_STORAGE = {np.dtype(np.float32): "FloatStorage", np.dtype(np.int64): "LongStorage",
                  np.dtype(np.float16): "HalfStorage"}


def _state_dict_pickle(entries, dims: dict | None = None) -> bytes:
    """Protocol-2 pickle of an OrderedDict name -> tensor, as torch.save writes it (written opcode by opcode:
    no torch needed). entries: (name, storage class name, storage key, shape). With dims, the state dict is
    wrapped as OpenAI's Whisper checkpoints are: {"dims": {name: int}, "model_state_dict": state dict}."""
    out = bytearray(b"\x80\x02")

    def glob(module, name):
        out.extend(b"c" + f"{module}\n{name}\n".encode())

    def text(s):
        b = s.encode()
        out.extend(b"X" + struct.pack("<I", len(b)) + b)

    def integer(i):
        out.extend(b"J" + struct.pack("<i", i))

    def ints(values):
        out.extend(b"(")
        for v in values:
            integer(v)
        out.extend(b"t")

    if dims is not None:
        out.extend(b"}(")
        text("dims")
        out.extend(b"}(")
        for key, value in dims.items():
            text(key)
            integer(value)
        out.extend(b"u")
        text("model_state_dict")
    glob("collections", "OrderedDict")
    out.extend(b")R(")
    for name, storage, key, shape in entries:
        text(name)
        glob("torch._utils", "_rebuild_tensor_v2")
        out.extend(b"((")
        text("storage")
        glob("torch", storage)
        text(key)
        text("cpu")
        integer(int(np.prod(shape)) if shape else 1)
        out.extend(b"tQ")  # the persistent id tuple, BINPERSID
        integer(0)
        ints(shape)
        strides, acc = [], 1
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= s
        ints(strides)
        out.extend(b"\x89")  # requires_grad False
        glob("collections", "OrderedDict")
        out.extend(b")Rt")  # backward hooks, end of the argument tuple
        out.extend(b"R")
    out.extend(b"u")
    if dims is not None:
        out.extend(b"u")
    out.extend(b".")
    return bytes(out)


def write_torch_checkpoint(path: Path, tensors, record: str = "model_weights", dims: dict | None = None) -> None:
    """A torch.save zip of the state dict; tensors: iterable of (name, ndarray), each written as it comes;
    record: the archive's folder; dims: see _state_dict_pickle.

    Python's zipfile switches to ZIP64 records once an offset passes 2 GiB - 1 (its ZIP64_LIMIT), where the
    format's 32-bit fields hold up to 4 GiB - 1; torch's reader (miniz, torch 1.13) refuses such an
    archive between 2 and 4 GiB ("invalid header or archive is corrupted"). torch's own writer uses ZIP64
    only past 4 GiB, and so does this one: the limit is raised while the archive is written."""
    entries = []
    saved_limit = zipfile.ZIP64_LIMIT
    zipfile.ZIP64_LIMIT = (1 << 32) - 1
    try:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            for i, (name, arr) in enumerate(tensors):
                arr = np.require(arr, requirements="C")  # keeps 0-d tensors 0-d
                entries.append((name, _DTYPE_STORAGE[arr.dtype], str(i), tuple(arr.shape)))
                z.writestr(f"{record}/data/{i}", arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
            z.writestr(f"{record}/data.pkl", _state_dict_pickle(entries, dims))
            z.writestr(f"{record}/version", "3\n")
    finally:
        zipfile.ZIP64_LIMIT = saved_limit


def write_nemo(path: Path, files: dict) -> None:
    """A .nemo tar (uncompressed, members under ./ as NeMo's SaveRestoreConnector writes them); files: member
    name -> source path."""
    with tarfile.open(path, "w:") as tar:
        for name, src in sorted(files.items()):
            tar.add(str(src), arcname="./" + name)
