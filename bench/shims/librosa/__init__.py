"""A stand-in for `librosa` (not in Debian), enough for converters that bake a mel filterbank:
filters.mel(sr, n_fft, n_mels, fmin, fmax, norm="slaney", htk=False), librosa's Slaney-scale triangles.
Bench use only."""
import types

import numpy as np


def _hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), f / (200.0 / 3))


def _mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), (200.0 / 3) * m)


def _mel(sr, n_fft, n_mels=128, fmin=0.0, fmax=None, norm="slaney", htk=False, dtype=np.float32):
    if htk or norm != "slaney":
        raise NotImplementedError("the stand-in has the Slaney scale and norm only")
    fmax = sr / 2.0 if fmax is None else fmax
    fftfreqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    weights = np.zeros((n_mels, len(fftfreqs)))
    for i in range(n_mels):
        weights[i] = np.maximum(0, np.minimum(-ramps[i] / fdiff[i], ramps[i + 2] / fdiff[i + 1]))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(dtype)


filters = types.SimpleNamespace(mel=_mel)
