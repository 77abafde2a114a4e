#!/usr/bin/env python3
"""Write a synthetic checkpoint in the exact upstream layout, with seeded random weights.

  --family canary-qwen (default): BF16 weights
      --preset full   the real shapes of nvidia/canary-qwen-2.5b (~5.1 GB): speed and memory work
      --preset small  the same layout at toy sizes (seconds): tests of this script and the converter
    Output: OUT/checkpoint/{config.json, model.safetensors} and OUT/llm/{config.json, vocab.json,
    merges.txt, tokenizer_config.json} (the tokenizer files are copied from --tokenizer-from, by default
    the bundled fixture, which carries the real Qwen2/Qwen3 tokenizer).
  --family parakeet-tdt: F32 weights, OUT/model.nemo (the tar of model_config.yaml, model_weights.ckpt and
    the SentencePiece files, as NeMo saves it; written without torch or NeMo)
      --preset full   nvidia/parakeet-tdt-0.6b-v2's shapes (d_model 1024, 24 layers, 8 heads, ff 4096, 128 mels,
                      prediction net 640 x 2 LSTM layers, joint 640, vocab 1024 + blank, durations 0-4): ~2.5 GB
      --preset small  toy sizes
      --preset full-v3 / small-v3  the same with parakeet-tdt-0.6b-v3's 8192-piece vocabulary
    The config is the bundled parakeet-tdt-tiny fixture's with the dimensions changed; the 1024-piece
    tokenizer is trained (SentencePiece BPE, as NeMo's create_spt_model) on /usr/share/common-licenses.
  --family parakeet-streaming: F32 weights, OUT/model.nemo (EncDecRNNTBPEModel, a cache-aware streaming encoder:
    causal subsampling and convolutions, the conv module's LayerNorm, biases, chunked_limited attention)
      --preset full   nvidia/nemotron-speech-streaming-en-0.6b's shapes (parakeet-tdt-0.6b-v2's encoder and
                      prediction net, an RNNT joint, lookaheads [70, 13], [70, 6], [70, 1], [70, 0])
      --preset small  toy sizes
    The config is the bundled streaming-tiny fixture's end-of-utterance RNNT model's, dimensions changed.
  --family canary-aed: F32 weights, OUT/model.nemo (EncDecMultiTaskModel)
      --preset full   nvidia/canary-1b-flash's shapes (encoder 32 x 1024 with biases, decoder 4 x 1024, 8 heads,
                      inner 4096, max length 1024, 5248 vocabulary rows): ~3.6 GB
      --preset small  toy sizes
    The config and the aggregate tokenizer are the bundled canary-aed-tiny fixture's, dimensions changed.
  --family sortformer: F32 weights, OUT/model.nemo (SortformerEncLabelModel)
      --preset full   nvidia/diar_streaming_sortformer_4spk-v2's shapes (128 mels, normalize NA, encoder 17 x 512
                      with biases, 8 heads, projection to 192, Transformer encoder 18 x 192, inner 768, 8 heads,
                      4 speakers, streaming_mode true): ~0.5 GB
      --preset small  toy sizes
    The config is the bundled sortformer-tiny fixture's, dimensions changed.
  --family qwen3-asr: BF16 weights, OUT/ = the released folder (config.json, model.safetensors, the Qwen2
      tokenizer files with Qwen3-ASR's added tokens, preprocessor_config.json, chat_template.json)
      --preset 0.6b / 1.7b   Qwen/Qwen3-ASR-0.6B's and -1.7B's shapes (AuT encoder 18 x 896 / 24 x 1024, Qwen3
                             decoder 28 x 1024 / 28 x 2048, tied embeddings)
      --preset small         toy sizes
  --family qwen3-aligner: the same for Qwen/Qwen3-ForcedAligner-0.6B (--preset 0.6b: the 1.7B's encoder, the
      0.6B's decoder, 152064 embedding rows, an own head of 5000 timestamp classes; --preset small)

  --family whisper: F16 weights (as OpenAI releases them), OUT/model.pt ({"dims", "model_state_dict"}, what
    whisper.load_model reads; written without torch) and OUT/multilingual.tiktoken + OUT/mel_filters.npz
    (copied from the bundled whisper-tiny fixture, which holds OpenAI's verbatim)
      --preset tiny / base / small / medium / large-v3 / large-v3-turbo   the released models' dims
      --preset toy    n_audio_state 64, 2 layers: tests of this script and the converter
Tensors are generated and written one at a time, so memory stays at one tensor (chunked for the embedding).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_common import subsampled_features  # noqa: E402  (the converter's own rule)

PRESETS = {
    "full": dict(d_model=1024, enc_layers=32, enc_heads=8, sub_channels=256, n_mels=128, conv_kernel=9,
                 hidden=2048, llm_layers=28, heads=16, kv_heads=8, head_dim=128, ff=6144, vocab=151936,
                 lora_r=128, lora_alpha=256),
    "small": dict(d_model=128, enc_layers=2, enc_heads=2, sub_channels=32, n_mels=128, conv_kernel=9,
                  hidden=128, llm_layers=2, heads=4, kv_heads=2, head_dim=32, ff=384, vocab=151936,
                  lora_r=8, lora_alpha=16),
}


def salm_config(p: dict) -> dict:
    return {
        "pretrained_llm": "Qwen/Qwen3-1.7B",
        "pretrained_asr": "nvidia/canary-1b-flash",
        "prompt_format": "qwen",
        "audio_locator_tag": "<|audioplaceholder|>",
        "lora": {"task_type": "CAUSAL_LM", "r": p["lora_r"], "lora_alpha": p["lora_alpha"], "lora_dropout": 0.01,
                 "target_modules": ["q_proj", "v_proj"]},
        "perception": {
            "target": "nemo.collections.speechlm2.modules.perception.AudioPerceptionModule",
            "output_dim": p["hidden"],
            "preprocessor": {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
                             "sample_rate": 16000, "normalize": "per_feature", "window_size": 0.025,
                             "window_stride": 0.01, "window": "hann", "features": p["n_mels"], "n_fft": 512,
                             "log": True, "frame_splicing": 1, "dither": 1e-05, "pad_to": 0, "pad_value": 0.0},
            "encoder": {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": p["n_mels"],
                        "feat_out": -1, "n_layers": p["enc_layers"], "d_model": p["d_model"],
                        "subsampling": "dw_striding", "subsampling_factor": 8,
                        "subsampling_conv_channels": p["sub_channels"], "causal_downsampling": False,
                        "ff_expansion_factor": 4, "self_attention_model": "rel_pos", "n_heads": p["enc_heads"],
                        "att_context_size": [-1, -1], "xscaling": False, "untie_biases": True,
                        "pos_emb_max_len": 5000, "conv_kernel_size": p["conv_kernel"], "conv_norm_type": "batch_norm",
                        "conv_context_size": None, "dropout": 0.1, "dropout_pre_encoder": 0.1, "dropout_emb": 0.0,
                        "dropout_att": 0.1},
            "modality_adapter": {"_target_": "nemo.collections.speechlm2.modules.perception.IdentityConnector",
                                 "d_model": p["d_model"]},
        },
        "torch_dtype": "bfloat16",
    }


def qwen3_config(p: dict) -> dict:
    return {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": p["head_dim"], "hidden_act": "silu",
            "hidden_size": p["hidden"], "initializer_range": 0.02, "intermediate_size": p["ff"],
            "max_position_embeddings": 40960, "max_window_layers": p["llm_layers"], "model_type": "qwen3",
            "num_attention_heads": p["heads"], "num_hidden_layers": p["llm_layers"],
            "num_key_value_heads": p["kv_heads"], "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
            "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False, "vocab_size": p["vocab"]}


def tensor_specs(p: dict):
    """(name, shape, init) in upstream order; init = ('normal', std) | ('const', v) | ('var',) | ('I64',)."""
    d, C, H = p["d_model"], p["sub_channels"], p["enc_heads"]
    specs = []
    lin = lambda name, o, i, bias=True: [(name + ".weight", (o, i), ("normal", i ** -0.5))] + (
        [(name + ".bias", (o,), ("normal", 0.02))] if bias else [])
    norm = lambda name, n: [(name + ".weight", (n,), ("one",)), (name + ".bias", (n,), ("normal", 0.02))]
    specs.append(("perception.preprocessor.featurizer.fb", (1, p["n_mels"], 257), ("fb",)))
    specs.append(("perception.preprocessor.featurizer.window", (400,), ("hann",)))
    e = "perception.encoder."
    specs += [(e + "pre_encode.conv.0.weight", (C, 1, 3, 3), ("normal", 1 / 3)), (e + "pre_encode.conv.0.bias", (C,), ("normal", 0.02))]
    for k in ("2", "5"):
        specs += [(e + f"pre_encode.conv.{k}.weight", (C, 1, 3, 3), ("normal", 1 / 3)), (e + f"pre_encode.conv.{k}.bias", (C,), ("normal", 0.02))]
    for k in ("3", "6"):
        specs += [(e + f"pre_encode.conv.{k}.weight", (C, C, 1, 1), ("normal", C ** -0.5)), (e + f"pre_encode.conv.{k}.bias", (C,), ("normal", 0.02))]
    specs += lin(e + "pre_encode.out", d, C * p["n_mels"] // 8)
    for i in range(p["enc_layers"]):
        L = f"{e}layers.{i}."
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            specs += norm(L + n, d)
        for ff in ("feed_forward1", "feed_forward2"):
            specs += lin(L + ff + ".linear1", 4 * d, d) + lin(L + ff + ".linear2", d, 4 * d)
        for x in ("q", "k", "v", "out"):
            specs += lin(L + f"self_attn.linear_{x}", d, d)
        specs += lin(L + "self_attn.linear_pos", d, d, bias=False)
        specs += [(L + "self_attn.pos_bias_u", (H, d // H), ("normal", 0.1)), (L + "self_attn.pos_bias_v", (H, d // H), ("normal", 0.1))]
        specs += [(L + "conv.pointwise_conv1.weight", (2 * d, d, 1), ("normal", d ** -0.5)), (L + "conv.pointwise_conv1.bias", (2 * d,), ("normal", 0.02))]
        specs += [(L + "conv.depthwise_conv.weight", (d, 1, p["conv_kernel"]), ("normal", p["conv_kernel"] ** -0.5)), (L + "conv.depthwise_conv.bias", (d,), ("normal", 0.02))]
        specs += [(L + "conv.batch_norm.weight", (d,), ("one",)), (L + "conv.batch_norm.bias", (d,), ("normal", 0.02)),
                  (L + "conv.batch_norm.running_mean", (d,), ("normal", 0.1)), (L + "conv.batch_norm.running_var", (d,), ("var",)),
                  (L + "conv.batch_norm.num_batches_tracked", (), ("I64",))]
        specs += [(L + "conv.pointwise_conv2.weight", (d, d, 1), ("normal", d ** -0.5)), (L + "conv.pointwise_conv2.bias", (d,), ("normal", 0.02))]
    specs += lin("perception.proj", p["hidden"], d)
    h, hd = p["hidden"], p["head_dim"]
    specs.append(("embed_tokens.weight", (p["vocab"], h), ("normal", 0.5)))
    m = "llm.base_model.model.model."
    for j in range(p["llm_layers"]):
        L = f"{m}layers.{j}."
        specs += [(L + "input_layernorm.weight", (h,), ("one",)), (L + "post_attention_layernorm.weight", (h,), ("one",))]
        for proj, rows in (("q", p["heads"] * hd), ("v", p["kv_heads"] * hd)):
            specs += [(L + f"self_attn.{proj}_proj.base_layer.weight", (rows, h), ("normal", h ** -0.5)),
                      (L + f"self_attn.{proj}_proj.lora_A.default.weight", (p["lora_r"], h), ("normal", h ** -0.5)),
                      (L + f"self_attn.{proj}_proj.lora_B.default.weight", (rows, p["lora_r"]), ("normal", 0.01 / p["lora_r"] ** 0.5))]
        specs += [(L + "self_attn.k_proj.weight", (p["kv_heads"] * hd, h), ("normal", h ** -0.5)),
                  (L + "self_attn.o_proj.weight", (h, p["heads"] * hd), ("normal", (p["heads"] * hd) ** -0.5)),
                  (L + "self_attn.q_norm.weight", (hd,), ("one",)), (L + "self_attn.k_norm.weight", (hd,), ("one",)),
                  (L + "mlp.gate_proj.weight", (p["ff"], h), ("normal", h ** -0.5)),
                  (L + "mlp.up_proj.weight", (p["ff"], h), ("normal", h ** -0.5)),
                  (L + "mlp.down_proj.weight", (h, p["ff"]), ("normal", p["ff"] ** -0.5))]
    specs.append((m + "norm.weight", (h,), ("one",)))
    return specs


def to_bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def slaney_filterbank(n_mels: int) -> np.ndarray:
    """Slaney-scale, Slaney-normalised triangular filters (librosa.filters.mel defaults), 0-8 kHz."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        lin = f / (200.0 / 3)
        return np.where(f >= 1000, 15 + np.log(np.maximum(f, 1e-10) / 1000) / (np.log(6.4) / 27), lin)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        return np.where(m >= 15, 1000 * np.exp((np.log(6.4) / 27) * (m - 15)), (200.0 / 3) * m)

    fft_freqs = np.linspace(0, 8000, 257)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0), hz_to_mel(8000), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return w[None].astype(np.float32)


