#!/usr/bin/env python3
"""Convert an NVIDIA Parakeet `.nemo` archive into one transcribe GGUF: TDT (EncDecRNNTBPEModel with the TDT
loss; architecture parakeet_tdt), RNNT (the same class with the standard RNNT loss; parakeet_rnnt) or CTC
(EncDecCTCModelBPE: a ConvASRDecoder head; parakeet_ctc). A hybrid EncDecHybridRNNTCTCBPEModel is its
transducer's architecture with its aux_ctc head too.

Reads the tar, the YAML config, the torch.save'd state dict (restricted unpickler, no torch) and the
SentencePiece model (python3-sentencepiece); no NeMo. Storage: the FastConformer as for every NeMo
encoder (convert_common.plan_frontend); prediction-net embedding, LSTM and joint matrices in --outtype,
their biases in F32. Each LSTM layer is stored as one matrix [W_ih | W_hh] over the input and the
previous h stacked (one product a step instead of two) and one bias b_ih + b_hh (the cell only ever
adds both).
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import numpy as np

from convert_common import (FILE_TYPE, ConvertError, Plan, add_frontend_keys, as_outtype, gguf,
                            open_nemo, plan_frontend, nemo_converter_main)
from nemo_archive import NemoArchive

ARCH = "parakeet_tdt"
RNNT_ARCH = "parakeet_rnnt"
CTC_ARCH = "parakeet_ctc"
MAX_AUDIO_MS = 120000  # per run; longer recordings are cut at pauses (attention memory grows as T^2)


def transducer_durations(cfg: dict, where: str) -> list:
    """TDT's durations, or [] for a standard RNNT, as EncDecRNNTModel decides: the loss names the model
    (`tdt`: durations from its tdt_kwargs, which set_decoding_type_according_to_loss copies into the
    decoding; `multiblank_rnnt`: big blanks, not supported); any other loss keeps the decoding section's
    own durations, and a decoding without them is RNNT (RNNTDecoding reads durations, not model_type)."""
    decoding = cfg.get("decoding") or {}
    loss = cfg.get("loss") or {}
    loss_name = loss.get("loss_name", "default")
    if loss_name == "multiblank_rnnt":
        raise ConvertError(f"{where}: multi-blank RNNT (loss multiblank_rnnt) is not supported")
    if loss_name == "tdt":
        durations = ((loss.get("tdt_kwargs") or {}).get("durations") or decoding.get("durations")
                     or (cfg.get("model_defaults") or {}).get("tdt_durations"))
        if not durations:
            raise ConvertError(f"{where}: loss tdt without durations (loss.tdt_kwargs.durations): not a TDT model")
        return list(durations)
    return list(decoding.get("durations") or [])


def transducer_hparams(cfg: dict, where: str) -> dict:
    try:
        dec, joint = cfg["decoder"], cfg["joint"]
        pred, jn = dec["prednet"], joint["jointnet"]
        decoding = cfg.get("decoding") or {}
        durations = transducer_durations(cfg, where)
        if jn.get("activation", "relu") != "relu":
            raise ConvertError(f"{where}: joint activation {jn.get('activation')!r} is not supported (relu)")
        if dec.get("normalization_mode") not in (None, "null"):
            raise ConvertError(f"{where}: prediction-net normalization {dec.get('normalization_mode')!r} is not supported")
        if not dec.get("blank_as_pad", True):
            raise ConvertError(f"{where}: blank_as_pad=false is not supported")
        greedy = decoding.get("greedy") or {}
        hp = {
            "vocab": int(dec["vocab_size"]),
            "pred_hidden": int(pred["pred_hidden"]),
            "pred_layers": int(pred["pred_rnn_layers"]),
            "joint_hidden": int(jn["joint_hidden"]),
            "durations": [int(d) for d in durations],
            # RNNTDecoding: greedy.max_symbols, else max_symbols_per_step (the config's default 10)
            "max_symbols": int(greedy.get("max_symbols") or greedy.get("max_symbols_per_step") or 10),
        }
        if int(joint["num_classes"]) != hp["vocab"] or int(joint.get("num_extra_outputs", 0) or 0) != len(durations):
            raise ConvertError(f"{where}: joint outputs ({joint['num_classes']} + {joint.get('num_extra_outputs')}) "
                               f"do not match vocab {hp['vocab']} + {len(durations)} durations")
        if sorted(set(hp["durations"])) != hp["durations"] or (durations and hp["durations"][0] < 0):
            raise ConvertError(f"{where}: durations {hp['durations']} must be distinct, ascending, >= 0")
        if hp["max_symbols"] <= 0:
            raise ConvertError(f"{where}: decoding.greedy.max_symbols must be positive")
        return hp
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: not a Parakeet transducer config (missing or invalid {exc})") from None


def is_ctc(cfg: dict) -> bool:
    """EncDecCTCModelBPE: a ConvASRDecoder head and no joint."""
    target = str((cfg.get("decoder") or {}).get("_target_", ""))
    return "joint" not in cfg and target.endswith("ConvASRDecoder")


def ctc_hparams(cfg: dict, d_model: int, where: str) -> dict:
    try:
        dec = cfg["decoder"]
        vocabulary = dec.get("vocabulary") or []
        vocab = int(dec.get("num_classes", -1))
        if vocab <= 0:
            vocab = len(vocabulary)
        if int(dec["feat_in"]) != d_model:
            raise ConvertError(f"{where}: CTC head feat_in {dec['feat_in']} is not the encoder's d_model {d_model}")
        if vocab <= 0 or (vocabulary and len(vocabulary) != vocab):
            raise ConvertError(f"{where}: CTC head of {vocab} classes, vocabulary of {len(vocabulary)}")
        if not dec.get("add_blank", True):
            raise ConvertError(f"{where}: a CTC head without a blank (add_blank=false) is not supported")
        return {"vocab": vocab}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConvertError(f"{where}: not a Parakeet-CTC config (missing or invalid {exc})") from None


def plan_ctc_head(p: Plan, D: int, vocab: int, prefix: str) -> None:
    # The 1x1 convolution over time is a matrix [vocab + 1, d_model]: blank last.
    p.matrix("ctc.weight", prefix + "decoder_layers.0.weight", (vocab + 1, D, 1), reshape=(vocab + 1, D))
    p.f32("ctc.bias", prefix + "decoder_layers.0.bias", (vocab + 1,))


def build_ctc_plan(src, enc: dict, vocab: int, outtype: str) -> Plan:
    p = Plan(src, outtype)
    plan_frontend(p, enc, "preprocessor.", "encoder.")
    plan_ctc_head(p, enc["d_model"], vocab, "decoder.")
    return p


def load_tokenizer(nemo: NemoArchive, vocab: int):
    """SentencePiece pieces, scores, types; and NeMo's supported punctuation (Unicode category P characters of
    the pieces that are not <..>, [..], ##.. or ▁.. pieces)."""
    try:
        import sentencepiece as spm
    except ImportError as exc:
        raise ConvertError(f"python3-sentencepiece is needed to read the tokenizer ({exc})")
    tok = nemo.config.get("tokenizer") or {}
    if tok.get("type", "bpe") != "bpe" or not tok.get("model_path"):
        raise ConvertError(f"{nemo.path}: tokenizer type {tok.get('type')!r} / model_path not supported (SentencePiece bpe)")
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(nemo.member(tok["model_path"]))
    except RuntimeError as exc:
        raise ConvertError(f"{nemo.path}: unreadable SentencePiece model ({exc})")
    if sp.get_piece_size() != vocab:
        raise ConvertError(f"{nemo.path}: tokenizer has {sp.get_piece_size()} pieces, the decoder {vocab}")
    pieces = [sp.id_to_piece(i) for i in range(vocab)]
    scores = [float(sp.get_score(i)) for i in range(vocab)]
    types = []
    for i in range(vocab):
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        elif sp.is_unused(i):
            types.append(gguf.TokenType.UNUSED)
        else:
            types.append(gguf.TokenType.NORMAL)
    punct = sorted({c for p in pieces
                    if not (p.startswith("<") and p.endswith(">")) and not (p.startswith("[") and p.endswith("]"))
                    and not p.startswith("##") and not p.startswith("\u2581")
                    for c in p if unicodedata.category(c).startswith("P")})
    return pieces, scores, types, punct, sp.unk_id()


