#!/usr/bin/env python3
"""Convert an NVIDIA Sortformer `.nemo` archive (NeMo's SortformerEncLabelModel: diar_sortformer_4spk-v1
and its kind) into one transcribe GGUF (architecture sortformer).

Reads the tar, the YAML config and the torch.save'd state dict (restricted unpickler, no torch); no NeMo.
Storage: the FastConformer as for every NeMo encoder (convert_common.plan_frontend); the projection into
the Transformer encoder, its layers and the speaker head's matrices in --outtype, their biases and
LayerNorms in F32. `sortformer_modules.hidden_to_spks` is in every checkpoint but unused at inference:
not converted.
"""

from __future__ import annotations

import sys
from pathlib import Path

from convert_common import (FILE_TYPE, ConvertError, Plan, add_frontend_keys, gguf, nemo_converter_main, open_nemo,
                            plan_frontend)

ARCH = "sortformer"
MAX_AUDIO_MS = 90000  # the offline model's training sessions (model_defaults.session_len_sec); longer: an error
LAYER_NORM_EPS = 1e-5  # NeMo's TransformerEncoder LayerNorms (torch's default)
# The streaming path's sizes, in 80 ms frames: NeMo sets them on the model before diarize()
# (examples/speaker_tasks/diarization/neural_diarizer/e2e_diarize_speech.py DiarizationConfig defaults,
# the 1.04 s-latency setting of the diar_streaming_sortformer_4spk-v2 model card), not in the config.
STREAMING_SIZES = {"spkcache_len": 188, "fifo_len": 188, "spkcache_update_period": 144, "chunk_len": 6,
                   "chunk_left_context": 1, "chunk_right_context": 7}
# The speaker cache's constants: the config's sortformer_modules, else SortformerModules' defaults.
CACHE_INTS = {"spkcache_sil_frames_per_spk": 3}
CACHE_FLOATS = {"pred_score_threshold": 0.25, "scores_boost_latest": 0.05, "sil_threshold": 0.2,
                "strong_boost_rate": 0.75, "weak_boost_rate": 1.5, "min_pos_scores_rate": 0.5}


def sortformer_hparams(cfg: dict, where: str) -> dict:
    try:
        tf = cfg["transformer_encoder"]
        mods = cfg["sortformer_modules"]
        if tf.get("pre_ln", False):
            raise ConvertError(f"{where}: a pre-LN Transformer encoder is not supported (Sortformer's is post-LN)")
        if tf.get("hidden_act", "relu") != "relu":
            raise ConvertError(f"{where}: Transformer activation {tf.get('hidden_act')!r} is not supported (relu)")
        hp = {
            "spks": int(mods.get("num_spks", cfg.get("max_num_of_spks", 4))),
            "fc_d_model": int(mods["fc_d_model"]),
            "tf_d_model": int(mods["tf_d_model"]),
            "layers": int(tf["num_layers"]),
            "hidden": int(tf["hidden_size"]),
            "inner": int(tf["inner_size"]),
            "heads": int(tf["num_attention_heads"]),
            "streaming_trained": bool(cfg.get("streaming_mode", False)),
            "cache_ints": {k: int(mods.get(k, v)) for k, v in CACHE_INTS.items()},
            "cache_floats": {k: float(mods.get(k, v)) for k, v in CACHE_FLOATS.items()},
        }
        if hp["hidden"] != hp["tf_d_model"] or hp["hidden"] % hp["heads"] or hp["spks"] < 1 or hp["layers"] < 1:
            raise ConvertError(f"{where}: inconsistent Sortformer dimensions {hp}")
        return hp
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: not a Sortformer config (missing or invalid {exc})") from None