def produce(rng, name, shape, init, chunk_rows=8192):
    """Yields the tensor's bytes in row chunks."""
    kind = init[0]
    if kind == "I64":
        yield np.array(0, dtype=np.int64).tobytes()
        return
    if kind == "fb":
        yield to_bf16(slaney_filterbank(shape[1])).tobytes()
        return
    if kind == "hann":
        yield to_bf16(np.hanning(shape[0]).astype(np.float32)).tobytes()
        return
    rows = shape[0] if shape else 1
    rest = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    for r0 in range(0, rows, chunk_rows):
        n = min(chunk_rows, rows - r0) * rest
        if kind == "normal":
            x = rng.standard_normal(n, dtype=np.float32) * np.float32(init[1])
        elif kind == "one":
            x = 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)
        elif kind == "var":
            x = rng.uniform(0.5, 1.5, n).astype(np.float32)
        else:
            raise ValueError(kind)
        yield to_bf16(x).tobytes()


def write_checkpoint(out: Path, p: dict, seed: int) -> None:
    write_specs(out, tensor_specs(p), seed)


def write_specs(out: Path, specs: list, seed: int) -> None:
    """A BF16 safetensors file of SPECS ((name, shape, init) as tensor_specs gives them), a tensor at a time."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, init in specs:
        dtype, width = ("I64", 8) if init[0] == "I64" else ("BF16", 2)
        n = (int(np.prod(shape)) if shape else 1) * width
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    rng = np.random.default_rng(seed)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, shape, init in specs:
            for chunk in produce(rng, name, shape, init):
                f.write(chunk)
    print(f"wrote {out} ({offset / 1e9:.2f} GB of tensors, {len(specs)} tensors)")


# ----------------------------------------------------------------------------- Parakeet-TDT

PARAKEET_PRESETS = {
    "full": dict(d_model=1024, layers=24, heads=8, sub_channels=256, n_mels=128, conv_kernel=9, pred=640,
                 pred_layers=2, joint=640, vocab=1024),
    "small": dict(d_model=128, layers=2, heads=4, sub_channels=32, n_mels=128, conv_kernel=9, pred=64,
                  pred_layers=2, joint=64, vocab=128),
}
# parakeet-tdt-0.6b-v3: v2's shapes with an 8192-piece vocabulary (25 languages).
PARAKEET_PRESETS["full-v3"] = dict(PARAKEET_PRESETS["full"], vocab=8192)
PARAKEET_PRESETS["small-v3"] = dict(PARAKEET_PRESETS["small"], vocab=8192)
PARAKEET_FIXTURE = ROOT / "tests" / "fixtures" / "parakeet-tdt-tiny" / "model.nemo"
# Cache-aware streaming RNNT models: nvidia/nemotron-speech-streaming-en-0.6b's shapes (its lookaheads 0, 80,
# 480 and 1040 ms: att_context_size [70, 13], [70, 6], [70, 1], [70, 0]).
STREAMING_PRESETS = {
    "full": dict(PARAKEET_PRESETS["full"], att_context_size=[[70, 13], [70, 6], [70, 1], [70, 0]]),
    "small": dict(PARAKEET_PRESETS["small"], att_context_size=[[70, 13], [70, 6], [70, 1], [70, 0]]),
}
STREAMING_FIXTURE = ROOT / "tests" / "fixtures" / "streaming-tiny" / "eou" / "model.nemo"


def nemo_encoder_tensors(p: dict, rng, use_bias: bool, streaming: bool = False):
    """(NeMo name, float32 array) of the preprocessor and FastConformer in the checkpoint's order; with
    use_bias the layers' linear and convolution biases too (Canary's encoders; Parakeet's have none);
    STREAMING: a cache-aware model's (causal subsampling: more frequency bins; the conv module's LayerNorm)."""
    d, C, H = p["d_model"], p["sub_channels"], p["heads"]
    normal = lambda shape, std: (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))
    yield "preprocessor.featurizer.window", np.hanning(400).astype(np.float32)
    yield "preprocessor.featurizer.fb", slaney_filterbank(p["n_mels"])
    e = "encoder.pre_encode."
    bins = subsampled_features(p["n_mels"], streaming)
    yield e + "out.weight", normal((d, C * bins), (C * bins) ** -0.5)
    yield e + "out.bias", normal((d,), 0.02)
    for k, shape in (("0", (C, 1, 3, 3)), ("2", (C, 1, 3, 3)), ("3", (C, C, 1, 1)), ("5", (C, 1, 3, 3)), ("6", (C, C, 1, 1))):
        yield e + f"conv.{k}.weight", normal(shape, (shape[1] * 9 if shape[2] == 3 else shape[1]) ** -0.5)
        yield e + f"conv.{k}.bias", normal((C,), 0.02)
    for i in range(p["layers"]):
        L = f"encoder.layers.{i}."
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            yield L + n + ".weight", 1.0 + normal((d,), 0.1)
            yield L + n + ".bias", normal((d,), 0.02)
        bias = (lambda name, n: [(name, normal((n,), 0.02))]) if use_bias else (lambda name, n: [])
        for ff in ("feed_forward1", "feed_forward2"):
            yield L + ff + ".linear1.weight", normal((4 * d, d), d ** -0.5)
            yield from bias(L + ff + ".linear1.bias", 4 * d)
            yield L + ff + ".linear2.weight", normal((d, 4 * d), (4 * d) ** -0.5)
            yield from bias(L + ff + ".linear2.bias", d)
        for x in ("q", "k", "v", "out", "pos"):
            yield L + f"self_attn.linear_{x}.weight", normal((d, d), d ** -0.5)
            if x != "pos":
                yield from bias(L + f"self_attn.linear_{x}.bias", d)
        yield L + "self_attn.pos_bias_u", normal((H, d // H), 0.1)
        yield L + "self_attn.pos_bias_v", normal((H, d // H), 0.1)
        yield L + "conv.pointwise_conv1.weight", normal((2 * d, d, 1), d ** -0.5)
        yield from bias(L + "conv.pointwise_conv1.bias", 2 * d)
        yield L + "conv.depthwise_conv.weight", normal((d, 1, p["conv_kernel"]), p["conv_kernel"] ** -0.5)
        yield from bias(L + "conv.depthwise_conv.bias", d)
        yield L + "conv.batch_norm.weight", 1.0 + normal((d,), 0.1)
        yield L + "conv.batch_norm.bias", normal((d,), 0.02)
        if not streaming:  # a LayerNorm there has no statistics
            yield L + "conv.batch_norm.running_mean", normal((d,), 0.1)
            yield L + "conv.batch_norm.running_var", rng.uniform(0.5, 1.5, d).astype(np.float32)
            yield L + "conv.batch_norm.num_batches_tracked", np.array(0, dtype=np.int64)
        yield L + "conv.pointwise_conv2.weight", normal((d, d, 1), d ** -0.5)
        yield from bias(L + "conv.pointwise_conv2.bias", d)


def parakeet_tensors(p: dict, rng, streaming: bool = False):
    """(NeMo name, float32 array) in the checkpoint's order; use_bias=false conformer layers (a streaming
    model's have biases, and its joint no durations: RNNT)."""
    d, V, P, J = p["d_model"], p["vocab"], p["pred"], p["joint"]
    n_dur = 0 if streaming else 5
    normal = lambda shape, std: (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))
    yield from nemo_encoder_tensors(p, rng, use_bias=streaming, streaming=streaming)
    embed = normal((V + 1, P), 1.0)
    embed[V] = 0  # the blank row is the padding row
    yield "decoder.prediction.embed.weight", embed
    for k in range(p["pred_layers"]):
        s = "decoder.prediction.dec_rnn.lstm."
        for w in ("weight_ih", "weight_hh"):
            yield s + f"{w}_l{k}", rng.uniform(-P ** -0.5, P ** -0.5, (4 * P, P)).astype(np.float32)
        for b in ("bias_ih", "bias_hh"):
            yield s + f"{b}_l{k}", rng.uniform(-P ** -0.5, P ** -0.5, 4 * P).astype(np.float32)
    yield "joint.pred.weight", normal((J, P), P ** -0.5)
    yield "joint.pred.bias", normal((J,), 0.02)
    yield "joint.enc.weight", normal((J, d), d ** -0.5)
    yield "joint.enc.bias", normal((J,), 0.02)
    yield "joint.joint_net.2.weight", normal((V + 1 + n_dur, J), J ** -0.5)
    # Biases that make the random joint decode like a trained one: mostly blanks, tokens that move on
    # (a duration of 0 rare), so the decode does about the work a real transcript needs.
    bias = normal((V + 1 + n_dur,), 0.02)
    bias[V] += 1.0
    if n_dur:
        bias[V + 1:] += np.array([-4.0, 1.0, 1.0, 0.5, 0.0], dtype=np.float32)
    yield "joint.joint_net.2.bias", bias


