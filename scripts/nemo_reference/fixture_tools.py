"""What the fixture generators share around NeMo's code: reading a `.nemo`, the fixtures' SentencePiece
tokenizer as NeMo's SentencePieceTokenizer, JSON of tensors and numpy scalars, file fingerprints."""
from __future__ import annotations

import hashlib
import tarfile
import tempfile
from pathlib import Path

import numpy as np


def nemo_members(nemo: Path) -> dict:
    """The files of a .nemo archive (an uncompressed tar), by member name ("./model_config.yaml", ...)."""
    with tarfile.open(nemo) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


class _WithVocabSize:
    """A SentencePieceProcessor whose vocab_size is the int NeMo reads it as (an int in the sentencepiece
    NeMo pins, a method in Debian's 0.1.97: the same number, given as one)."""

    def __init__(self, processor):
        self._p = processor
        self.vocab_size = processor.get_piece_size()

    def __getattr__(self, attr):
        return getattr(self._p, attr)


def nemo_tokenizer(members: dict):
    """NeMo's SentencePieceTokenizer over the archive's *_tokenizer.model, with vocab_size an int."""
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
    name = next(n for n in members if n.endswith("_tokenizer.model"))
    tmp = tempfile.TemporaryDirectory()
    path = Path(tmp.name) / "tokenizer.model"
    path.write_bytes(members[name])
    tokenizer = SentencePieceTokenizer(str(path))
    tokenizer.tokenizer = _WithVocabSize(tokenizer.tokenizer)
    tokenizer.fixture_dir = tmp  # the file lives as long as the tokenizer
    return tokenizer


def jsonable(o):
    """O with tensors, numpy scalars and tuples made plain JSON values."""
    import torch
    if isinstance(o, dict):
        return {k: jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if torch.is_tensor(o):
        return jsonable(o.tolist())
    return o


def fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
