"""Import NVIDIA NeMo's ASR modules from a source tree, to compute goldens with NeMo's own code.

NeMo's packages import its whole training stack on the way in (hydra, lightning, lhotse, megatron, ...).
The modules a golden needs (encoders, decoders, greedy/beam decoding, timestamp utilities) use none of it
at inference. This module, imported first, makes those imports resolvable without installing them:

  - every package named in STUBBED is answered by an empty module whose attributes are stand-ins (classes
    that accept any arguments, mocks otherwise): only training, data loading and export paths reach them;
  - NeMo's own package __init__ files, which import every model and dataset, are skipped for the packages
    given to hollow_packages(): their submodules then import just what they use;
  - torch.nn.attention (newer torch; NeMo's attention reads it only with use_pytorch_sdpa) is a stand-in.

Tested with Debian's python3-torch 1.13.1, python3-omegaconf, python3-wrapt, python3-yaml,
python3-sentencepiece and NeMo at the commit the fixtures pin (8cfedd7203462cb251a914e700e5605444277561):

    git archive 8cfedd7203462cb251a914e700e5605444277561 nemo | tar -x -C /tmp/nemo   # in a NeMo clone
    PYTHONPATH=/tmp/nemo:scripts/nemo_reference python3 -c '
    import nemo_imports
    nemo_imports.hollow_packages("/tmp/nemo")
    from nemo.collections.asr.modules.conformer_encoder import ConformerEncoder
    from nemo.collections.asr.modules.conv_asr import ConvASRDecoder
    from nemo.collections.asr.parts.submodules.ctc_decoding import CTCBPEDecoding
    from nemo.collections.asr.parts.submodules.rnnt_decoding import RNNTBPEDecoding'

(checked: a 2-layer ConformerEncoder built that way runs a forward pass.)

A stand-in that is reached where a golden depends on it shows up as a mock in the output, never as a
plausible number: check the goldens' types and shapes. librosa is among the stand-ins: build the
preprocessor's filterbank from the checkpoint (its `fb` buffer), not from librosa.
"""
import abc
import importlib.abc
import importlib.machinery
import os
import sys
import types
from unittest import mock

# What the ASR modules' imports reach at the pinned commit (found by recording the finder's hits).
STUBBED = ("apex", "braceexpand", "cuda", "cytoolz", "einops", "huggingface_hub", "hydra", "jiwer", "lhotse",
           "librosa", "lightning", "lightning_utilities", "megatron", "numba", "pandas", "pyannote", "pydub",
           "pytorch_lightning", "scipy", "soundfile", "text_unidecode", "texterrors", "tqdm",
           "transformer_engine", "transformers", "triton", "webdataset", "wget")

# NeMo packages whose __init__.py is skipped.
HOLLOW = ("nemo", "nemo.collections", "nemo.collections.asr", "nemo.collections.asr.modules",
          "nemo.collections.asr.parts", "nemo.collections.asr.parts.submodules", "nemo.collections.asr.parts.utils",
          "nemo.collections.common", "nemo.collections.asr.models", "nemo.collections.asr.data",
          "nemo.collections.asr.losses")


class _Mock(mock.MagicMock):
    pass


class _StandInMeta(abc.ABCMeta):  # ABCMeta: NeMo mixes stand-in bases with its abstract classes
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Mock(name=f"{cls.__name__}.{attr}")


class _StandIn(metaclass=_StandInMeta):
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Mock(name=attr)


def _attribute(module: str, attr: str):
    if attr.startswith("__"):
        raise AttributeError(attr)
    if attr[:1].isupper():  # a class: something may derive from it
        return _StandInMeta(attr, (_StandIn,), {"__module__": module})
    return _Mock(name=f"{module}.{attr}")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = lambda attr: _attribute(spec.name, attr)
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _StandInFinder())

import torch.nn  # noqa: E402

if not hasattr(torch.nn, "attention"):
    _attention = types.ModuleType("torch.nn.attention")
    _attention.SDPBackend = _Mock(name="SDPBackend")
    _attention.sdpa_kernel = _Mock(name="sdpa_kernel")
    sys.modules["torch.nn.attention"] = _attention
    torch.nn.attention = _attention


def hollow_packages(nemo_root: str, names=HOLLOW) -> None:
    """Registers NAMES as packages of the tree at NEMO_ROOT without running their __init__.py."""
    for name in names:
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(nemo_root, *name.split("."))]
        sys.modules[name] = m