def parakeet_tokenizer(vocab: int, tmp: Path) -> dict:
    """SentencePiece files named as NeMo stores them: the fixture's for its vocabulary size, else trained."""
    from nemo_archive import NemoArchive
    import sentencepiece as spm
    fixture = NemoArchive(PARAKEET_FIXTURE)
    model = fixture.member(fixture.config["tokenizer"]["model_path"])
    if spm.SentencePieceProcessor(model_proto=model).get_piece_size() != vocab:
        lines = []
        for f in sorted(Path("/usr/share/common-licenses").iterdir()):
            if f.is_file():
                lines += [ln.strip().lower() for ln in f.read_text(encoding="utf-8", errors="ignore").splitlines() if ln.strip()]
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab, model_type="bpe",
                                       character_coverage=1.0, bos_id=-1, eos_id=-1, pad_id=-1, minloglevel=2)
        model = buf.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=model)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    names = {"model": "0" * 32 + "_tokenizer.model", "vocab": "1" * 32 + "_tokenizer.vocab", "txt": "2" * 32 + "_vocab.txt"}
    (tmp / names["model"]).write_bytes(model)
    (tmp / names["vocab"]).write_text("".join(f"{p}\t{sp.get_score(i)}\n" for i, p in enumerate(pieces)), encoding="utf-8")
    (tmp / names["txt"]).write_text("".join((p[1:] if p.startswith("\u2581") else "##" + p) + "\n"
                                            for p in pieces if p != "<unk>"), encoding="utf-8")
    return {"names": names, "pieces": pieces}


