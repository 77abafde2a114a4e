#!/usr/bin/env python3
"""Plain PyTorch (Debian's python3-torch) implementations of the Canary-Qwen halves and of Parakeet-TDT's
encoder at full size with random weights, timed on this CPU: the peers of transcribe-bench in
bench/compare.sh and bench/parakeet_compare.sh.

  torch_reference.py lm      --threads 2 --prompt 152 --new 24      Qwen3-1.7B prefill + KV-cache decode (bf16)
  torch_reference.py encoder --threads 2 --frames 1101 --dtype f32  mel + FastConformer x32 + projection
  torch_reference.py encoder --family parakeet ...                   mel + FastConformer x24 (no linear biases)
                                                                     + the joint's encoder projection (640)

Prints one JSON line of timings."""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


def rand(*shape, dtype, scale=None):
    scale = scale if scale is not None else shape[-1] ** -0.5
    return (torch.randn(*shape) * scale).to(dtype)


# ------------------------------------------------------------------------------------------ Qwen3
class Qwen3:
    def __init__(self, dtype, layers=28, hidden=2048, heads=16, kv=8, hd=128, ff=6144, vocab=151936):
        self.dtype, self.h, self.nh, self.nkv, self.hd = dtype, hidden, heads, kv, hd
        self.embed = rand(vocab, hidden, dtype=dtype, scale=0.02)
        self.layers = [dict(q=rand(heads * hd, hidden, dtype=dtype), k=rand(kv * hd, hidden, dtype=dtype),
                            v=rand(kv * hd, hidden, dtype=dtype), o=rand(hidden, heads * hd, dtype=dtype),
                            gate=rand(ff, hidden, dtype=dtype), up=rand(ff, hidden, dtype=dtype),
                            down=rand(hidden, ff, dtype=dtype), n1=torch.ones(hidden, dtype=dtype),
                            n2=torch.ones(hidden, dtype=dtype), qn=torch.ones(hd, dtype=dtype),
                            kn=torch.ones(hd, dtype=dtype)) for _ in range(layers)]
        self.norm = torch.ones(hidden, dtype=dtype)
        inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.arange(4096).float()[:, None] * inv[None]
        self.cos, self.sin = torch.cat([ang.cos()] * 2, -1).to(dtype), torch.cat([ang.sin()] * 2, -1).to(dtype)

    @staticmethod
    def rms(x, w, eps=1e-6):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    def rope(self, x, pos):
        c, s = self.cos[pos][:, None], self.sin[pos][:, None]
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * c + torch.cat([-x2, x1], -1) * s

    def forward(self, x, pos, cache):
        T = x.shape[0]
        for i, l in enumerate(self.layers):
            h = self.rms(x, l["n1"])
            q = self.rope(self.rms((h @ l["q"].T).view(T, self.nh, self.hd), l["qn"]), pos)
            k = self.rope(self.rms((h @ l["k"].T).view(T, self.nkv, self.hd), l["kn"]), pos)
            v = (h @ l["v"].T).view(T, self.nkv, self.hd)
            if i in cache:
                k, v = torch.cat([cache[i][0], k]), torch.cat([cache[i][1], v])
            cache[i] = (k, v)
            rep = self.nh // self.nkv
            kk, vv = k.repeat_interleave(rep, 1).transpose(0, 1), v.repeat_interleave(rep, 1).transpose(0, 1)
            s = (q.transpose(0, 1) @ kk.transpose(1, 2)) / math.sqrt(self.hd)
            if T > 1:
                s = s + torch.triu(torch.full((T, T), float("-inf")), 1).to(s.dtype)
            a = (torch.softmax(s.float(), -1).to(x.dtype) @ vv).transpose(0, 1).reshape(T, -1)
            x = x + a @ l["o"].T
            h2 = self.rms(x, l["n2"])
            x = x + (F.silu(h2 @ l["gate"].T) * (h2 @ l["up"].T)) @ l["down"].T
        return self.rms(x[-1:], self.norm) @ self.embed.T


def bench_lm(a):
    m = Qwen3(torch.bfloat16 if a.dtype == "bf16" else torch.float32)
    x = m.embed[torch.randint(0, 151936, (a.prompt,))]
    with torch.no_grad():
        m.forward(x[:8], torch.arange(8), {})  # warm-up
        t0 = time.perf_counter()
        cache = {}
        tok = m.forward(x, torch.arange(a.prompt), cache).argmax(-1)
        t1 = time.perf_counter()
        for i in range(a.new - 1):
            tok = m.forward(m.embed[tok], torch.tensor([a.prompt + i]), cache).argmax(-1)
        t2 = time.perf_counter()
    return {"prefill_ms": 1000 * (t1 - t0), "prefill_tokens_per_s": a.prompt / (t1 - t0),
            "decode_ms": 1000 * (t2 - t1), "decode_tokens_per_s": (a.new - 1) / (t2 - t1)}


