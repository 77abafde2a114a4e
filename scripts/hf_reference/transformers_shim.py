"""Stand-ins for the parts of Hugging Face transformers that model code written against it imports, so that
the reference's own modeling files (QwenLM/Qwen3-ASR's `qwen_asr/core/transformers_backend/*.py`) run on
Debian's torch to compute goldens. transformers is not packaged for Debian.

What a golden depends on is either the reference's code (which imports these names) or, where the
reference hands work to transformers itself, a transcription of transformers' own function, named with
its file and commit below and kept line for line:

  - `mel_filter_bank`, `hertz_to_mel`, `mel_to_hertz`, `_create_triangular_filter_bank`:
    src/transformers/audio_utils.py at 0068e97099241de217856337e672013cbd2863de;
  - `whisper_log_mel`: `WhisperFeatureExtractor._torch_extract_fbank_features` and the attention-mask
    rescaling of `WhisperFeatureExtractor.__call__` (src/transformers/models/whisper/
    feature_extraction_whisper.py, transformers 4.57, the version qwen-asr pins), for one unpadded
    waveform (the processor's `padding=True` is "longest": a batch of one is not padded);
  - `Qwen2BPE`: the byte-level BPE of src/transformers/models/qwen2/tokenization_qwen2.py
    (`bytes_to_unicode`, `bpe`, `_tokenize`, NFC in `prepare_for_tokenization`) with the added-token
    split of `PreTrainedTokenizer.tokenize` (added tokens matched whole, left to right) and the
    `_decode` of `PreTrainedTokenizer` for `skip_special_tokens=True, spaces_between_special_tokens=False`;
  - `render_chat_template`: `apply_chat_template`'s jinja2 environment (trim_blocks, lstrip_blocks,
    sandboxed) over a template string;
  - `create_causal_mask`: the eager additive mask (0 where key <= query and the key is not padding, the
    dtype's minimum elsewhere);
  - `ALL_ATTENTION_FUNCTIONS["flash_attention_2"]`: FlashAttention-2's variable-length attention as
    transformers calls it with `cu_seq_lens_q/k` (each query attends to the keys of its own segment),
    computed the eager way (scores, softmax in float32, sum of values) within each segment.

Everything else here is plumbing with no arithmetic: decorators that return their function, base classes
that hold a config, output records.
"""
from __future__ import annotations

import dataclasses
import sys
import types
import unicodedata
from functools import lru_cache
from typing import Any, Optional

import numpy as np
import torch
from torch import nn


# ----------------------------------------------------------------------------------------- plumbing
def _identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


class PretrainedConfig:
    model_type = ""

    def __init__(self, **kwargs):
        self._attn_implementation = "eager"
        self.pad_token_id = kwargs.pop("pad_token_id", None)
        self.tie_word_embeddings = kwargs.pop("tie_word_embeddings", False)
        for k, v in kwargs.items():
            setattr(self, k, v)

    def get_text_config(self, decoder=False):
        return getattr(self, "text_config", self)


class PreTrainedModel(nn.Module):
    config_class = None

    def __init__(self, config, *args, **kwargs):
        super().__init__()
        self.config = config

    def post_init(self):
        pass

    @classmethod
    def _from_config(cls, config, **kwargs):
        return cls(config)

    def get_input_embeddings(self):  # a base model's own token table (transformers' `_input_embed_layer`)
        return self.embed_tokens

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    @property
    def device(self):
        return next(self.parameters()).device


class GradientCheckpointingLayer(nn.Module):
    pass


class GenerationMixin:
    pass


class Cache:
    pass


class DynamicCache(Cache):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("the goldens run without a KV cache (use_cache=False)")


@dataclasses.dataclass
class ModelOutput:
    def __getitem__(self, i):
        if isinstance(i, str):
            return getattr(self, i)
        present = [getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None]
        return present[i]


@dataclasses.dataclass
class BaseModelOutput(ModelOutput):
    last_hidden_state: Any = None
    hidden_states: Any = None
    attentions: Any = None


@dataclasses.dataclass
class BaseModelOutputWithPast(ModelOutput):
    last_hidden_state: Any = None
    past_key_values: Any = None
    hidden_states: Any = None
    attentions: Any = None


@dataclasses.dataclass
class MoeCausalLMOutputWithPast(ModelOutput):
    loss: Any = None
    aux_loss: Any = None
    logits: Any = None
    past_key_values: Any = None
    hidden_states: Any = None
    attentions: Any = None
    router_logits: Any = None


def _default_rope_init(config, device=None):
    # transformers' modeling_rope_utils._compute_default_rope_parameters
    base = config.rope_theta
    partial_rotary_factor = getattr(config, "partial_rotary_factor", 1.0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * partial_rotary_factor)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
    return inv_freq, 1.0