def write_parakeet(out: Path, preset: str, seed: int, streaming: bool = False) -> None:
    from nemo_archive import NemoArchive, write_nemo, write_torch_checkpoint
    p = (STREAMING_PRESETS if streaming else PARAKEET_PRESETS)[preset]
    tmp = out / "parts"
    tmp.mkdir(parents=True, exist_ok=True)
    tok = parakeet_tokenizer(p["vocab"], tmp)
    # A streaming model's config is the streaming fixture's RNNT one (cache-aware encoder, its lookaheads).
    cfg = NemoArchive(STREAMING_FIXTURE if streaming else PARAKEET_FIXTURE).config
    if streaming:
        cfg["encoder"]["att_context_size"] = p["att_context_size"]
    cfg["model_defaults"].update(enc_hidden=p["d_model"], pred_hidden=p["pred"], joint_hidden=p["joint"])
    cfg["encoder"].update(n_layers=p["layers"], d_model=p["d_model"], n_heads=p["heads"],
                          subsampling_conv_channels=p["sub_channels"], feat_in=p["n_mels"], conv_kernel_size=p["conv_kernel"])
    cfg["decoder"]["prednet"].update(pred_hidden=p["pred"], pred_rnn_layers=p["pred_layers"])
    cfg["decoder"]["vocab_size"] = p["vocab"]
    cfg["joint"]["jointnet"].update(joint_hidden=p["joint"], encoder_hidden=p["d_model"], pred_hidden=p["pred"])
    cfg["joint"]["num_classes"] = p["vocab"]
    cfg["joint"]["vocabulary"] = tok["pieces"]
    cfg["labels"] = tok["pieces"]
    cfg["tokenizer"].update(model_path="nemo:" + tok["names"]["model"], spe_tokenizer_vocab="nemo:" + tok["names"]["vocab"],
                            vocab_path="nemo:" + tok["names"]["txt"])
    import yaml
    (tmp / "model_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    write_torch_checkpoint(tmp / "model_weights.ckpt", parakeet_tensors(p, np.random.default_rng(seed), streaming))
    files = {name: tmp / name for name in ["model_config.yaml", "model_weights.ckpt", *tok["names"].values()]}
    write_nemo(out / "model.nemo", files)
    shutil.rmtree(tmp)
    print(f"wrote {out / 'model.nemo'} ({(out / 'model.nemo').stat().st_size / 1e9:.2f} GB, preset {preset})")


# ----------------------------------------------------------------------------- Canary AED

# canary-1b-flash's shapes (its model card: 32 encoder layers, 4 decoder layers, width 1024) with the
# bundled canary-aed-tiny fixture's tokenizer; the embedding and output rows are padded to about the
# real vocabulary's size (4 languages x 1024 pieces + the special tokens), which sets the output layer's cost.
AED_PRESETS = {
    "full": dict(d_model=1024, layers=32, heads=8, sub_channels=256, n_mels=128, conv_kernel=9, dec_layers=4,
                 dec_heads=8, dec_inner=4096, max_len=1024, vocab_rows=5248),
    "small": dict(d_model=128, layers=2, heads=4, sub_channels=32, n_mels=128, conv_kernel=9, dec_layers=2,
                  dec_heads=4, dec_inner=256, max_len=128, vocab_rows=512),
}
AED_FIXTURE = ROOT / "tests" / "fixtures" / "canary-aed-tiny" / "model.nemo"


def canary_aed_tensors(p: dict, rng):
    """(NeMo name, float32 array): the encoder with biases, the Transformer decoder, the tied classifier."""
    H, I, V = p["d_model"], p["dec_inner"], p["vocab_rows"]
    normal = lambda shape, std: (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))
    yield from nemo_encoder_tensors(p, rng, use_bias=True)
    e, d = "transf_decoder._embedding.", "transf_decoder._decoder."
    embed = normal((V, H), 1.0)
    yield e + "token_embedding.weight", embed
    position = np.arange(p["max_len"], dtype=np.float64)[:, None]
    freq = np.exp(-np.log(10000.0) * np.arange(0, H, 2, dtype=np.float64) / H)
    table = np.zeros((p["max_len"], H))
    table[:, 0::2], table[:, 1::2] = np.sin(position * freq), np.cos(position * freq)
    yield e + "position_embedding.pos_enc", (table / np.sqrt(H)).astype(np.float32)
    yield e + "layer_norm.weight", 1.0 + normal((H,), 0.1)
    yield e + "layer_norm.bias", normal((H,), 0.02)
    for i in range(p["dec_layers"]):
        L = f"{d}layers.{i}."
        for k, sub in ((1, "first_sub_layer"), (2, "second_sub_layer")):
            yield L + f"layer_norm_{k}.weight", 1.0 + normal((H,), 0.1)
            yield L + f"layer_norm_{k}.bias", normal((H,), 0.02)
            for net in ("query_net", "key_net", "value_net", "out_projection"):
                yield L + f"{sub}.{net}.weight", normal((H, H), H ** -0.5)
                yield L + f"{sub}.{net}.bias", normal((H,), 0.02)
        yield L + "layer_norm_3.weight", 1.0 + normal((H,), 0.1)
        yield L + "layer_norm_3.bias", normal((H,), 0.02)
        yield L + "third_sub_layer.dense_in.weight", normal((I, H), H ** -0.5)
        yield L + "third_sub_layer.dense_in.bias", normal((I,), 0.02)
        yield L + "third_sub_layer.dense_out.weight", normal((H, I), I ** -0.5)
        yield L + "third_sub_layer.dense_out.bias", normal((H,), 0.02)
    yield d + "final_layer_norm.weight", 1.0 + normal((H,), 0.1)
    yield d + "final_layer_norm.bias", normal((H,), 0.02)
    yield "log_softmax.mlp.layer0.weight", embed  # tied, as EncDecMultiTaskModel ties them
    yield "log_softmax.mlp.layer0.bias", normal((V,), 0.02)