def build_plan(src, enc: dict, tdt: dict, outtype: str) -> Plan:
    p = Plan(src, outtype)
    plan_frontend(p, enc, "preprocessor.", "encoder.")
    V, P, J, D, L = tdt["vocab"], tdt["pred_hidden"], tdt["joint_hidden"], enc["d_model"], tdt["pred_layers"]
    pred = "decoder.prediction."
    p.matrix("pred.embd.weight", pred + "embed.weight", (V + 1, P))
    for layer in range(L):
        s, o = f"{pred}dec_rnn.lstm.", f"pred.lstm.{layer}."
        w_ih, w_hh = p.need(s + f"weight_ih_l{layer}", (4 * P, P)), p.need(s + f"weight_hh_l{layer}", (4 * P, P))
        p.custom(o + "weight", (4 * P, 2 * P), outtype,
                 lambda w_ih=w_ih, w_hh=w_hh: as_outtype(np.concatenate([p.read_f32(w_ih), p.read_f32(w_hh)], axis=1), outtype))
        b_ih, b_hh = p.need(s + f"bias_ih_l{layer}", (4 * P,)), p.need(s + f"bias_hh_l{layer}", (4 * P,))
        p.custom(o + "bias", (4 * P,), "f32", lambda b_ih=b_ih, b_hh=b_hh: p.read_f32(b_ih) + p.read_f32(b_hh))
    p.matrix("joint.enc.weight", "joint.enc.weight", (J, D))
    p.f32("joint.enc.bias", "joint.enc.bias", (J,))
    p.matrix("joint.pred.weight", "joint.pred.weight", (J, P))
    p.f32("joint.pred.bias", "joint.pred.bias", (J,))
    n_out = V + 1 + len(tdt["durations"])
    p.matrix("joint.out.weight", "joint.joint_net.2.weight", (n_out, J))
    p.f32("joint.out.bias", "joint.joint_net.2.bias", (n_out,))
    return p


