#!/usr/bin/env python3
"""A Parakeet .nemo's encoder as NeMo exports it to ONNX, and that graph dynamically quantized to int8:
the onnxruntime peers of our encoder in bench/parakeet_onnx_compare.sh.

  PYTHONPATH=/tmp/nemo:scripts/nemo_reference /usr/bin/python3 bench/export_parakeet_onnx.py \
      --nemo MODEL.nemo --out DIR [--nemo-src /tmp/nemo]

Writes DIR/encoder-fp32.onnx and, for a transducer, DIR/decoder_joint-fp32.onnx (with decoder_joint.json:
blank id, TDT durations, prediction net size, max_symbols) (NeMo's Exportable.export of the ConformerEncoder and of
RNNTDecoderJoint, as EncDecRNNTModel.export writes them, built from the archive's config and weights: torch.onnx.export, opset 17, NeMo's dynamic axes; past 2 GB the weights go to external
files beside it), DIR/encoder-int8.onnx: the graph onnxruntime's quantize_dynamic makes with its defaults
(onnxruntime/python/tools/quantization: every MatMul and Conv with a constant weight (quantize_dynamic sets
MatMulConstBOnly: attention's products of two activations stay float) reads its input through a
DynamicQuantizeLinear (uint8, a scale and zero point per tensor computed at run time, one per tensor however
many products read it), the weight stored as int8 with one symmetric scale per tensor (|w|max / 127, zero
point 0; per_channel and reduce_range off), MatMulInteger / ConvInteger, a Cast of the int32 sums to float
and a Mul by the two scales, a Conv's bias added after). It
is built here with python3-onnx, as onnxruntime's Python package is not in Debian; onnxruntime's graph
optimizer fuses these nodes at load (DynamicQuantizeMatMul, MatMulIntegerToFloat) as it does for
quantize_dynamic's own output. DIR/encoder-int8-matmul.onnx is the same with op_types_to_quantize=["MatMul"]
(the Convs stay float): onnxruntime's ConvInteger runs the conv module's pointwise and depthwise convolutions
slower than its float Conv, so this is the int8 graph a user who measures picks.

NeMo's model class pulls in its training stack; the encoder module it exports is built as the class's
__init__ builds it (scripts/nemo_reference/nemo_imports.py makes the imports resolvable)."""
import argparse
import io
import json
import os
import sys
import tarfile
from pathlib import Path

import numpy as np