def write_canary_aed(out: Path, preset: str, seed: int) -> None:
    from nemo_archive import NemoArchive, write_nemo, write_torch_checkpoint
    import yaml
    p = AED_PRESETS[preset]
    tmp = out / "parts"
    tmp.mkdir(parents=True, exist_ok=True)
    fixture = NemoArchive(AED_FIXTURE)
    cfg = fixture.config
    files = {}
    for sub in cfg["tokenizer"]["langs"].values():
        for key in ("model_path", "vocab_path", "spe_tokenizer_vocab"):
            name = sub[key].split(":", 1)[1]
            (tmp / name).write_bytes(fixture.member(sub[key]))
            files[name] = tmp / name
    cfg["model_defaults"].update(asr_enc_hidden=p["d_model"], lm_enc_hidden=p["d_model"], lm_dec_hidden=p["d_model"])
    cfg["encoder"].update(n_layers=p["layers"], d_model=p["d_model"], n_heads=p["heads"],
                          subsampling_conv_channels=p["sub_channels"], feat_in=p["n_mels"], conv_kernel_size=p["conv_kernel"])
    cfg["transf_decoder"]["config_dict"].update(hidden_size=p["d_model"], inner_size=p["dec_inner"],
                                                num_layers=p["dec_layers"], num_attention_heads=p["dec_heads"],
                                                max_sequence_length=p["max_len"])
    cfg["head"]["hidden_size"] = p["d_model"]
    (tmp / "model_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    write_torch_checkpoint(tmp / "model_weights.ckpt", canary_aed_tensors(p, np.random.default_rng(seed)))
    files = {"model_config.yaml": tmp / "model_config.yaml", "model_weights.ckpt": tmp / "model_weights.ckpt", **files}
    write_nemo(out / "model.nemo", files)
    shutil.rmtree(tmp)
    print(f"wrote {out / 'model.nemo'} ({(out / 'model.nemo').stat().st_size / 1e9:.2f} GB, preset {preset})")


# ----------------------------------------------------------------------------- Sortformer

SORTFORMER_PRESETS = {
    "full": dict(d_model=512, layers=17, heads=8, sub_channels=256, n_mels=128, conv_kernel=9, tf_hidden=192,
                 tf_layers=18, tf_inner=768, tf_heads=8, spks=4),
    "small": dict(d_model=64, layers=2, heads=4, sub_channels=16, n_mels=128, conv_kernel=9, tf_hidden=32,
                  tf_layers=2, tf_inner=64, tf_heads=4, spks=4),
}
SORTFORMER_FIXTURE = ROOT / "tests" / "fixtures" / "sortformer-tiny" / "model.nemo"


def sortformer_tensors(p: dict, rng):
    """(NeMo name, float32 array): the encoder with biases, the projection, the post-LN Transformer encoder
    and the speaker head (hidden_to_spks too: every checkpoint has it, inference does not use it)."""
    D, H, I, S = p["d_model"], p["tf_hidden"], p["tf_inner"], p["spks"]
    normal = lambda shape, std: (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))
    yield from nemo_encoder_tensors(p, rng, use_bias=True)
    m = "sortformer_modules."
    yield m + "hidden_to_spks.weight", normal((S, 2 * H), (2 * H) ** -0.5)
    yield m + "hidden_to_spks.bias", normal((S,), 0.02)
    yield m + "first_hidden_to_hidden.weight", normal((H, H), H ** -0.5)
    yield m + "first_hidden_to_hidden.bias", normal((H,), 0.02)
    yield m + "single_hidden_to_spks.weight", normal((S, H), H ** -0.5)
    yield m + "single_hidden_to_spks.bias", normal((S,), 0.02)
    yield m + "encoder_proj.weight", normal((H, D), D ** -0.5)
    yield m + "encoder_proj.bias", normal((H,), 0.02)
    for i in range(p["tf_layers"]):
        L = f"transformer_encoder.layers.{i}."
        for k in (1, 2):
            yield L + f"layer_norm_{k}.weight", 1.0 + normal((H,), 0.1)
            yield L + f"layer_norm_{k}.bias", normal((H,), 0.02)
        for net in ("query_net", "key_net", "value_net", "out_projection"):
            yield L + f"first_sub_layer.{net}.weight", normal((H, H), H ** -0.5)
            yield L + f"first_sub_layer.{net}.bias", normal((H,), 0.02)
        yield L + "second_sub_layer.dense_in.weight", normal((I, H), H ** -0.5)
        yield L + "second_sub_layer.dense_in.bias", normal((I,), 0.02)
        yield L + "second_sub_layer.dense_out.weight", normal((H, I), I ** -0.5)
        yield L + "second_sub_layer.dense_out.bias", normal((H,), 0.02)


