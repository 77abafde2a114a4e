#!/usr/bin/env python3
"""NeMo's own Sortformer modules on this CPU: the peer of transcribe-diarize in bench/sortformer_compare.sh.

Builds the parts of NeMo's SortformerEncLabelModel from a .nemo as its __init__ does (the preprocessor, the
ConformerEncoder, SortformerModules, the TransformerEncoder), loads the archive's weights and times
diarizing one recording: offline (forward: mel, encoder, projection, Transformer, sigmoid head) or, with
--streaming, forward_streaming's loop (SortformerModules.streaming_feat_loader's chunks, each pre-encoded,
run after the speaker cache and FIFO with bypass_pre_encode, SortformerModules.streaming_update). The
model class itself pulls in NeMo's training stack, so its two short driver methods (forward_streaming,
forward_streaming_step) are written out here, call for call; every computation is NeMo's modules'.

  PYTHONPATH=/tmp/nemo:scripts/nemo_reference python3 bench/nemo_sortformer_reference.py --nemo MODEL.nemo \
      --audio meeting.wav --threads 2 [--streaming --chunk-len 340 --chunk-right-context 40 --fifo-len 40 \
      --spkcache-update-period 300 --spkcache-len 188] [--dtype f32|bf16] [--runs 1] [--warmup 0]

Prints one JSON line: total_ms (median), x_realtime, frames, peak_rss_mb."""
import argparse
import io
import json
import math
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
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--dump", help="write the probabilities [frames, speakers] here (.npy)")
    ap.add_argument("--dump-steps", help="streaming: every step's input probabilities, cache and FIFO here (.npz, "
                                         "the names of TRANSCRIBE_DUMP_DIR's stream_* files)")
    ap.add_argument("--streaming", action="store_true")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="bf16: the encoder, projection, Transformer and head in bfloat16 (the mel and the "
                         "streaming state stay float32)")
    for name, default in (("spkcache-len", 188), ("fifo-len", 188), ("spkcache-update-period", 144), ("chunk-len", 6),
                          ("chunk-left-context", 1), ("chunk-right-context", 7)):
        ap.add_argument("--" + name, type=int, default=default)
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
    from nemo.collections.asr.modules.sortformer_modules import SortformerModules
    from nemo.collections.asr.modules.transformer.transformer_encoders import TransformerEncoder

    torch.set_num_threads(a.threads)
    with tarfile.open(a.nemo) as tar:
        cfg = yaml.safe_load(tar.extractfile("./model_config.yaml").read())
        state = torch.load(io.BytesIO(tar.extractfile("./model_weights.ckpt").read()), map_location="cpu")
    strip = lambda d: {k: v for k, v in d.items() if k != "_target_"}
    pre = AudioToMelSpectrogramPreprocessor(**strip(cfg["preprocessor"]))
    enc = ConformerEncoder(**strip(cfg["encoder"]))
    mods = SortformerModules(**strip(cfg["sortformer_modules"]))
    tf = TransformerEncoder(**{k: v for k, v in strip(cfg["transformer_encoder"]).items()})
    for name, module in (("preprocessor.", pre), ("encoder.", enc), ("sortformer_modules.", mods),
                         ("transformer_encoder.", tf)):
        module.load_state_dict({k[len(name):]: v for k, v in state.items() if k.startswith(name)}, strict=True)
    del state
    for m in (pre, enc, mods, tf):
        m.eval()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    for m in (enc, mods, tf):
        m.to(dtype)
    for key in ("spkcache_len", "fifo_len", "spkcache_update_period", "chunk_len", "chunk_left_context",
                "chunk_right_context"):
        setattr(mods, key, getattr(a, key))

    def frontend_encoder(signal, length, bypass_pre_encode=False):  # SortformerEncLabelModel.frontend_encoder
        emb, emb_len = enc(audio_signal=signal.to(dtype), length=length, bypass_pre_encode=bypass_pre_encode)
        return mods.encoder_proj(emb.transpose(1, 2)), emb_len

    def forward_infer(emb, emb_len):  # SortformerEncLabelModel.forward_infer
        mask = mods.length_to_mask(emb_len, emb.shape[1])
        return mods.forward_speaker_sigmoids(tf(encoder_states=emb, encoder_mask=mask)).float()

    steps = {"stream_preds_in": [], "stream_spkcache_after": [], "stream_fifo_after": []} if a.dump_steps else None

    def forward_streaming(mel, mel_len):  # SortformerEncLabelModel.forward_streaming (synchronous, batch 1)
        state = mods.init_streaming_state(batch_size=1, async_streaming=False, device=torch.device("cpu"))
        total = torch.zeros((1, 0, mods.n_spk))
        loader = mods.streaming_feat_loader(feat_seq=mel, feat_seq_length=mel_len,
                                            feat_seq_offset=torch.zeros((1,), dtype=torch.long))
        for _, chunk, chunk_len, left, right in loader:  # forward_streaming_step
            chunk_emb, chunk_emb_len = enc.pre_encode(x=chunk.to(dtype), lengths=chunk_len)
            chunk_emb = chunk_emb.float()
            embs = mods.concat_embs([state.spkcache, state.fifo, chunk_emb], dim=1, device=torch.device("cpu"))
            lengths = state.spkcache.shape[1] + state.fifo.shape[1] + chunk_emb_len
            emb, emb_len = frontend_encoder(embs, lengths, bypass_pre_encode=True)
            preds = mods.apply_mask_to_preds(forward_infer(emb, emb_len), emb_len)
            state, chunk_preds = mods.streaming_update(streaming_state=state, chunk=chunk_emb, preds=preds,
                                                       lc=round(left / 8), rc=math.ceil(right / 8))
            if steps is not None:
                steps["stream_preds_in"].append(preds[0].float().numpy().copy())
                steps["stream_spkcache_after"].append(state.spkcache[0].float().numpy().copy())
                steps["stream_fifo_after"].append(state.fifo[0].float().numpy().copy())
            total = torch.cat([total, chunk_preds], dim=1)
        return total

    with wave.open(a.audio) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0
    audio = torch.from_numpy(pcm)[None]
    times = []
    with torch.inference_mode():
        for run in range(a.warmup + a.runs):
            t0 = time.perf_counter()
            x = audio if a.streaming else audio * (1 / (audio.max() + 1e-3))  # process_signal
            mel, mel_len = pre(input_signal=x, length=torch.tensor([audio.shape[1]]))
            mel = mel[:, :, : mel_len.max()]
            if a.streaming:
                preds = forward_streaming(mel, mel_len)
            else:
                preds = forward_infer(*frontend_encoder(mel, mel_len))
            if run >= a.warmup:
                times.append(1000 * (time.perf_counter() - t0))
    total = statistics.median(times)
    if a.dump:
        np.save(a.dump, preds[0].numpy())
    if steps is not None:
        np.savez(a.dump_steps, **{k: np.concatenate(v) for k, v in steps.items()})
    print(json.dumps({"total_ms": round(total, 1), "x_realtime": round(len(pcm) / 16000 / (total / 1000), 2),
                      "frames": int(preds.shape[1]), "streaming": a.streaming, "threads": a.threads,
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