def export_fp32(nemo: str, out: Path, nemo_src: str) -> Path:
    """The encoder and, for a transducer, the decoder+joint, as EncDecRNNTModel.export writes them (the
    encoder's and RNNTDecoderJoint's own Exportable.export)."""
    import nemo_imports
    nemo_imports.hollow_packages(nemo_src)
    import torch
    import yaml
    from nemo.collections.asr.modules.conformer_encoder import ConformerEncoder
    from nemo.collections.asr.modules.rnnt import RNNTDecoder, RNNTDecoderJoint, RNNTJoint

    with tarfile.open(nemo) as tar:
        cfg = yaml.safe_load(tar.extractfile("./model_config.yaml").read())
        state = torch.load(io.BytesIO(tar.extractfile("./model_weights.ckpt").read()), map_location="cpu")
    strip = lambda d: {k: v for k, v in d.items() if k != "_target_"}
    part = lambda prefix: {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    enc = ConformerEncoder(**strip(cfg["encoder"]))
    enc.load_state_dict(part("encoder."), strict=True)
    enc.eval()
    path = out / "encoder-fp32.onnx"
    enc.export(str(path))  # Exportable.export: its input example, dynamic axes and opset 17
    del enc
    if "joint" in cfg:
        dec, joint = RNNTDecoder(**strip(cfg["decoder"])), RNNTJoint(**strip(cfg["joint"]))
        dec.load_state_dict(part("decoder."), strict=True)
        joint.load_state_dict(part("joint."), strict=True)
        dec_joint = RNNTDecoderJoint(dec, joint)
        dec_joint.eval()
        dec_joint.export(str(out / "decoder_joint-fp32.onnx"))
        durations = cfg.get("model_defaults", {}).get("tdt_durations") or []
        prednet = cfg["decoder"]["prednet"]
        (out / "decoder_joint.json").write_text(json.dumps({"blank": int(cfg["joint"]["num_classes"]),
                                                           "durations": list(durations),
                                                           "pred_hidden": int(prednet["pred_hidden"]),
                                                           "pred_layers": int(prednet["pred_rnn_layers"]),
                                                           "max_symbols": int(cfg["decoding"]["greedy"].get("max_symbols", 10))}))
    return path


def quantize_dynamic_int8(src: Path, dst: Path, op_types=("MatMul", "Conv")) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(src))  # with its external weights
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    # A weight given by a Constant node (torch folds some that way) counts as a constant too.
    consts = {n.output[0]: n for n in graph.node if n.op_type == "Constant"}

    def constant(name):
        if name in inits:
            return numpy_helper.to_array(inits[name])
        if name in consts:
            return numpy_helper.to_array(consts[name].attribute[0].t)
        return None

    new_inits, nodes, uses, dynamic = [], [], 0, {}

    def quantized_activation(name):
        """One DynamicQuantizeLinear per tensor, shared by every product that reads it (as the quantizer does)."""
        if name not in dynamic:
            q = f"{name}_dq"
            nodes.append(helper.make_node("DynamicQuantizeLinear", [name], [q, q + "_scale", q + "_zp"], name=q))
            dynamic[name] = (q, q + "_scale", q + "_zp")
        return dynamic[name]

    for node in graph.node:
        if node.op_type not in op_types or len(node.input) < 2:
            nodes.append(node)
            continue
        w = constant(node.input[1])
        if w is None or w.dtype != np.float32:  # a product of two activations (attention): MatMulConstBOnly
            nodes.append(node)
            continue
        uses += 1
        p = f"{node.name or node.output[0]}_q{uses}"
        x, x_scale, x_zp = quantized_activation(node.input[0])
        absmax = float(np.abs(w).max()) if w.size else 0.0  # the weight: int8, one symmetric scale
        scale = np.float32(absmax / 127.0 if absmax > 0 else 1.0)
        wq = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        new_inits += [numpy_helper.from_array(wq, p + "_w"), numpy_helper.from_array(np.array(scale), p + "_wscale"),
                      numpy_helper.from_array(np.array(0, np.int8), p + "_wzp")]
        b, b_scale, b_zp = p + "_w", p + "_wscale", p + "_wzp"
        if node.op_type == "MatMul":
            nodes.append(helper.make_node("MatMulInteger", [x, b, x_zp, b_zp], [p + "_i32"], name=p + "_mmi"))
        else:
            nodes.append(helper.make_node("ConvInteger", [x, b, x_zp, b_zp], [p + "_i32"], name=p + "_convi",
                                          **{a.name: helper.get_attribute_value(a) for a in node.attribute}))
        nodes.append(helper.make_node("Cast", [p + "_i32"], [p + "_f"], to=TensorProto.FLOAT, name=p + "_cast"))
        nodes.append(helper.make_node("Mul", [x_scale, b_scale], [p + "_scale"], name=p + "_scales"))
        if node.op_type == "Conv" and len(node.input) > 2 and node.input[2]:
            nodes.append(helper.make_node("Mul", [p + "_f", p + "_scale"], [p + "_y"], name=p + "_mul"))
            bias = constant(node.input[2])  # [C_out], broadcast over [N, C_out, spatial...]
            new_inits.append(numpy_helper.from_array(bias.reshape([1, bias.size] + [1] * (w.ndim - 2)).astype(np.float32), p + "_b"))
            nodes.append(helper.make_node("Add", [p + "_y", p + "_b"], [node.output[0]], name=p + "_bias"))
        else:
            nodes.append(helper.make_node("Mul", [p + "_f", p + "_scale"], [node.output[0]], name=p + "_mul"))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(new_inits)
    # The float weights now unused are dropped (the int8 graph is the int8 model's whole size).
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.save(model, str(dst), save_as_external_data=True, all_tensors_to_one_file=True, location=dst.name + ".data")
    print(f"{dst}: {uses} products quantized", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nemo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nemo-src", default=os.environ.get("NEMO_SRC", "/tmp/nemo"))
    ap.add_argument("--int8-only", action="store_true", help="quantize OUT's encoder-fp32.onnx again, no export")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    fp32 = out / "encoder-fp32.onnx" if a.int8_only else export_fp32(a.nemo, out, a.nemo_src)
    quantize_dynamic_int8(fp32, out / "encoder-int8.onnx", ("MatMul", "Conv"))
    quantize_dynamic_int8(fp32, out / "encoder-int8-matmul.onnx", ("MatMul",))
    if (out / "decoder_joint-fp32.onnx").exists():  # its LSTMs stay float (DynamicQuantizeLSTM is not built here)
        quantize_dynamic_int8(out / "decoder_joint-fp32.onnx", out / "decoder_joint-int8.onnx", ("MatMul",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
