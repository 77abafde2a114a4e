"""A stand-in for the `safetensors` package's `safe_open` (not in Debian), enough for converters that read
a file with framework="pt": keys(), get_tensor(), get_slice().get_dtype(), metadata(). Bench use only."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


class _Slice:
    def __init__(self, dtype):
        self._dtype = dtype

    def get_dtype(self):
        return self._dtype


class safe_open:  # noqa: N801 - the package's name
    def __init__(self, path, framework="pt", device="cpu"):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            self._header = json.loads(f.read(n))
        self._data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        self._meta = self._header.pop("__metadata__", None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return list(self._header)

    def metadata(self):
        return self._meta

    def get_slice(self, name):
        return _Slice(self._header[name]["dtype"])

    def get_tensor(self, name):
        import torch
        e = self._header[name]
        a, b = e["data_offsets"]
        if e["dtype"] == "BF16":  # bfloat16 is float32's upper half
            bits = np.frombuffer(self._data[a:b].tobytes(), dtype=np.uint16).astype(np.uint32) << 16
            return torch.from_numpy(bits.view(np.float32).reshape(e["shape"]).copy()).to(torch.bfloat16)
        arr = np.frombuffer(self._data[a:b].tobytes(), dtype=_DTYPES[e["dtype"]]).reshape(e["shape"])
        return torch.from_numpy(arr.copy())