def varlen_attention(module, query, key, value, attention_mask=None, dropout=0.0, scaling=None, cu_seq_lens_q=None,
                     cu_seq_lens_k=None, is_causal=False, **kwargs):
    """query/key/value [1, heads, T, head_dim] -> ([1, T, heads, head_dim], None)."""
    if is_causal or cu_seq_lens_q is None or not torch.equal(cu_seq_lens_q, cu_seq_lens_k):
        raise RuntimeError("the stand-in covers non-causal self-attention over cu_seqlens segments only")
    out = torch.empty_like(query)
    bounds = [int(x) for x in cu_seq_lens_q]
    for a, b in zip(bounds[:-1], bounds[1:]):
        q, k, v = query[:, :, a:b], key[:, :, a:b], value[:, :, a:b]
        w = torch.matmul(q, k.transpose(2, 3)) * scaling
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out[:, :, a:b] = torch.matmul(w, v)
    return out.transpose(1, 2).contiguous(), None


def create_causal_mask(config, input_embeds, attention_mask, cache_position, past_key_values, position_ids=None, **kw):
    batch, n_q = input_embeds.shape[0], input_embeds.shape[1]
    n_kv = n_q if past_key_values is None else int(cache_position[-1]) + 1
    q_pos = cache_position.view(-1, 1)
    k_pos = torch.arange(n_kv).view(1, -1)
    allowed = (k_pos <= q_pos).unsqueeze(0).expand(batch, -1, -1)
    if attention_mask is not None:
        allowed = allowed & attention_mask[:, None, :n_kv].bool()
    mask = torch.zeros(batch, 1, n_q, n_kv, dtype=input_embeds.dtype)
    mask.masked_fill_(~allowed.unsqueeze(1), torch.finfo(input_embeds.dtype).min)
    return mask


# ----------------------------------------------------------------------------------------- audio
def hertz_to_mel(freq, mel_scale="htk"):
    if mel_scale not in ["slaney", "htk", "kaldi"]:
        raise ValueError('mel_scale should be one of "htk", "slaney" or "kaldi".')
    if mel_scale == "htk":
        return 2595.0 * np.log10(1.0 + (freq / 700.0))
    elif mel_scale == "kaldi":
        return 1127.0 * np.log(1.0 + (freq / 700.0))
    min_log_hertz = 1000.0
    min_log_mel = 15.0
    logstep = 27.0 / np.log(6.4)
    mels = 3.0 * freq / 200.0
    if isinstance(freq, np.ndarray):
        log_region = freq >= min_log_hertz
        mels[log_region] = min_log_mel + np.log(freq[log_region] / min_log_hertz) * logstep
    elif freq >= min_log_hertz:
        mels = min_log_mel + np.log(freq / min_log_hertz) * logstep
    return mels


def mel_to_hertz(mels, mel_scale="htk"):
    if mel_scale not in ["slaney", "htk", "kaldi"]:
        raise ValueError('mel_scale should be one of "htk", "slaney" or "kaldi".')
    if mel_scale == "htk":
        return 700.0 * (np.power(10, mels / 2595.0) - 1.0)
    elif mel_scale == "kaldi":
        return 700.0 * (np.exp(mels / 1127.0) - 1.0)
    min_log_hertz = 1000.0
    min_log_mel = 15.0
    logstep = np.log(6.4) / 27.0
    freq = 200.0 * mels / 3.0
    if isinstance(mels, np.ndarray):
        log_region = mels >= min_log_mel
        freq[log_region] = min_log_hertz * np.exp(logstep * (mels[log_region] - min_log_mel))
    elif mels >= min_log_mel:
        freq = min_log_hertz * np.exp(logstep * (mels - min_log_mel))
    return freq


def _create_triangular_filter_bank(fft_freqs, filter_freqs):
    filter_diff = np.diff(filter_freqs)
    slopes = np.expand_dims(filter_freqs, 0) - np.expand_dims(fft_freqs, 1)
    down_slopes = -slopes[:, :-2] / filter_diff[:-1]
    up_slopes = slopes[:, 2:] / filter_diff[1:]
    return np.maximum(np.zeros(1), np.minimum(down_slopes, up_slopes))