# ------------------------------------------------------------------------------------------ encoder
class FastConformer:
    def __init__(self, dtype, layers=32, d=1024, heads=8, ff=4096, C=256, mels=128, k=9, out=2048, bias=True):
        self.dtype, self.d, self.H, self.k = dtype, d, heads, k
        self.window = torch.hann_window(400, periodic=False)
        self.fb = torch.rand(mels, 257) * 0.01
        self.sub = dict(c0=rand(C, 1, 3, 3, dtype=dtype, scale=1 / 3), b0=torch.zeros(C, dtype=dtype),
                        dw1=rand(C, 1, 3, 3, dtype=dtype, scale=1 / 3), pw1=rand(C, C, 1, 1, dtype=dtype),
                        dw2=rand(C, 1, 3, 3, dtype=dtype, scale=1 / 3), pw2=rand(C, C, 1, 1, dtype=dtype),
                        out=rand(d, C * mels // 8, dtype=dtype), C=C)
        lin = lambda o, i: (rand(o, i, dtype=dtype), torch.zeros(o, dtype=dtype) if bias else None)
        self.layers = [dict(ff1=(lin(ff, d), lin(d, ff)), ff2=(lin(ff, d), lin(d, ff)), q=lin(d, d), k=lin(d, d),
                            v=lin(d, d), o=lin(d, d), pos=rand(d, d, dtype=dtype),
                            u=rand(heads, d // heads, dtype=dtype, scale=0.1), vb=rand(heads, d // heads, dtype=dtype, scale=0.1),
                            pw1=lin(2 * d, d), dw=rand(d, 1, k, dtype=dtype, scale=k ** -0.5),
                            dwb=torch.zeros(d, dtype=dtype) if bias else None,
                            pw2=lin(d, d), ln=[(torch.ones(d, dtype=dtype), torch.zeros(d, dtype=dtype)) for _ in range(5)])
                       for _ in range(layers)]
        self.proj = (rand(out, d, dtype=dtype), torch.zeros(out, dtype=dtype))

    def mel(self, audio):
        y = torch.cat([audio[:1], audio[1:] - 0.97 * audio[:-1]])
        spec = torch.stft(y, 512, 160, 400, self.window, center=True, pad_mode="constant", return_complex=True)
        m = torch.log(self.fb @ spec.abs().pow(2) + 2 ** -24)
        return (m - m.mean(1, keepdim=True)) / (m.std(1, keepdim=True) + 1e-5)

    def forward(self, audio):
        s, dt = self.sub, self.dtype
        x = self.mel(audio).T[None, None].to(dt)  # [1, 1, T, F]
        x = F.relu(F.conv2d(x, s["c0"], s["b0"], 2, 1))
        x = F.conv2d(x, s["dw1"], None, 2, 1, groups=s["C"])
        x = F.relu(F.conv2d(x, s["pw1"]))
        x = F.conv2d(x, s["dw2"], None, 2, 1, groups=s["C"])
        x = F.relu(F.conv2d(x, s["pw2"]))
        b, c, t, f = x.shape
        x = x.transpose(1, 2).reshape(t, c * f) @ s["out"].T
        T, d, H = t, self.d, self.H
        pos = torch.arange(T - 1, -T, -1).float()[:, None]
        div = torch.exp(torch.arange(0, d, 2).float() * -(math.log(10000.0) / d))
        pe = torch.zeros(2 * T - 1, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        pe = pe.to(dt)
        ln = lambda x, p: F.layer_norm(x, (d,), p[0], p[1], 1e-5)
        ffn = lambda x, p: F.linear(F.silu(F.linear(x, *p[0])), *p[1])
        for l in self.layers:
            x = x + 0.5 * ffn(ln(x, l["ln"][0]), l["ff1"])
            h = ln(x, l["ln"][1])
            q = F.linear(h, *l["q"]).view(T, H, -1).transpose(0, 1)
            k = F.linear(h, *l["k"]).view(T, H, -1).transpose(0, 1)
            v = F.linear(h, *l["v"]).view(T, H, -1).transpose(0, 1)
            p = (pe @ l["pos"].T).view(2 * T - 1, H, -1).transpose(0, 1)
            ac = (q + l["u"][:, None]) @ k.transpose(1, 2)
            bd = (q + l["vb"][:, None]) @ p.transpose(1, 2)  # [H, T, 2T-1]
            bd = bd.as_strided((H, T, T), (bd.stride(0), 2 * T - 2, 1), T - 1)  # rel-shift
            a = torch.softmax((ac + bd).float() / math.sqrt(d // H), -1).to(dt) @ v
            x = x + F.linear(a.transpose(0, 1).reshape(T, d), *l["o"])
            h = F.glu(F.linear(ln(x, l["ln"][2]), *l["pw1"]), -1)
            h = F.conv1d(h.T[None], l["dw"], l["dwb"], padding=self.k // 2, groups=d)[0].T
            x = x + F.linear(F.silu(h), *l["pw2"])
            x = x + 0.5 * ffn(ln(x, l["ln"][3]), l["ff2"])
            x = ln(x, l["ln"][4])
        return F.linear(x, *self.proj)


def bench_encoder(a):
    dims = dict(layers=24, out=640, bias=False) if a.family == "parakeet" else {}
    m = FastConformer(torch.bfloat16 if a.dtype == "bf16" else torch.float32, **dims)
    audio = torch.randn(a.samples) * 0.1
    with torch.no_grad():
        m.forward(audio[:16000])  # warm-up
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            m.forward(audio)
            times.append(1000 * (time.perf_counter() - t0))
    times.sort()
    return {"encoder_ms": times[len(times) // 2], "encoder_min_ms": times[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["lm", "encoder"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--prompt", type=int, default=152)
    ap.add_argument("--new", type=int, default=24)
    ap.add_argument("--samples", type=int, default=176000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--family", choices=["canary-qwen", "parakeet"], default="canary-qwen")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    out = bench_lm(a) if a.what == "lm" else bench_encoder(a)
    out.update({"what": a.what, "family": a.family, "dtype": a.dtype, "threads": a.threads, "torch": torch.__version__})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
