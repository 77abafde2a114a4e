#!/usr/bin/env python3
"""NeMo's own Canary AED modules on this CPU: the peer of transcribe-bench in bench/canary_aed_compare.sh.

Builds the parts of NeMo's EncDecMultiTaskModel from a .nemo as its __init__ does (the preprocessor, the
ConformerEncoder, get_nemo_transformer's decoder, the TokenClassifier tied to the token embedding),
loads the archive's weights, and times mel + encoder and the decoding of exactly NEW tokens after the
canary2 prompt (NeMo's GreedySequenceGenerator, or BeamSearchSequenceGenerator with --beam), with the
decoder's length set to prompt + NEW so that random weights decode as many tokens as ours.

  PYTHONPATH=/tmp/nemo:scripts/nemo_reference python3 bench/nemo_aed_reference.py --nemo MODEL.nemo \
      --audio jfk.wav --threads 2 --new 32 [--beam 4] [--dtype bf16|f32] [--runs 3]

NeMo's source tree at the commit the fixtures pin (scripts/nemo_reference/nemo_imports.py says how).
Prints one JSON line: mel_encoder_ms, decode_ms, total_ms (medians), peak_rss_mb."""
import argparse
import io
import json
import os
import resource
import statistics
import sys
import tarfile
import time
import types
import wave

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nemo", required=True)
    ap.add_argument("--audio", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--beam", type=int, default=0)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nemo-src", default=os.environ.get("NEMO_SRC", "/tmp/nemo"))
    a = ap.parse_args()

    import nemo_imports
    nemo_imports.hollow_packages(a.nemo_src)
    import torch
    import yaml
    import librosa  # a stand-in (nemo_imports): its filterbank is replaced by the checkpoint's below
    librosa.filters = types.SimpleNamespace(mel=lambda sr, n_fft, n_mels, **kw: np.zeros((n_mels, n_fft // 2 + 1), np.float32))
    from nemo.collections.asr.modules.audio_preprocessing import AudioToMelSpectrogramPreprocessor
    from nemo.collections.asr.modules.conformer_encoder import ConformerEncoder
    from nemo.collections.asr.modules.transformer import get_nemo_transformer
    from nemo.collections.asr.modules.transformer.transformer_generators import (BeamSearchSequenceGenerator,
                                                                                 GreedySequenceGenerator)
    from nemo.collections.asr.parts.submodules.token_classifier import TokenClassifier

    torch.set_num_threads(a.threads)
    with tarfile.open(a.nemo) as tar:
        cfg = yaml.safe_load(tar.extractfile("./model_config.yaml").read())
        state = torch.load(io.BytesIO(tar.extractfile("./model_weights.ckpt").read()), map_location="cpu")
    strip = lambda d: {k: v for k, v in d.items() if k != "_target_"}
    pre = AudioToMelSpectrogramPreprocessor(**strip(cfg["preprocessor"]))
    enc = ConformerEncoder(**strip(cfg["encoder"]))
    vocab_rows = state["transf_decoder._embedding.token_embedding.weight"].shape[0]
    dec_cfg = dict(cfg["transf_decoder"]["config_dict"], vocab_size=vocab_rows)
    dec = get_nemo_transformer(config_dict=dec_cfg, encoder=False,
                               pre_ln_final_layer_norm=cfg["transf_decoder"].get("pre_ln_final_layer_norm", True))
    head = TokenClassifier(hidden_size=dec_cfg["hidden_size"], num_classes=vocab_rows, num_layers=1, log_softmax=True)
    head.mlp.layer0.weight = dec.embedding.token_embedding.weight  # tied, as EncDecMultiTaskModel ties them
    for name, module in (("preprocessor.", pre), ("encoder.", enc), ("transf_decoder.", dec), ("log_softmax.", head)):
        module.load_state_dict({k[len(name):]: v for k, v in state.items() if k.startswith(name)}, strict=True)
    del state
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    for m in (enc, dec, head):
        m.eval().to(dtype)
    pre.eval()

    with wave.open(a.audio) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0
    audio = torch.from_numpy(pcm)[None]
    prompt = torch.tensor([[7, 4, 10, 22, 22, 5, 16, 18, 20]])  # the fixture tokenizer's canary2 prompt (en -> en)
    max_len = prompt.shape[1] + a.new
    common = dict(embedding=dec.embedding, decoder=dec.decoder, pad=2, bos=4, eos=3, max_sequence_length=max_len,
                  max_delta_length=-1)
    generator = (BeamSearchSequenceGenerator(log_softmax=head, beam_size=a.beam, len_pen=0.0, **common) if a.beam
                 else GreedySequenceGenerator(classifier=head, **common))
    encode_ms, decode_ms = [], []
    with torch.inference_mode():
        for run in range(a.runs + 1):  # the first is a warm-up
            t0 = time.perf_counter()
            mel, mel_len = pre(input_signal=audio, length=torch.tensor([audio.shape[1]]))
            states, states_len = enc(audio_signal=mel.to(dtype), length=mel_len)
            states = states.transpose(1, 2)
            t1 = time.perf_counter()
            mask = (torch.arange(states.shape[1])[None] < states_len[:, None]).to(dtype)
            out = generator(encoder_hidden_states=states, encoder_input_mask=mask, decoder_input_ids=prompt)
            t2 = time.perf_counter()
            if run:
                encode_ms.append(1000 * (t1 - t0))
                decode_ms.append(1000 * (t2 - t1))
    ids = (out if a.beam else out[0])[0, prompt.shape[1]:].tolist()
    e, d = statistics.median(encode_ms), statistics.median(decode_ms)
    print(json.dumps({"mel_encoder_ms": round(e, 1), "decode_ms": round(d, 1), "total_ms": round(e + d, 1),
                      "new_tokens": a.new, "beam": a.beam, "dtype": a.dtype, "threads": a.threads,
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "ids": ids}))


if __name__ == "__main__":
    main()