def mel_filter_bank(num_frequency_bins, num_mel_filters, min_frequency, max_frequency, sampling_rate, norm=None,
                    mel_scale="htk", triangularize_in_mel_space=False):
    if norm is not None and norm != "slaney":
        raise ValueError('norm must be one of None or "slaney"')
    mel_min = hertz_to_mel(min_frequency, mel_scale=mel_scale)
    mel_max = hertz_to_mel(max_frequency, mel_scale=mel_scale)
    mel_freqs = np.linspace(mel_min, mel_max, num_mel_filters + 2)
    filter_freqs = mel_to_hertz(mel_freqs, mel_scale=mel_scale)
    if triangularize_in_mel_space:
        fft_bin_width = sampling_rate / (num_frequency_bins * 2)
        fft_freqs = hertz_to_mel(fft_bin_width * np.arange(num_frequency_bins), mel_scale=mel_scale)
        filter_freqs = mel_freqs
    else:
        fft_freqs = np.linspace(0, sampling_rate // 2, num_frequency_bins)
    mel_filters = _create_triangular_filter_bank(fft_freqs, filter_freqs)
    if norm is not None and norm == "slaney":
        enorm = 2.0 / (filter_freqs[2 : num_mel_filters + 2] - filter_freqs[:num_mel_filters])
        mel_filters *= np.expand_dims(enorm, 0)
    return mel_filters


class WhisperFeatureExtractor:
    """WhisperFeatureExtractor(feature_size, sampling_rate, hop_length, n_fft) as the Qwen3-ASR processor
    calls it: one waveform, padding "longest" (none), the torch path."""

    def __init__(self, feature_size=80, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400, **kwargs):
        self.feature_size, self.sampling_rate, self.hop_length, self.n_fft = feature_size, sampling_rate, hop_length, n_fft
        self.dither = 0.0
        self.mel_filters = mel_filter_bank(
            num_frequency_bins=1 + n_fft // 2, num_mel_filters=feature_size, min_frequency=0.0, max_frequency=8000.0,
            sampling_rate=sampling_rate, norm="slaney", mel_scale="slaney")

    def _torch_extract_fbank_features(self, waveform: np.ndarray, device: str = "cpu") -> np.ndarray:
        waveform = torch.from_numpy(waveform).to(device, torch.float32)
        window = torch.hann_window(self.n_fft, device=device)
        stft = torch.stft(waveform, self.n_fft, self.hop_length, window=window, return_complex=True)
        magnitudes = stft[..., :-1].abs() ** 2
        mel_filters = torch.from_numpy(self.mel_filters).to(device, torch.float32)
        mel_spec = mel_filters.T @ magnitudes
        log_spec = torch.clamp(mel_spec, min=1e-10).log10()
        if waveform.dim() == 2:
            max_val = log_spec.max(dim=2, keepdim=True)[0].max(dim=1, keepdim=True)[0]
            log_spec = torch.maximum(log_spec, max_val - 8.0)
        else:
            log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
        log_spec = (log_spec + 4.0) / 4.0
        if device != "cpu":
            log_spec = log_spec.detach().cpu()
        return log_spec.numpy()

    def __call__(self, wav: np.ndarray):
        """-> (input_features [1, n_mels, frames] float32, attention_mask [1, frames] int)"""
        wav = np.asarray(wav, dtype=np.float32)
        features = self._torch_extract_fbank_features(wav[None, :])
        sample_mask = np.ones((1, wav.shape[0]), dtype=np.int32)
        rescaled = sample_mask[:, :: self.hop_length]
        if sample_mask.shape[1] % self.hop_length != 0:
            rescaled = rescaled[:, :-1]
        return features.astype(np.float32), rescaled


# ----------------------------------------------------------------------------------------- tokenizer
PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


@lru_cache()
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    cs = [chr(n) for n in cs]
    return dict(zip(bs, cs))


def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


class Qwen2BPE:
    def __init__(self, vocab: dict, merges: list, added: dict):
        """vocab: token -> id; merges: ["a b", ...] in rank order; added: id -> (content, special)."""
        import regex
        self.encoder = dict(vocab)
        self.decoder = {v: k for k, v in self.encoder.items()}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.bpe_ranks = {tuple(m.split()): i for i, m in enumerate(merges)}
        self.cache = {}
        self.pat = regex.compile(PRETOKENIZE_REGEX)
        self.added = {content: (i, special) for i, (content, special) in added.items()}
        self.added_by_id = {i: (content, special) for i, (content, special) in added.items()}
        self.errors = "replace"

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                else:
                    new_word.extend(word[i:j])
                    i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            new_word = tuple(new_word)
            word = new_word
            if len(word) == 1:
                break
            else:
                pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def _tokenize(self, text):
        bpe_tokens = []
        for token in self.pat.findall(text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            bpe_tokens.extend(bpe_token for bpe_token in self.bpe(token).split(" "))
        return bpe_tokens

    def encode(self, text: str) -> list:
        text = unicodedata.normalize("NFC", text)
        ids = []
        pos = 0
        names = sorted(self.added, key=len, reverse=True)
        while pos < len(text):
            hit = None
            nxt = len(text)
            for name in names:  # the earliest added token, the longest at that place
                at = text.find(name, pos)
                if at != -1 and (at < nxt or (at == nxt and hit is not None and len(name) > len(hit))):
                    nxt, hit = at, name
            if nxt > pos:
                ids.extend(self.encoder[t] for t in self._tokenize(text[pos:nxt]))
            if hit is None:
                break
            ids.append(self.added[hit][0])
            pos = nxt + len(hit)
        return ids

    def convert_tokens_to_string(self, tokens):
        text = "".join(tokens)
        return bytearray([self.byte_decoder[c] for c in text]).decode("utf-8", errors=self.errors)

    def decode(self, ids, skip_special_tokens=True) -> str:
        sub_texts, current = [], []
        for i in ids:
            if i in self.added_by_id:
                content, special = self.added_by_id[i]
                if skip_special_tokens and special:
                    continue
                if current:
                    sub_texts.append(self.convert_tokens_to_string(current))
                    current = []
                sub_texts.append(content)
            else:
                current.append(self.decoder[i])
        if current:
            sub_texts.append(self.convert_tokens_to_string(current))
        return "".join(sub_texts)


def render_chat_template(template: str, messages: list, add_generation_prompt: bool) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt)


# ----------------------------------------------------------------------------------------- install
def install():
    """Registers the stand-in `transformers` modules (and librosa/soundfile, which the reference's
    inference utilities import for file loading only, and nagisa, which the forced aligner imports for
    Japanese)."""
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    class _Kwargs(dict):
        def __init_subclass__(cls, **kwargs):  # TypedDict's `total=` in the subclasses' headers
            pass

    class ProcessorMixin:
        def __init__(self, *args, **kwargs):
            pass

    class _AutoClass:  # AutoConfig/AutoModel/AutoProcessor: the fixtures build the reference's classes themselves
        @staticmethod
        def register(*args, **kwargs):
            pass

    module("transformers", __path__=[], AutoConfig=_AutoClass, AutoModel=_AutoClass, AutoProcessor=_AutoClass)
    module("transformers.activations", ACT2FN={"gelu": nn.GELU(), "silu": nn.SiLU(), "relu": nn.ReLU()})
    module("transformers.cache_utils", Cache=Cache, DynamicCache=DynamicCache)
    module("transformers.generation", GenerationMixin=GenerationMixin)
    module("transformers.integrations", use_kernel_forward_from_hub=lambda name: (lambda cls: cls))
    module("transformers.masking_utils", create_causal_mask=create_causal_mask)
    module("transformers.modeling_flash_attention_utils", FlashAttentionKwargs=_Kwargs)
    module("transformers.modeling_layers", GradientCheckpointingLayer=GradientCheckpointingLayer)
    module("transformers.modeling_outputs", BaseModelOutput=BaseModelOutput, BaseModelOutputWithPast=BaseModelOutputWithPast,
           MoeCausalLMOutputWithPast=MoeCausalLMOutputWithPast)
    module("transformers.modeling_rope_utils", ROPE_INIT_FUNCTIONS={"default": _default_rope_init},
           dynamic_rope_update=lambda f: f)
    module("transformers.modeling_utils", ALL_ATTENTION_FUNCTIONS={"flash_attention_2": varlen_attention},
           PreTrainedModel=PreTrainedModel)
    module("transformers.processing_utils", Unpack=Optional, ProcessingKwargs=_Kwargs, ProcessorMixin=ProcessorMixin)
    module("transformers.utils", auto_docstring=_identity_decorator, can_return_tuple=_identity_decorator,
           logging=types.SimpleNamespace(get_logger=lambda name: types.SimpleNamespace(
               warning=print, warning_once=print, info=lambda *a: None)), __path__=[])
    module("transformers.utils.deprecation", deprecate_kwarg=_identity_decorator)
    module("transformers.utils.generic", TransformersKwargs=_Kwargs, check_model_inputs=_identity_decorator)
    module("transformers.configuration_utils", PretrainedConfig=PretrainedConfig)
    module("transformers.audio_utils", AudioInput=Any)
    module("transformers.feature_extraction_utils", BatchFeature=dict)
    module("transformers.tokenization_utils_base", TextInput=str)
    for name in ("librosa", "soundfile"):
        module(name)

    def _no_nagisa(text):  # the forced aligner's Japanese word splitter (a tagger model Debian does not ship)
        raise NotImplementedError("nagisa is not available: Japanese is not among the fixtures' languages")

    module("nagisa", tagging=_no_nagisa)