def write_sortformer(out: Path, preset: str, seed: int) -> None:
    from nemo_archive import NemoArchive, write_nemo, write_torch_checkpoint
    import yaml
    p = SORTFORMER_PRESETS[preset]
    tmp = out / "parts"
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = NemoArchive(SORTFORMER_FIXTURE).config
    cfg["model_defaults"].update(fc_d_model=p["d_model"], tf_d_model=p["tf_hidden"])
    cfg["preprocessor"].update(features=p["n_mels"], normalize="NA")
    cfg["encoder"].update(n_layers=p["layers"], d_model=p["d_model"], n_heads=p["heads"], feat_in=p["n_mels"],
                          subsampling_conv_channels=p["sub_channels"], conv_kernel_size=p["conv_kernel"])
    cfg["sortformer_modules"].update(fc_d_model=p["d_model"], tf_d_model=p["tf_hidden"], num_spks=p["spks"])
    cfg["transformer_encoder"].update(num_layers=p["tf_layers"], hidden_size=p["tf_hidden"], inner_size=p["tf_inner"],
                                      num_attention_heads=p["tf_heads"])
    cfg["streaming_mode"] = True
    (tmp / "model_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    write_torch_checkpoint(tmp / "model_weights.ckpt", sortformer_tensors(p, np.random.default_rng(seed)))
    write_nemo(out / "model.nemo", {"model_config.yaml": tmp / "model_config.yaml", "model_weights.ckpt": tmp / "model_weights.ckpt"})
    shutil.rmtree(tmp)
    print(f"wrote {out / 'model.nemo'} ({(out / 'model.nemo').stat().st_size / 1e9:.2f} GB, preset {preset})")


# ----------------------------------------------------------------------------- Whisper

# OpenAI's ModelDimensions of the released checkpoints (width, heads, encoder layers, decoder layers).
WHISPER_PRESETS = {
    "toy": (64, 2, 2, 2), "tiny": (384, 6, 4, 4), "base": (512, 8, 6, 6), "small": (768, 12, 12, 12),
    "medium": (1024, 16, 24, 24), "large-v3": (1280, 20, 32, 32), "large-v3-turbo": (1280, 20, 32, 4),
}
WHISPER_FIXTURE = ROOT / "tests" / "fixtures" / "whisper-tiny"


def whisper_dims(preset: str) -> dict:
    width, heads, enc_layers, dec_layers = WHISPER_PRESETS[preset]
    v3 = preset.startswith("large-v3")
    return {"n_mels": 128 if v3 else 80, "n_audio_ctx": 1500, "n_audio_state": width, "n_audio_head": heads,
            "n_audio_layer": enc_layers, "n_vocab": 51866 if v3 else 51865, "n_text_ctx": 448,
            "n_text_state": width, "n_text_head": heads, "n_text_layer": dec_layers}


def whisper_tensors(d: dict, rng):
    """(whisper's state-dict name, float16 array), in the order whisper's modules register them."""
    W = d["n_audio_state"]
    normal = lambda shape, std: (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float16)
    ones = lambda n: np.ones(n, np.float16)

    def block(prefix: str, cross: bool):
        for attn in ("attn", "cross_attn") if cross else ("attn",):
            for proj in ("query", "key", "value", "out"):
                yield f"{prefix}{attn}.{proj}.weight", normal((W, W), W ** -0.5)
                if proj != "key":  # whisper's key projection has no bias
                    yield f"{prefix}{attn}.{proj}.bias", normal((W,), 0.02)
            yield f"{prefix}{attn}_ln.weight", ones(W)
            yield f"{prefix}{attn}_ln.bias", normal((W,), 0.02)
        yield f"{prefix}mlp.0.weight", normal((4 * W, W), W ** -0.5)
        yield f"{prefix}mlp.0.bias", normal((4 * W,), 0.02)
        yield f"{prefix}mlp.2.weight", normal((W, 4 * W), (4 * W) ** -0.5)
        yield f"{prefix}mlp.2.bias", normal((W,), 0.02)
        yield f"{prefix}mlp_ln.weight", ones(W)
        yield f"{prefix}mlp_ln.bias", normal((W,), 0.02)

    # whisper.model.sinusoids, stored (rounded to float16) as the checkpoints store it
    half = W // 2
    inv_timescales = np.exp(-np.log(10000) / (half - 1) * np.arange(half))
    scaled_time = np.arange(d["n_audio_ctx"])[:, None] * inv_timescales[None, :]
    yield "encoder.positional_embedding", np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], 1).astype(np.float16)
    yield "encoder.conv1.weight", normal((W, d["n_mels"], 3), (3 * d["n_mels"]) ** -0.5)
    yield "encoder.conv1.bias", normal((W,), 0.02)
    yield "encoder.conv2.weight", normal((W, W, 3), (3 * W) ** -0.5)
    yield "encoder.conv2.bias", normal((W,), 0.02)
    for i in range(d["n_audio_layer"]):
        yield from block(f"encoder.blocks.{i}.", cross=False)
    yield "encoder.ln_post.weight", ones(W)
    yield "encoder.ln_post.bias", normal((W,), 0.02)
    yield "decoder.positional_embedding", normal((d["n_text_ctx"], W), 0.02)
    yield "decoder.token_embedding.weight", normal((d["n_vocab"], W), 0.02)
    for i in range(d["n_text_layer"]):
        yield from block(f"decoder.blocks.{i}.", cross=True)
    yield "decoder.ln.weight", ones(W)
    yield "decoder.ln.bias", normal((W,), 0.02)


