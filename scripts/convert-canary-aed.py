#!/usr/bin/env python3
"""Convert an NVIDIA Canary AED `.nemo` archive (NeMo's EncDecMultiTaskModel: canary-1b-flash,
canary-180m-flash and their kind) into one transcribe GGUF (architecture canary_aed).

Reads the tar, the YAML config, the torch.save'd state dict (restricted unpickler, no torch) and the
SentencePiece models of the aggregate CanaryTokenizer (python3-sentencepiece); no NeMo. Storage: the
FastConformer as for every NeMo encoder (convert_common.plan_frontend); the Transformer decoder's
matrices in --outtype, its biases, LayerNorms and position table in F32. The output layer is the token
embedding (NeMo ties them); a checkpoint whose classifier is not tied keeps its own matrix.

The vocabulary is the aggregate tokenizer's: every sub-tokenizer's pieces at its offset (spl_tokens
first, then each language in the config's order), decoded as NeMo's AggregateTokenizer.ids_to_text does
(pieces joined, U+2581 as a space, special tokens literal).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from convert_common import (FILE_TYPE, ConvertError, Plan, add_frontend_keys, gguf, open_nemo,
                            plan_frontend, nemo_converter_main)
from nemo_archive import NemoArchive

ARCH = "canary_aed"
MAX_AUDIO_MS = 40000  # Canary was trained on recordings of up to 40 s; longer ones are cut at pauses
LAYER_NORM_EPS = 1e-5  # NeMo's TransformerDecoder LayerNorms (torch's default)
# The canary2 prompt's slot tokens (Canary2PromptFormatter), stored by name.
PROMPT_TOKENS = {
    "startofcontext": "<|startofcontext|>", "emo_undefined": "<|emo:undefined|>", "pnc": "<|pnc|>",
    "nopnc": "<|nopnc|>", "itn": "<|itn|>", "noitn": "<|noitn|>", "timestamp": "<|timestamp|>",
    "notimestamp": "<|notimestamp|>", "diarize": "<|diarize|>", "nodiarize": "<|nodiarize|>",
}
LANGUAGE_TOKEN = re.compile(r"^<\|([a-z]{2,3}(?:-[A-Za-z]+)?)\|>$")


def decoder_hparams(cfg: dict, where: str) -> dict:
    try:
        if cfg.get("prompt_format") != "canary2":
            raise ConvertError(f"{where}: prompt_format {cfg.get('prompt_format')!r} is not supported (canary2)")
        dec = cfg["transf_decoder"]
        cd = dec["config_dict"]
        if int(cd.get("num_token_types", 0)) != 0:
            raise ConvertError(f"{where}: token type embeddings are not supported")
        if cd.get("learn_positional_encodings", False):
            raise ConvertError(f"{where}: learned position embeddings are not supported (NeMo's fixed table only)")
        if cd.get("hidden_act", "relu") != "relu" or not cd.get("pre_ln", True):
            raise ConvertError(f"{where}: decoder {cd.get('hidden_act')!r}, pre_ln {cd.get('pre_ln')}: not supported (relu, pre-LN)")
        if not dec.get("pre_ln_final_layer_norm", True):
            raise ConvertError(f"{where}: a decoder without its final LayerNorm is not supported")
        if int((cfg.get("transf_encoder") or {}).get("num_layers", 0)) != 0:
            raise ConvertError(f"{where}: a Transformer encoder after the FastConformer is not supported")
        head = cfg.get("head") or {}
        if int(head.get("num_layers", 1)) != 1:
            raise ConvertError(f"{where}: a classifier of {head.get('num_layers')} layers is not supported (1)")
        hp = {
            "hidden": int(cd["hidden_size"]),
            "inner": int(cd["inner_size"]),
            "layers": int(cd["num_layers"]),
            "heads": int(cd["num_attention_heads"]),
            "max_sequence_length": int(cd["max_sequence_length"]),
        }
        if hp["hidden"] % hp["heads"]:
            raise ConvertError(f"{where}: decoder hidden size {hp['hidden']} is not a multiple of {hp['heads']} heads")
        decoding = cfg.get("decoding") or {}
        greedy, beam = decoding.get("greedy") or {}, decoding.get("beam") or {}
        # As MultiTaskDecoding reads them: max_generation_delta (-1: up to the decoder's max length), and
        # the beam's length penalty under the key `length_penalty` (its `len_pen` is never read).
        hp["greedy_max_generation_delta"] = int(greedy.get("max_generation_delta", -1))
        hp["beam_max_generation_delta"] = int(beam.get("max_generation_delta", -1))
        hp["beam_length_penalty"] = float(beam.get("length_penalty", 0.0))
        return hp
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: not a Canary AED config (missing or invalid {exc})") from None


def load_aggregate_tokenizer(nemo: NemoArchive, where: str):
    """The aggregate vocabulary: each sub-tokenizer's pieces at its offset, in the config's order."""
    try:
        import sentencepiece as spm
    except ImportError as exc:
        raise ConvertError(f"python3-sentencepiece is needed to read the tokenizer ({exc})")
    tok = nemo.config.get("tokenizer") or {}
    langs = tok.get("langs") or {}
    if tok.get("type") != "agg" or "spl_tokens" not in langs:
        raise ConvertError(f"{where}: tokenizer type {tok.get('type')!r} is not supported "
                           "(the aggregate CanaryTokenizer with spl_tokens)")
    pieces, types, sub_names, offsets = [], [], [], []
    for name, sub in langs.items():
        if (sub or {}).get("type", "bpe") != "bpe" or not sub.get("model_path"):
            raise ConvertError(f"{where}: sub-tokenizer {name}: type {sub.get('type')!r} / model_path not supported")
        sp = spm.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(nemo.member(sub["model_path"]))
        except RuntimeError as exc:
            raise ConvertError(f"{where}: sub-tokenizer {name}: unreadable SentencePiece model ({exc})")
        sub_names.append(name)
        offsets.append(len(pieces))
        for i in range(sp.get_piece_size()):
            pieces.append(sp.id_to_piece(i))
            special = name == "spl_tokens" or sp.is_control(i) or sp.is_unknown(i)
            types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.NORMAL)
    return pieces, types, sub_names, offsets


def load_canary_bpe_tokenizer(nemo: NemoArchive, where: str):
    """canary-1b-v2's CanaryBPETokenizer: one SentencePiece model, the special tokens user-defined symbols.
    Pieces, scores, types (SentencePiece's piece types are gguf's TokenType numbers) and the normalizer's
    two flags that change encoding (NeMo's create_spt_model keeps extra whitespace by default)."""
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as exc:
        raise ConvertError(f"python3-sentencepiece is needed to read the tokenizer ({exc})")
    tok = nemo.config.get("tokenizer") or {}
    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(nemo.member(tok["model_path"]))
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ConvertError(f"{where}: unreadable SentencePiece model ({exc})")
    if proto.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.BPE:
        raise ConvertError(f"{where}: the SentencePiece model is not BPE")
    pieces = [p.piece for p in proto.pieces]
    scores = [float(p.score) for p in proto.pieces]
    types = [int(p.type) for p in proto.pieces]
    unk = next((i for i, t in enumerate(types) if t == 2), 0)
    return pieces, scores, types, unk, bool(proto.normalizer_spec.add_dummy_prefix), \
        bool(proto.normalizer_spec.remove_extra_whitespaces)


def special_ids(pieces: list, sub_names: list, offsets: list, where: str) -> dict:
    """Ids of the special tokens in spl_tokens (CanaryTokenizer looks them up there; a single
    CanaryBPETokenizer has them among its pieces)."""
    spl_end = offsets[1] if len(offsets) > 1 else len(pieces)
    spl = {pieces[i]: i for i in range(spl_end)}

    def need(piece: str) -> int:
        if piece not in spl:
            raise ConvertError(f"{where}: special token {piece} is not in spl_tokens")
        return spl[piece]

    ids = {"bos": need("<|startoftranscript|>"), "eos": need("<|endoftext|>"), "pad": need("<pad>")}
    for key, piece in PROMPT_TOKENS.items():
        ids[key] = need(piece)
    languages = [(m.group(1), i) for piece, i in spl.items()
                 if (m := LANGUAGE_TOKEN.match(piece)) and piece not in PROMPT_TOKENS.values()]
    languages = [(code, i) for code, i in languages if code in sub_names or not sub_names[1:]] or languages
    if not languages:
        raise ConvertError(f"{where}: no language tokens (<|xx|>) in spl_tokens")
    ids["languages"] = sorted(languages, key=lambda x: x[1])
    return ids


def build_plan(src, enc: dict, hp: dict, n_rows: int, outtype: str) -> Plan:
    p = Plan(src, outtype)
    plan_frontend(p, enc, "preprocessor.", "encoder.")
    H, I, D = hp["hidden"], hp["inner"], enc["d_model"]
    if src.has("encoder_decoder_proj.weight"):
        p.matrix("enc_dec_proj.weight", "encoder_decoder_proj.weight", (H, D))
        p.f32("enc_dec_proj.bias", "encoder_decoder_proj.bias", (H,))
    elif D != H:
        raise ConvertError(f"encoder width {D} and decoder width {H} differ but there is no encoder_decoder_proj")
    e, d = "transf_decoder._embedding.", "transf_decoder._decoder."
    p.matrix("dec.token_embd.weight", e + "token_embedding.weight", (n_rows, H))
    p.f32("dec.pos_enc", e + "position_embedding.pos_enc", (hp["max_sequence_length"], H))
    p.f32("dec.embd_norm.weight", e + "layer_norm.weight", (H,))
    p.f32("dec.embd_norm.bias", e + "layer_norm.bias", (H,))
    for i in range(hp["layers"]):
        s, o = f"{d}layers.{i}.", f"dec.blk.{i}."
        for norm, ln in (("attn_norm", "layer_norm_1"), ("xattn_norm", "layer_norm_2"), ("ffn_norm", "layer_norm_3")):
            p.f32(o + norm + ".weight", s + ln + ".weight", (H,))
            p.f32(o + norm + ".bias", s + ln + ".bias", (H,))
        for att, sub in (("attn", "first_sub_layer"), ("xattn", "second_sub_layer")):
            for proj, net in (("q", "query_net"), ("k", "key_net"), ("v", "value_net"), ("o", "out_projection")):
                p.matrix(f"{o}{att}_{proj}.weight", f"{s}{sub}.{net}.weight", (H, H))
                p.f32(f"{o}{att}_{proj}.bias", f"{s}{sub}.{net}.bias", (H,))
        p.matrix(o + "ffn_up.weight", s + "third_sub_layer.dense_in.weight", (I, H))
        p.f32(o + "ffn_up.bias", s + "third_sub_layer.dense_in.bias", (I,))
        p.matrix(o + "ffn_down.weight", s + "third_sub_layer.dense_out.weight", (H, I))
        p.f32(o + "ffn_down.bias", s + "third_sub_layer.dense_out.bias", (H,))
    p.f32("dec.output_norm.weight", d + "final_layer_norm.weight", (H,))
    p.f32("dec.output_norm.bias", d + "final_layer_norm.bias", (H,))
    p.f32("dec.output.bias", "log_softmax.mlp.layer0.bias", (n_rows,))
    tied = src.has("log_softmax.mlp.layer0.weight") and np.array_equal(
        p.read_f32(p.need("log_softmax.mlp.layer0.weight", (n_rows, H))), p.read_f32(e + "token_embedding.weight"))
    if not tied:
        p.matrix("dec.output.weight", "log_softmax.mlp.layer0.weight", (n_rows, H))
    return p


def convert(args) -> None:
    nemo, cfg, where, enc = open_nemo(args.nemo, ("transf_decoder",), "a Canary AED")
    hp = decoder_hparams(cfg, where)
    tok = cfg.get("tokenizer") or {}
    single = tok.get("type") == "bpe" and str((tok.get("custom_tokenizer") or {}).get("_target_", "")).endswith("CanaryBPETokenizer")
    if single:
        pieces, scores, types, unk, space_prefix, remove_whitespace = load_canary_bpe_tokenizer(nemo, where)
        sub_names, offsets = [], [0]
    else:
        pieces, types, sub_names, offsets = load_aggregate_tokenizer(nemo, where)
    ids = special_ids(pieces, sub_names, offsets, where)
    src = nemo.checkpoint()
    emb = "transf_decoder._embedding.token_embedding.weight"
    if not src.has(emb):
        raise ConvertError(f"missing tensor in checkpoint: {emb}")
    n_rows = src.shape(emb)[0]
    if n_rows < len(pieces):
        raise ConvertError(f"{where}: {n_rows} embedding rows for a vocabulary of {len(pieces)}")
    plan = build_plan(src, enc, hp, n_rows, args.outtype)

    out = Path(args.outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), ARCH)
    w.add_name(args.name or Path(args.nemo).stem)
    w.add_file_type(FILE_TYPE[args.outtype])
    add_frontend_keys(w, enc)
    a = ARCH + "."
    w.add_uint32(a + "vocab_size", len(pieces))
    w.add_uint32(a + "dec_layers", hp["layers"])
    w.add_uint32(a + "dec_hidden", hp["hidden"])
    w.add_uint32(a + "dec_heads", hp["heads"])
    w.add_uint32(a + "dec_inner", hp["inner"])
    w.add_uint32(a + "max_sequence_length", hp["max_sequence_length"])
    w.add_float32(a + "norm_eps", LAYER_NORM_EPS)
    w.add_int32(a + "greedy_max_generation_delta", hp["greedy_max_generation_delta"])
    w.add_int32(a + "beam_max_generation_delta", hp["beam_max_generation_delta"])
    w.add_float32(a + "beam_length_penalty", hp["beam_length_penalty"])
    w.add_uint32(a + "max_audio_ms", MAX_AUDIO_MS)
    w.add_string(a + "prompt_format", "canary2")
    for key in ("bos", "eos", "pad", *PROMPT_TOKENS):
        w.add_uint32(a + "token." + key, ids[key])
    w.add_array(a + "languages", [code for code, _ in ids["languages"]])
    w.add_array(a + "language_tokens", [i for _, i in ids["languages"]])
    if single:
        # One SentencePiece model: NeMo encodes the prompt's text with it (Canary2PromptFormatter) and
        # decodes as SentencePiece does.
        w.add_string(a + "prompt_encoding", "text")
        w.add_tokenizer_model("llama")
        w.add_token_list(pieces)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(unk)
        w.add_add_space_prefix(space_prefix)
        w.add_remove_extra_whitespaces(remove_whitespace)
    else:
        w.add_string(a + "prompt_encoding", "ids")
        w.add_array(a + "tokenizer_offsets", offsets)
        w.add_tokenizer_model("canary")  # aggregate: pieces joined, U+2581 as a space, special tokens literal
        w.add_token_list(pieces)
        w.add_token_types(types)
    plan.write(w)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(plan.items)} tensors, vocabulary {len(pieces)} "
          f"({', '.join(sub_names) or 'one SentencePiece model'}), languages {[c for c, _ in ids['languages']]}, outtype {args.outtype})")


def main() -> int:
    return nemo_converter_main(convert, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