def segment_rules(decoding: dict, where: str) -> tuple:
    """NeMo's segment separators and gap threshold (frames; 0: none) from a decoding section, as RNNTDecoding
    and CTCDecoding read them from the merged decoding config (defaults ['.', '!', '?'] and None)."""
    decoding = decoding or {}
    separators = decoding.get("segment_seperators", [".", "!", "?"])  # NeMo's spelling
    if separators is None or not isinstance(separators, (list, tuple)) or \
            not all(isinstance(x, str) and x for x in separators):
        raise ConvertError(f"{where}: decoding.segment_seperators must be a list of non-empty strings, got {separators!r}")
    gap = decoding.get("segment_gap_threshold") or 0
    if not isinstance(gap, int) or isinstance(gap, bool) or gap < 0:
        raise ConvertError(f"{where}: decoding.segment_gap_threshold must be a frame count, got {gap!r}")
    return list(separators), gap


def convert(args) -> None:
    nemo, cfg, where, enc = open_nemo(args.nemo, (), "an ASR model")
    ctc = is_ctc(cfg)
    if ctc:
        arch, head = CTC_ARCH, ctc_hparams(cfg, enc["d_model"], where)
        vocab = head["vocab"]
        plan = build_ctc_plan(nemo.checkpoint(), enc, vocab, args.outtype)
    else:
        head = transducer_hparams(cfg, where)
        arch = ARCH if head["durations"] else RNNT_ARCH
        vocab = head["vocab"]
        plan = build_plan(nemo.checkpoint(), enc, head, args.outtype)
    # EncDecHybridRNNTCTCBPEModel (parakeet-tdt_ctc-110m): the transducer and, in aux_ctc, a CTC head over the
    # same encoder, either one chosen at run time (NeMo's change_decoding_strategy(decoder_type=...)).
    aux_ctc = None if ctc else cfg.get("aux_ctc")
    if aux_ctc is not None:
        aux_where = where + " aux_ctc"
        dec = dict(aux_ctc.get("decoder") or {})
        # NeMo fills what the config leaves open from the encoder and the tokenizer (the class count).
        if dec.get("feat_in") is None:
            dec["feat_in"] = enc["d_model"]
        if int(dec.get("num_classes") or -1) <= 0 and not dec.get("vocabulary"):
            dec["num_classes"] = vocab
        if ctc_hparams({"decoder": dec}, enc["d_model"], aux_where)["vocab"] != vocab:
            raise ConvertError(f"{aux_where}: the CTC head's classes are not the transducer's vocabulary of {vocab}")
        plan_ctc_head(plan, enc["d_model"], vocab, "ctc_decoder.")
    pieces, scores, types, punct, unk_id = load_tokenizer(nemo, vocab)

    out = Path(args.outfile)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), arch)
    w.add_name(args.name or Path(args.nemo).stem)
    w.add_file_type(FILE_TYPE[args.outtype])
    add_frontend_keys(w, enc)
    a = arch + "."
    w.add_uint32(a + "vocab_size", vocab)
    w.add_uint32(a + "blank_id", vocab)
    if not ctc:
        w.add_uint32(a + "pred_hidden", head["pred_hidden"])
        w.add_uint32(a + "pred_layers", head["pred_layers"])
        w.add_uint32(a + "joint_hidden", head["joint_hidden"])
        if head["durations"]:
            w.add_array(a + "durations", head["durations"])
        w.add_uint32(a + "max_symbols", head["max_symbols"])
    w.add_uint32(a + "max_audio_ms", MAX_AUDIO_MS)
    w.add_array(a + "punctuation", punct)
    separators, gap = segment_rules(cfg.get("decoding"), where)
    w.add_array(a + "segment_separators", separators)
    w.add_uint32(a + "segment_gap_threshold", gap)
    if aux_ctc is not None:  # the CTC head's decoding section is its own
        separators, gap = segment_rules(aux_ctc.get("decoding"), where + " aux_ctc")
        w.add_array(a + "ctc.segment_separators", separators)
        w.add_uint32(a + "ctc.segment_gap_threshold", gap)
    w.add_array(a + "languages", list(cfg.get("languages") or ["en"]))
    w.add_tokenizer_model("llama")  # SentencePiece
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(unk_id)
    plan.write(w)
    what = "CTC head" if ctc else (f"durations {head['durations']}" if head["durations"] else "RNNT") + \
        (" and a CTC head" if aux_ctc is not None else "")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(plan.items)} tensors, vocab {vocab} + blank, "
          f"{what}, outtype {args.outtype})")


def main() -> int:
    return nemo_converter_main(convert, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