def write_whisper(out: Path, preset: str, seed: int) -> None:
    from nemo_archive import write_torch_checkpoint
    out.mkdir(parents=True, exist_ok=True)
    d = whisper_dims(preset)
    write_torch_checkpoint(out / "model.pt", whisper_tensors(d, np.random.default_rng(seed)), record="model", dims=d)
    for name in ("multilingual.tiktoken", "mel_filters.npz"):
        shutil.copyfile(WHISPER_FIXTURE / name, out / name)
    print(f"wrote {out / 'model.pt'} ({(out / 'model.pt').stat().st_size / 1e9:.2f} GB, preset {preset})")


# ----------------------------------------------------------------------------- Qwen3-ASR

QWEN3_ASR_PRESETS = {
    "0.6b": dict(enc_layers=18, d_model=896, enc_heads=14, enc_ffn=3584, channels=480, hidden=1024, layers=28, heads=16,
                 kv_heads=8, head_dim=128, ff=3072),
    "1.7b": dict(enc_layers=24, d_model=1024, enc_heads=16, enc_ffn=4096, channels=480, hidden=2048, layers=28, heads=16,
                 kv_heads=8, head_dim=128, ff=6144),
    "small": dict(enc_layers=2, d_model=64, enc_heads=2, enc_ffn=128, channels=16, hidden=64, layers=2, heads=4,
                  kv_heads=2, head_dim=16, ff=192),
}
# Qwen/Qwen3-ForcedAligner-0.6B: the 1.7B's audio encoder, the 0.6B's decoder, a head of 5000 timestamp classes.
QWEN3_ALIGNER_PRESETS = {
    "0.6b": dict(QWEN3_ASR_PRESETS["1.7b"], hidden=1024, ff=3072, vocab=152064, classes=5000),
    "small": dict(QWEN3_ASR_PRESETS["small"], vocab=151936, classes=256),
}
QWEN3_ASR_ADDED = {151669: ("<|audio_start|>", True), 151670: ("<|audio_end|>", True), 151676: ("<|audio_pad|>", True),
                   151704: ("<asr_text>", False)}
QWEN3_ASR_LANGUAGES = ["Chinese", "English", "Cantonese", "Arabic", "German", "French", "Spanish", "Portuguese",
                       "Indonesian", "Italian", "Korean", "Russian", "Thai", "Vietnamese", "Japanese", "Turkish", "Hindi",
                       "Malay", "Dutch", "Swedish", "Danish", "Finnish", "Polish", "Czech", "Filipino", "Persian", "Greek",
                       "Romanian", "Hungarian", "Macedonian"]


def qwen3_asr_specs(p: dict, vocab: int = 151936, classes: int = 0):
    d, h, hd = p["d_model"], p["hidden"], p["head_dim"]
    lin = lambda name, o, i, bias=True: [(name + ".weight", (o, i), ("normal", i ** -0.5))] + (
        [(name + ".bias", (o,), ("normal", 0.02))] if bias else [])
    norm = lambda name, n: [(name + ".weight", (n,), ("one",)), (name + ".bias", (n,), ("normal", 0.02))]
    a, specs = "thinker.audio_tower.", []
    for i, cin in ((1, 1), (2, p["channels"]), (3, p["channels"])):
        specs += [(a + f"conv2d{i}.weight", (p["channels"], cin, 3, 3), ("normal", (9 * cin) ** -0.5)),
                  (a + f"conv2d{i}.bias", (p["channels"],), ("normal", 0.02))]
    specs += lin(a + "conv_out", d, p["channels"] * 16, bias=False)
    for j in range(p["enc_layers"]):
        L = f"{a}layers.{j}."
        for x in ("q", "k", "v", "out"):
            specs += lin(L + f"self_attn.{x}_proj", d, d)
        specs += norm(L + "self_attn_layer_norm", d) + lin(L + "fc1", p["enc_ffn"], d) + lin(L + "fc2", d, p["enc_ffn"])
        specs += norm(L + "final_layer_norm", d)
    specs += norm(a + "ln_post", d) + lin(a + "proj1", d, d) + lin(a + "proj2", h, d)
    m = "thinker.model."
    specs.append((m + "embed_tokens.weight", (vocab, h), ("normal", 0.5)))
    for j in range(p["layers"]):
        L = f"{m}layers.{j}."
        specs += [(L + "input_layernorm.weight", (h,), ("one",)), (L + "post_attention_layernorm.weight", (h,), ("one",))]
        specs += lin(L + "self_attn.q_proj", p["heads"] * hd, h, bias=False) + lin(L + "self_attn.k_proj", p["kv_heads"] * hd, h, bias=False)
        specs += lin(L + "self_attn.v_proj", p["kv_heads"] * hd, h, bias=False) + lin(L + "self_attn.o_proj", h, p["heads"] * hd, bias=False)
        specs += [(L + "self_attn.q_norm.weight", (hd,), ("one",)), (L + "self_attn.k_norm.weight", (hd,), ("one",))]
        specs += lin(L + "mlp.gate_proj", p["ff"], h, bias=False) + lin(L + "mlp.up_proj", p["ff"], h, bias=False)
        specs += lin(L + "mlp.down_proj", h, p["ff"], bias=False)
    specs.append((m + "norm.weight", (h,), ("one",)))
    if classes:  # the forced aligner's own head
        specs.append(("thinker.lm_head.weight", (classes, h), ("normal", h ** -0.5)))
    return specs