def build_plan(src, enc: dict, hp: dict, outtype: str) -> Plan:
    p = Plan(src, outtype)
    plan_frontend(p, enc, "preprocessor.", "encoder.")
    D, H, I, S = enc["d_model"], hp["hidden"], hp["inner"], hp["spks"]
    m = "sortformer_modules."
    if src.has(m + "encoder_proj.weight"):
        p.matrix("sf.enc_proj.weight", m + "encoder_proj.weight", (H, D))
        p.f32("sf.enc_proj.bias", m + "encoder_proj.bias", (H,))
    elif D != H:
        raise ConvertError(f"encoder width {D} and Transformer width {H} differ but there is no encoder_proj")
    for i in range(hp["layers"]):
        s, o = f"transformer_encoder.layers.{i}.", f"sf.blk.{i}."
        for norm, ln in (("attn_norm", "layer_norm_1"), ("ffn_norm", "layer_norm_2")):
            p.f32(o + norm + ".weight", s + ln + ".weight", (H,))
            p.f32(o + norm + ".bias", s + ln + ".bias", (H,))
        for proj, net in (("q", "query_net"), ("k", "key_net"), ("v", "value_net"), ("o", "out_projection")):
            p.matrix(f"{o}attn_{proj}.weight", f"{s}first_sub_layer.{net}.weight", (H, H))
            p.f32(f"{o}attn_{proj}.bias", f"{s}first_sub_layer.{net}.bias", (H,))
        p.matrix(o + "ffn_up.weight", s + "second_sub_layer.dense_in.weight", (I, H))
        p.f32(o + "ffn_up.bias", s + "second_sub_layer.dense_in.bias", (I,))
        p.matrix(o + "ffn_down.weight", s + "second_sub_layer.dense_out.weight", (H, I))
        p.f32(o + "ffn_down.bias", s + "second_sub_layer.dense_out.bias", (H,))
    p.matrix("sf.head.hidden.weight", m + "first_hidden_to_hidden.weight", (H, H))
    p.f32("sf.head.hidden.bias", m + "first_hidden_to_hidden.bias", (H,))
    p.matrix("sf.head.spks.weight", m + "single_hidden_to_spks.weight", (S, H))
    p.f32("sf.head.spks.bias", m + "single_hidden_to_spks.bias", (S,))
    return p


def convert(args) -> None:
    nemo, cfg, where, enc = open_nemo(args.nemo, ("transformer_encoder",), "a Sortformer")
    hp = sortformer_hparams(cfg, where)
    if hp["fc_d_model"] != enc["d_model"]:
        raise ConvertError(f"{where}: sortformer_modules.fc_d_model {hp['fc_d_model']} is not the encoder's {enc['d_model']}")
    plan = build_plan(nemo.checkpoint(), enc, hp, args.outtype)

    out = Path(args.outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), ARCH)
    w.add_name(args.name or Path(args.nemo).stem)
    w.add_file_type(FILE_TYPE[args.outtype])
    add_frontend_keys(w, enc)
    a = ARCH + "."
    w.add_uint32(a + "n_speakers", hp["spks"])
    w.add_uint32(a + "tf_layers", hp["layers"])
    w.add_uint32(a + "tf_hidden", hp["hidden"])
    w.add_uint32(a + "tf_heads", hp["heads"])
    w.add_uint32(a + "tf_inner", hp["inner"])
    w.add_float32(a + "norm_eps", LAYER_NORM_EPS)
    w.add_uint32(a + "max_audio_ms", MAX_AUDIO_MS)
    w.add_bool(a + "streaming.trained", hp["streaming_trained"])
    for key, value in {**STREAMING_SIZES, **hp["cache_ints"]}.items():
        w.add_uint32(a + "streaming." + key, value)
    for key, value in hp["cache_floats"].items():
        w.add_float32(a + "streaming." + key, value)
    plan.write(w)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(plan.items)} tensors, {hp['spks']} speakers, "
          f"Transformer {hp['layers']} x {hp['hidden']}, outtype {args.outtype})")


def main() -> int:
    return nemo_converter_main(convert, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
