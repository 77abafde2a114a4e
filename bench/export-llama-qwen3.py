#!/usr/bin/env python3
"""Write the Qwen3 half of a transcribe Canary-Qwen GGUF as a GGUF llama.cpp reads (arch qwen3), with
every tensor copied byte for byte (same dtypes, quantized or not), so llama-bench and transcribe-bench
run the very same LM weights. The one exception: a q/v weight stored with its LoRA adapter beside it
(unquantized files; llama-bench takes no adapter) is written merged, W + B A rounded to W's dtype: the
plain model a llama.cpp user would run, with fewer bytes and matmuls than ours.
usage: export-llama-qwen3.py IN.gguf OUT.gguf"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("TRANSCRIBE_GGUF_PY", str(ROOT / ".deps" / "llama.cpp" / "gguf-py")))
import gguf  # noqa: E402
import numpy as np  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(src)
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    w = gguf.GGUFWriter(dst, "qwen3")
    w.add_name("canary-qwen LM half")
    w.add_context_length(f["llm.n_ctx_train"])
    w.add_embedding_length(f["llm.hidden"])
    w.add_block_count(f["llm.n_layers"])
    w.add_feed_forward_length(f["llm.ff_dim"])
    w.add_head_count(f["llm.n_heads"])
    w.add_head_count_kv(f["llm.n_kv_heads"])
    w.add_key_length(f["llm.head_dim"])
    w.add_value_length(f["llm.head_dim"])
    w.add_rope_freq_base(f["llm.rope_theta"])
    w.add_layer_norm_rms_eps(f["llm.rms_eps"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(f["tokenizer.ggml.tokens"])
    w.add_token_types(f["tokenizer.ggml.token_type"])
    w.add_token_merges(f["tokenizer.ggml.merges"])
    w.add_eos_token_id(f["tokenizer.ggml.eos_token_id"])
    w.add_pad_token_id(f["tokenizer.ggml.padding_token_id"])
    w.add_add_bos_token(False)
    tensors = {t.name: t for t in r.tensors}
    for t in r.tensors:
        name = t.name
        if name.endswith(".lora_a") or name.endswith(".lora_b"):
            continue
        if name.startswith("llm.blk."):
            name = name[len("llm."):]
        elif name == "llm.output_norm.weight":
            name = "output_norm.weight"
        elif name != "token_embd.weight":
            continue
        shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order
        data = np.asarray(t.data)
        lora_a = tensors.get(t.name[: -len(".weight")] + ".lora_a")
        if lora_a is not None:
            a = np.asarray(lora_a.data, dtype=np.float32).reshape([int(x) for x in reversed(lora_a.shape.tolist())])
            lb = tensors[t.name[: -len(".weight")] + ".lora_b"]
            b = np.asarray(lb.data, dtype=np.float32).reshape([int(x) for x in reversed(lb.shape.tolist())])
            if t.tensor_type == gguf.GGMLQuantizationType.BF16:  # the reader hands BF16 over as raw bytes
                bits = data.view(np.uint16) if data.dtype == np.uint8 else data
                base = (bits.reshape(shape).astype(np.uint32) << 16).view(np.float32)
            else:
                base = data.reshape(shape).astype(np.float32)
            merged = base + b @ a
            if t.tensor_type == gguf.GGMLQuantizationType.BF16:
                u = np.ascontiguousarray(merged, dtype=np.float32).view(np.uint32)
                data = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            else:
                data = merged.astype(data.dtype)
        if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            w.add_tensor(name, data.reshape(shape))
        elif data.dtype == np.uint8:  # block-quantized: the writer takes the byte shape
            w.add_tensor(name, data, raw_dtype=t.tensor_type)
        else:  # BF16 as uint16
            w.add_tensor(name, data.reshape(shape), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