def write_qwen3_asr(out: Path, preset: str, seed: int, tokenizer_from: Path, aligner: bool = False) -> None:
    p = (QWEN3_ALIGNER_PRESETS if aligner else QWEN3_ASR_PRESETS)[preset]
    vocab, classes = p.get("vocab", 151936), p.get("classes", 0)
    out.mkdir(parents=True, exist_ok=True)
    audio = dict(num_mel_bins=128, encoder_layers=p["enc_layers"], encoder_attention_heads=p["enc_heads"],
                 encoder_ffn_dim=p["enc_ffn"], d_model=p["d_model"], dropout=0, attention_dropout=0,
                 activation_function="gelu", activation_dropout=0, scale_embedding=False, max_source_positions=1500,
                 n_window=50, output_dim=p["hidden"], n_window_infer=800, conv_chunksize=500,
                 downsample_hidden_size=p["channels"])
    text = dict(vocab_size=vocab, hidden_size=p["hidden"], intermediate_size=p["ff"], num_hidden_layers=p["layers"],
                num_attention_heads=p["heads"], num_key_value_heads=p["kv_heads"], head_dim=p["head_dim"],
                hidden_act="silu", max_position_embeddings=65536, rms_norm_eps=1e-6, tie_word_embeddings=not aligner,
                rope_theta=1000000, attention_bias=False,
                rope_scaling={"rope_type": "default", "mrope_section": [24, 20, 20], "interleaved": True})
    cfg = {"architectures": ["Qwen3ASRForConditionalGeneration"], "model_type": "qwen3_asr",
           "support_languages": QWEN3_ASR_LANGUAGES,
           "thinker_config": {"audio_config": audio, "text_config": text, "model_type": "qwen3_asr_thinker",
                              "audio_token_id": 151676, "audio_start_token_id": 151669, "audio_end_token_id": 151670,
                              "user_token_id": 872}}
    added = dict(QWEN3_ASR_ADDED)
    if aligner:
        cfg.pop("support_languages")
        cfg.update(timestamp_token_id=151705, timestamp_segment_time=80)
        cfg["thinker_config"].update(model_type="qwen3_forced_aligner", classify_num=classes)
        added[151705] = ("<timestamp>", False)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128, "hop_length": 160, "n_fft": 400,
        "sampling_rate": 16000, "chunk_length": 30, "padding_value": 0.0, "return_attention_mask": True}, indent=2))
    shutil.copyfile(tokenizer_from / "vocab.json", out / "vocab.json")
    shutil.copyfile(tokenizer_from / "merges.txt", out / "merges.txt")
    tok = json.loads((tokenizer_from / "tokenizer_config.json").read_text())
    for i, (content, special) in added.items():
        tok["added_tokens_decoder"][str(i)] = {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                                               "single_word": False, "special": special}
    (out / "tokenizer_config.json").write_text(json.dumps(tok, indent=2, ensure_ascii=False))
    write_specs(out / "model.safetensors", qwen3_asr_specs(p, vocab, classes), seed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=["canary-qwen", "parakeet-tdt", "parakeet-streaming", "canary-aed", "sortformer",
                                         "whisper", "qwen3-asr", "qwen3-aligner"],
                    default="canary-qwen")
    ap.add_argument("--preset", choices=sorted(set(PRESETS) | set(PARAKEET_PRESETS) | set(WHISPER_PRESETS) | set(QWEN3_ASR_PRESETS)),
                    default="full", help="full-v3 / small-v3: --family parakeet-tdt only; tiny ... large-v3-turbo, toy: --family whisper only")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tokenizer-from", default=str(ROOT / "tests" / "fixtures" / "canary-qwen-tiny" / "llm"))
    a = ap.parse_args()
    if a.family == "whisper":
        if a.preset not in WHISPER_PRESETS:
            ap.error(f"--family whisper takes --preset {' / '.join(WHISPER_PRESETS)}")
        write_whisper(Path(a.out), a.preset, a.seed)
        return 0
    if a.family == "qwen3-asr":
        if a.preset not in QWEN3_ASR_PRESETS:
            ap.error(f"--family qwen3-asr takes --preset {' / '.join(QWEN3_ASR_PRESETS)}")
        write_qwen3_asr(Path(a.out), a.preset, a.seed, Path(a.tokenizer_from))
        return 0
    if a.family == "qwen3-aligner":
        if a.preset not in QWEN3_ALIGNER_PRESETS:
            ap.error(f"--family qwen3-aligner takes --preset {' / '.join(QWEN3_ALIGNER_PRESETS)}")
        write_qwen3_asr(Path(a.out), a.preset, a.seed, Path(a.tokenizer_from), aligner=True)
        return 0
    if a.family == "parakeet-streaming":
        if a.preset not in STREAMING_PRESETS:
            ap.error(f"--family parakeet-streaming takes --preset {' / '.join(STREAMING_PRESETS)}")
        write_parakeet(Path(a.out), a.preset, a.seed, streaming=True)
        return 0
    if a.preset not in PRESETS and a.family != "parakeet-tdt":
        ap.error(f"--preset {a.preset} is for --family parakeet-tdt")
    if a.family == "parakeet-tdt":
        write_parakeet(Path(a.out), a.preset, a.seed)
        return 0
    if a.family == "canary-aed":
        write_canary_aed(Path(a.out), a.preset, a.seed)
        return 0
    if a.family == "sortformer":
        write_sortformer(Path(a.out), a.preset, a.seed)
        return 0
    p = PRESETS[a.preset]
    out = Path(a.out)
    (out / "checkpoint").mkdir(parents=True, exist_ok=True)
    (out / "llm").mkdir(parents=True, exist_ok=True)
    (out / "checkpoint" / "config.json").write_text(json.dumps(salm_config(p), indent=2))
    (out / "llm" / "config.json").write_text(json.dumps(qwen3_config(p), indent=2))
    src = Path(a.tokenizer_from)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        if not (src / name).is_file():
            print(f"error: tokenizer file not found: {src / name}", file=sys.stderr)
            return 1
        shutil.copyfile(src / name, out / "llm" / name)
    write_checkpoint(out / "checkpoint" / "model.safetensors", p, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
