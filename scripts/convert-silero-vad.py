#!/usr/bin/env python3
"""Convert a Silero VAD ONNX file (v5, or v6.2: the same graph) into one transcribe GGUF.

The ONNX graph has no initializers: every weight is a Constant node inside the two branches of the
top-level If (then = 16 kHz, else = 8 kHz), nested subgraphs included. Both branches are written, all
in F32 (an F16 copy moves probabilities by up to 3e-3; the whole model is 2.3 MB). Tensor names keep
the module names of the checkpoint behind a per-rate prefix, `sr16000.` or `sr8000.`:

  stft.basis          [n_bins*2, n_fft]   the windowed real-DFT rows (conv kernel [2B, 1, n_fft] squeezed)
  encoder.{0..3}.weight / .bias          reparametrised Conv1d kernels [out, in, 3] as stored
  lstm.weight_ih / weight_hh [4H, H], lstm.bias_ih / bias_hh [4H]   PyTorch gate order i, f, g, o
  head.weight [H] (the 1x1 conv [1, H, 1] squeezed), head.bias [1]

Uses python3-onnx, numpy and the gguf-py package of the fetched llama.cpp tree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from convert_common import ConvertError, gguf, run_converter

ARCH = "silero_vad"
HIDDEN = 128
# rate -> (branch attribute, n_fft, context samples, chunk samples)
BRANCHES = {16000: ("then_branch", 256, 64, 512), 8000: ("else_branch", 128, 32, 256)}
# our name -> (checkpoint name, expected shape given n_fft)
TENSORS = {
    "stft.basis": ("stft.forward_basis_buffer", lambda nf: (nf + 2, 1, nf)),
    "encoder.0.weight": ("encoder.0.reparam_conv.weight", lambda nf: (128, nf // 2 + 1, 3)),
    "encoder.0.bias": ("encoder.0.reparam_conv.bias", lambda nf: (128,)),
    "encoder.1.weight": ("encoder.1.reparam_conv.weight", lambda nf: (64, 128, 3)),
    "encoder.1.bias": ("encoder.1.reparam_conv.bias", lambda nf: (64,)),
    "encoder.2.weight": ("encoder.2.reparam_conv.weight", lambda nf: (64, 64, 3)),
    "encoder.2.bias": ("encoder.2.reparam_conv.bias", lambda nf: (64,)),
    "encoder.3.weight": ("encoder.3.reparam_conv.weight", lambda nf: (128, 64, 3)),
    "encoder.3.bias": ("encoder.3.reparam_conv.bias", lambda nf: (128,)),
    "lstm.weight_ih": ("decoder.rnn.weight_ih", lambda nf: (4 * HIDDEN, HIDDEN)),
    "lstm.weight_hh": ("decoder.rnn.weight_hh", lambda nf: (4 * HIDDEN, HIDDEN)),
    "lstm.bias_ih": ("decoder.rnn.bias_ih", lambda nf: (4 * HIDDEN,)),
    "lstm.bias_hh": ("decoder.rnn.bias_hh", lambda nf: (4 * HIDDEN,)),
    "head.weight": ("decoder.decoder.2.weight", lambda nf: (1, HIDDEN, 1)),
    "head.bias": ("decoder.decoder.2.bias", lambda nf: (1,)),
}


def branch_constants(graph, onnx, numpy_helper) -> dict[str, np.ndarray]:
    """Float constants of a subgraph and its nested subgraphs, by output name without the inline prefix."""
    out: dict[str, np.ndarray] = {}

    def walk(g):
        for node in g.node:
            if node.op_type == "Constant":
                for a in node.attribute:
                    if a.name == "value":
                        arr = numpy_helper.to_array(a.t)
                        if arr.dtype == np.float32:
                            name = node.output[0]
                            name = name.split("__Inline_0__", 1)[-1]
                            out[name] = arr
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        walk(sub)

    walk(graph)
    return out


def load_branches(path: Path) -> dict[int, dict[str, np.ndarray]]:
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:
        raise ConvertError(f"python3-onnx is needed to read {path} ({exc})")
    if not path.is_file():
        raise ConvertError(f"ONNX file not found: {path}")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - onnx raises several kinds for a corrupt file
        raise ConvertError(f"{path}: not a readable ONNX file ({exc})")
    ifs = [n for n in model.graph.node if n.op_type == "If"]
    if len(ifs) != 1:
        raise ConvertError(f"{path}: expected one top-level If (16 kHz / 8 kHz branches), found {len(ifs)}")
    attrs = {a.name: a.g for a in ifs[0].attribute}
    out = {}
    for rate, (branch, n_fft, _, _) in BRANCHES.items():
        if branch not in attrs:
            raise ConvertError(f"{path}: the If has no {branch}")
        consts = branch_constants(attrs[branch], onnx, numpy_helper)
        tensors = {}
        for ours, (theirs, shape_of) in TENSORS.items():
            if theirs not in consts:
                raise ConvertError(f"{path}: {branch} has no constant {theirs}: not a Silero VAD v5/v6 file")
            arr = consts[theirs]
            if arr.shape != shape_of(n_fft):
                raise ConvertError(f"{path}: {branch} {theirs} has shape {arr.shape}, expected {shape_of(n_fft)}")
            tensors[ours] = np.ascontiguousarray(arr, dtype=np.float32)
        tensors["stft.basis"] = tensors["stft.basis"].reshape(n_fft + 2, n_fft)
        tensors["head.weight"] = tensors["head.weight"].reshape(HIDDEN)
        out[rate] = tensors
    return out


def convert(args) -> None:
    src = Path(args.onnx)
    branches = load_branches(src)
    out = Path(args.outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), ARCH)
    w.add_name(args.name or src.stem.replace("_", "-"))
    w.add_file_type(0)
    a = ARCH + "."
    rates = sorted(branches, reverse=True)
    w.add_array(a + "sample_rates", rates)
    w.add_uint32(a + "hidden", HIDDEN)
    for rate in rates:
        _, n_fft, context, chunk = BRANCHES[rate]
        p = f"{a}sr{rate}."
        w.add_uint32(p + "n_fft", n_fft)
        w.add_uint32(p + "hop", n_fft // 2)
        w.add_uint32(p + "context", context)
        w.add_uint32(p + "chunk", chunk)
        for name, arr in branches[rate].items():
            w.add_tensor(f"sr{rate}.{name}", arr, raw_dtype=gguf.GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    head = {r: float(branches[r]["head.bias"][0]) for r in rates}
    print(f"wrote {out}: Silero VAD, rates {rates}, head bias {head}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("onnx", help="silero_vad_v5.onnx (scripts/fetch-silero-vad.sh fetches it)")
    ap.add_argument("-o", "--outfile", required=True, help="output GGUF")
    ap.add_argument("--name", default="", help="general.name (default: from the file name)")
    return run_converter(convert, ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
