"""Python face of transcribe (speech to text on ggml): the C library through ctypes.

    import transcribe
    model = transcribe.Model("parakeet.gguf", threads=4)
    result = model.transcribe("talk.flac")            # or a float32 array of mono samples
    print(result.text, result.words[:3], result.timings)

A Model holds the weights (shared by every thread); each Python thread that transcribes gets its own
session (the C library's per-caller state), created on first use. Runs release the GIL (ctypes calls
into the library do), so threads transcribe in parallel. Failures raise TranscribeError with the
library's status name and its one-line cause."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Union

from . import _native as N

__all__ = ["Model", "Result", "Segment", "Word", "TranscribeError", "version"]


class TranscribeError(RuntimeError):
    """A library failure: .status is the status name (e.g. "FILE_NOT_FOUND"), .message its cause."""

    def __init__(self, status: int, message: str):
        self.code = status
        self.status = N.STATUS_NAMES[status] if 0 <= status < len(N.STATUS_NAMES) else str(status)
        self.message = message
        super().__init__(f"{self.status}: {message}" if message else self.status)


def _check(status: int) -> None:
    if status != N.OK:
        raise TranscribeError(status, (N.last_error() or b"").decode("utf-8", "replace"))


def version() -> str:
    return N.version().decode()


def _log_to_python(level, message, user_data):
    import logging
    logging.getLogger("transcribe").log((logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)[min(level, 3)],
                                        message.decode("utf-8", "replace").rstrip())


# The library's log goes to Python's logging (logger "transcribe"), not straight to stderr: failures
# arrive as exceptions, and applications choose what to show.
_log_callback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(_log_to_python)
N.lib.transcribe_log_set.argtypes = [type(_log_callback), ctypes.c_void_p]
N.lib.transcribe_log_set(_log_callback, None)
__import__("logging").getLogger("transcribe").addHandler(__import__("logging").NullHandler())


@dataclass
class Word:
    word: str
    t0_ms: int
    t1_ms: int
    speaker: int = -1  # with diarize=: the diarizer's speaker index (0 speaks first)


@dataclass
class Segment:
    t0_ms: int
    t1_ms: int
    text: str
    tokens: list
    truncated: bool = False
    words: list = field(default_factory=list)
    speaker: int = -1  # with diarize=: the diarizer's speaker index (0 speaks first)
    decode: Optional[dict] = None  # Whisper: its window's seek, temperature, avg_logprob, compression_ratio, no_speech_prob


@dataclass
class Result:
    text: str
    segments: list
    words: list      # empty unless the model gives word times
    tokens: list
    timings: dict
    truncated: bool = False
    language: str = ""  # where the model tells it (Whisper: given or detected)


def _decode_of(r, i: int) -> Optional[dict]:
    d = N.SegmentDecode()
    if N.segment_decode(r, i, ctypes.byref(d)) != N.OK:
        return None
    return {name: getattr(d, name) for name, _ in N.SegmentDecode._fields_}


def _words(r, segment: int) -> list:
    out, w = [], N.Word()
    for i in range(N.result_n_words(r, segment)):
        _check(N.get_word(r, segment, i, ctypes.byref(w)))
        out.append(Word(w.text.decode("utf-8", "replace"), w.t0_ms, w.t1_ms, w.speaker))
    return out


def _result(r, timings: N.Timings) -> Result:
    def ids(p, n):
        return [p[i] for i in range(n)]
    segments = [Segment(N.segment_t0(r, i), N.segment_t1(r, i), N.segment_text(r, i).decode("utf-8", "replace"),
                        ids(N.segment_tokens(r, i), N.segment_n_tokens(r, i)), bool(N.segment_truncated(r, i)),
                        _words(r, i), N.segment_speaker(r, i), _decode_of(r, i))
                for i in range(N.result_n_segments(r))]
    return Result(text=N.result_text(r).decode("utf-8", "replace"), segments=segments, words=_words(r, -1),
                  tokens=ids(N.result_tokens(r), N.result_n_tokens(r)),
                  timings={name: getattr(timings, name) for name, _ in N.Timings._fields_},
                  truncated=bool(N.result_truncated(r)), language=N.result_language(r).decode())


def _taken_result(session, r) -> Result:
    """The native result R as a Result, with SESSION's timings of the run that made it; R is freed."""
    try:
        t = N.Timings()
        N.session_get_timings(session, ctypes.byref(t))
        return _result(r, t)
    finally:
        N.result_free(r)


class Model:
    """Weights loaded once. threads: CPU threads per run (<= 0: all cores); backend: auto, cpu, cuda,
    vulkan, metal."""

    def __init__(self, path: Union[str, Path], threads: int = 0, backend: str = "auto", kv_type: str = "f16"):
        lp = N.load_params_init()
        b = ctypes.c_int()
        _check(N.backend_from_name(backend.encode(), ctypes.byref(b)))
        lp.backend = b.value
        handle = ctypes.c_void_p()
        _check(N.model_load(str(path).encode(), ctypes.byref(lp), ctypes.byref(handle)))
        self._handle = handle
        self._threads, self._kv = threads, {"f16": 0, "f32": 1}[kv_type]
        self._local = threading.local()
        self._sessions = []  # every thread's, freed with the model
        self._lock = threading.Lock()
        self._vad = {}
        self._drafts = {}  # draft and aligner models loaded here by path, freed after the sessions that ran them
        self._diarizers = {}  # diarizers loaded here by path
        info = N.ModelInfo()
        _check(N.model_get_info(handle, ctypes.byref(info)))
        self.architecture = info.architecture.decode()
        self.name = info.name.decode()
        self.sample_rate = info.sample_rate
        self.languages = [info.languages[i].decode() for i in range(info.n_languages)]
        self.word_timestamps = bool(info.word_timestamps)
        self.speculative = bool(info.speculative)
        self.translation = bool(info.translation)
        self.beam_search = bool(info.beam_search)
        self.timestamp_prompt = bool(info.timestamp_prompt)
        self.transducer_head = bool(info.transducer_head)
        self.ctc_head = bool(info.ctc_head)
        self.hotwords = bool(info.hotwords)  # transcribe(hotwords=...) boosts its decoding
        self.text_prompt = bool(info.text_prompt)  # transcribe(prompt=...) is read as context
        self.language_detection = bool(info.language_detection)  # transcribe(language="auto") detects it (Whisper)
        # Cache-aware streaming models: the (left, right) attention contexts they were trained with, the default
        # first (transcribe(att_context_size=...)); whether they transcribe as they hear; their <EOU> id or -1.
        self.att_contexts = [(info.att_contexts[2 * i], info.att_contexts[2 * i + 1]) for i in range(info.n_att_contexts)]
        self.native_streaming = bool(info.native_streaming)
        self.end_of_turn_token = int(info.end_of_turn_token)
        self.forced_aligner = bool(info.forced_aligner)  # only an align_with= model (Qwen3-ForcedAligner)

    def _session(self):
        s = getattr(self._local, "session", None)
        if s is None:
            sp = N.session_params_init()
            sp.n_threads, sp.kv_type = self._threads, self._kv
            s = ctypes.c_void_p()
            _check(N.session_create(self._handle, ctypes.byref(sp), ctypes.byref(s)))
            self._local.session = s
            with self._lock:
                self._sessions.append(s)
        return s

    def _vad_model(self, path):
        with self._lock:
            if path not in self._vad:
                h = ctypes.c_void_p()
                _check(N.vad_model_load(str(path).encode(), ctypes.byref(h)))
                self._vad[path] = h
            return self._vad[path]

    def _companion_model(self, draft):
        if isinstance(draft, Model):
            if draft._handle is None:
                raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "the draft or aligner model was closed")
            with self._lock:
                self._drafts.setdefault(id(draft), draft)  # kept open while this model's sessions may run it
            return draft._handle
        with self._lock:
            key = str(draft)
            if key not in self._drafts:
                lp = N.load_params_init()
                h = ctypes.c_void_p()
                _check(N.model_load(key.encode(), ctypes.byref(lp), ctypes.byref(h)))
                self._drafts[key] = h
            return self._drafts[key]

    def _diarizer(self, path):
        with self._lock:
            key = str(path)
            if key not in self._diarizers:
                h = ctypes.c_void_p()
                _check(N.diarizer_load(key.encode(), self._threads, ctypes.byref(h)))
                self._diarizers[key] = h
            return self._diarizers[key]

    def transcribe(self, audio: Union[str, Path, Sequence[float]], sample_rate: int = 16000,
                   max_new_tokens: int = 256, vad: Optional[Union[str, Path]] = None,
                   language: Optional[str] = None, draft: Optional[Union[str, Path, "Model"]] = None,
                   translate_to: Optional[str] = None, beam_size: int = 0, punctuation: bool = True,
                   timestamps: bool = False, diarize: Optional[Union[str, Path]] = None,
                   diarize_postprocessing: Optional[Union[str, Path]] = None,
                   decoder_type: Optional[str] = None, hotwords: Optional[Union[str, Sequence[str]]] = None,
                   hotword_weight: float = 1.0, align_with: Optional[Union[str, Path, "Model"]] = None,
                   prompt: Optional[str] = None, no_timestamps: bool = False,
                   condition_on_previous_text: bool = True, temperature: Union[float, Sequence[float]] = 0.0,
                   best_of: int = 0, seed: int = 0, att_context_size: Optional[Sequence[int]] = None) -> Result:
        """audio: a file (wav, flac, ogg, mp3, ...) or mono float samples at sample_rate (a numpy array, an
        array('f') or any sequence of numbers). vad: a Silero VAD GGUF for speech-aware long audio.
        language: the speech's language (one of .languages); translate_to: write the text in another
        (models whose .translation is true); beam_size: NeMo's beam search over that many hypotheses
        (models whose .beam_search is true; 0: greedy); punctuation: False asks for text without
        punctuation and capitals; timestamps: ask the model for its own word times (.timestamp_prompt).
        draft: speculative decoding (models whose .speculative is true) with a faster model's transcript
        (a GGUF path, loaded once, or an open Model, kept open by this one): the same result, sooner.
        diarize: a Sortformer GGUF (loaded once): each segment and word gets .speaker (word-timed models:
        each word the speaker over most of it; others: transcribed speaker turn by turn);
        diarize_postprocessing: NeMo's post-processing YAML for its segments. decoder_type: "tdt" (or "rnnt")
        or "ctc", the head that decodes on a hybrid Parakeet (.transducer_head and .ctc_head; default: the
        transducer). hotwords: phrases to favour (models whose .hotwords is true: Parakeet), a list or a
        comma-separated string, boosted by NeMo's phrase-boosting tree with weight hotword_weight (NeMo's
        boosting_tree_alpha). align_with: a model with a CTC head (Parakeet CTC or a hybrid; a GGUF path,
        loaded once, or an open Model) that gives the transcript's words and segments their times as NeMo
        Forced Aligner does, or a forced aligner (.forced_aligner: Qwen3-ForcedAligner), for any model. prompt: context (models whose .text_prompt is true: Canary-Qwen),
        text its chat prompt carries before the instruction, as OpenAI's prompt; Whisper's initial_prompt.
        Whisper (openai-whisper's transcribe() arguments): language None or "auto" detects it; timestamps=True
        is word_timestamps=True; no_timestamps decodes without timestamp tokens; condition_on_previous_text;
        temperature: one (no fallback) or the sequence the fallback tries, sampling above 0 with best_of
        samples from a generator seeded with seed. att_context_size: (left, right), one of .att_contexts
        (cache-aware streaming models; default: the first)."""
        if self._handle is None:
            raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "the model was closed")
        a = self._audio(audio, sample_rate)
        try:
            rp = N.run_params_init()
            rp.max_new_tokens = max_new_tokens
            rp.language = language.encode() if language else None
            rp.target_language = translate_to.encode() if translate_to else None
            rp.beam_size = int(beam_size)
            rp.no_punctuation = not punctuation
            rp.timestamps = bool(timestamps)
            if decoder_type not in N.DECODER_TYPES:
                raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"),
                                      f"decoder_type must be tdt, rnnt or ctc, not {decoder_type!r}")
            rp.decoder_type = N.DECODER_TYPES[decoder_type]
            if hotwords:
                phrases = hotwords.split(",") if isinstance(hotwords, str) else list(hotwords)
                rp.hotwords = "\n".join(p.replace("\n", " ") for p in phrases).encode()
            rp.hotword_weight = float(hotword_weight)
            rp.prompt = prompt.encode() if prompt else None
            rp.no_timestamps = bool(no_timestamps)
            rp.no_condition_on_previous_text = not condition_on_previous_text
            temps = [float(temperature)] if isinstance(temperature, (int, float)) else [float(t) for t in temperature]
            temps_array = (ctypes.c_float * len(temps))(*temps)  # kept alive until the run returns
            rp.temperatures = ctypes.cast(temps_array, ctypes.POINTER(ctypes.c_float))
            rp.n_temperatures = len(temps)
            rp.best_of = int(best_of)
            rp.seed = int(seed)
            if att_context_size is not None:
                context = (ctypes.c_int32 * 2)(*[int(v) for v in att_context_size][:2])  # alive until the run returns
                rp.att_context_size = ctypes.cast(context, ctypes.POINTER(ctypes.c_int32))
            if vad is not None:
                rp.vad = self._vad_model(str(vad))
            if draft is not None:
                rp.draft = self._companion_model(draft)
            if align_with is not None:
                rp.aligner = self._companion_model(align_with)
            if diarize is not None:
                rp.diarizer = self._diarizer(diarize)
                if diarize_postprocessing is not None:
                    _check(N.diarize_params_from_yaml(str(diarize_postprocessing).encode(), ctypes.byref(rp.diarize_params)))
            session, r = self._session(), ctypes.c_void_p()
            status = N.run(session, a.samples, a.n_samples, ctypes.byref(rp), ctypes.byref(r))
        finally:
            N.audio_free(ctypes.byref(a))
        if status not in (N.OK, N.OUTPUT_TRUNCATED):
            _check(status)
        return _taken_result(session, r)

    def _audio(self, audio, sample_rate) -> N.Audio:
        """AUDIO (a file, or samples at SAMPLE_RATE) as mono samples at the model's rate; free with audio_free."""
        a = N.Audio()
        if isinstance(audio, (str, Path)):
            _check(N.audio_load(str(audio).encode(), self.sample_rate, ctypes.byref(a)))
        else:
            pointer, n, keep = _float32(audio)
            _check(N.audio_from_pcm(pointer, n, int(sample_rate), 1, self.sample_rate, ctypes.byref(a)))
            del keep
        return a

    def align(self, audio: Union[str, Path, Sequence[float]], text: str, language: Optional[str] = None,
              sample_rate: int = 16000) -> Result:
        """TEXT (a script, lyrics, a transcript) timed in AUDIO by this model, which must be an aligner
        (.forced_aligner: Qwen3-ForcedAligner, as its align(audio, text, language) does; or .ctc_head: NeMo
        Forced Aligner's way). The Result's text is TEXT; its words and segments carry the times."""
        if self._handle is None:
            raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "the model was closed")
        a = self._audio(audio, sample_rate)
        try:
            session, r = self._session(), ctypes.c_void_p()
            _check(N.align(session, a.samples, a.n_samples, text.encode(), language.encode() if language else None,
                           ctypes.byref(r)))
        finally:
            N.audio_free(ctypes.byref(a))
        return _taken_result(session, r)

    def live(self, sample_rate: int = 16000, vad: Optional[Union[str, Path]] = None,
             turn_detection: Optional[str] = "server_vad", threshold: float = 0.5, prefix_padding_ms: int = 300,
             silence_duration_ms: int = 500, att_context_size: Optional[Sequence[int]] = None) -> "LiveStream":
        """Live transcription of audio pushed as it comes (LiveStream), with the Realtime API's turns:
        turn_detection "server_vad" (turns from the Silero VAD GGUF vad, with threshold, prefix_padding_ms,
        silence_duration_ms), "semantic_vad" (a turn ends where an end-of-utterance model says so:
        .end_of_turn_token) or None (turns by commit() alone). A model that transcribes as it hears
        (.native_streaming) runs natively, a delta per step, on a session of the stream's own
        (att_context_size: one of .att_contexts); any other re-transcribes each turn, with deltas of the
        words two hearings agree on while it is spoken."""
        if self._handle is None:
            raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "the model was closed")
        if turn_detection not in ("server_vad", "semantic_vad", None):
            raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"),
                                  f"turn_detection must be server_vad, semantic_vad or None, not {turn_detection!r}")
        if turn_detection == "server_vad" and vad is None:
            raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "server_vad turns need vad= (a Silero VAD GGUF)")
        return LiveStream(self, int(sample_rate), self._vad_model(str(vad)) if vad is not None else None,
                          turn_detection, float(threshold), int(prefix_padding_ms), int(silence_duration_ms),
                          att_context_size)

    def close(self) -> None:
        """Frees the sessions and the weights (also done when the model is garbage-collected)."""
        if getattr(self, "_handle", None) is None:
            return
        for s in self._sessions:
            N.session_free(s)
        for h in self._vad.values():
            N.vad_model_free(h)
        for d in self._drafts.values():
            if not isinstance(d, Model):  # another Model's weights stay its own to free
                N.model_free(d)
        for d in self._diarizers.values():
            N.diarizer_free(d)
        N.model_free(self._handle)
        self._handle, self._sessions, self._vad, self._drafts, self._diarizers = None, [], {}, {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class LiveEvent:
    """type: speech_started, speech_stopped, committed, delta (text: words to append to the turn's
    partial transcript) or completed (text: the turn's transcript); item: the turn, 0, 1, ...; audio_start_ms,
    audio_end_ms: the turn's audio in the stream (a delta's end: the audio heard)."""

    def __init__(self, type: str, item: int, audio_start_ms: int, audio_end_ms: int, text: str):
        self.type, self.item, self.audio_start_ms, self.audio_end_ms, self.text = type, item, audio_start_ms, audio_end_ms, text

    def __repr__(self):
        return (f"LiveEvent({self.type!r}, item={self.item}, {self.audio_start_ms}-{self.audio_end_ms} ms"
                f"{', ' + repr(self.text) if self.text else ''})")


class LiveStream:
    """Model.live()'s stream: push() samples as they come, commit() to end a turn, clear() to forget it;
    each returns the events they caused, in order. close() (or with) frees it."""

    def __init__(self, model, sample_rate, vad, turn_detection, threshold, prefix_padding_ms, silence_duration_ms,
                 att_context_size):
        self._model, self._handle, self._session = model, None, None
        p = N.stream_params_init()
        p.sample_rate = sample_rate
        p.turn_detection = turn_detection == "server_vad"
        p.end_of_turn = turn_detection == "semantic_vad"
        p.threshold, p.prefix_padding_ms, p.silence_duration_ms = threshold, prefix_padding_ms, silence_duration_ms
        self._rp = N.run_params_init()
        if att_context_size is not None:
            self._context = (ctypes.c_int32 * 2)(*[int(v) for v in att_context_size][:2])
            self._rp.att_context_size = ctypes.cast(self._context, ctypes.POINTER(ctypes.c_int32))
        handle = ctypes.c_void_p()
        if model.native_streaming:
            sp = N.session_params_init()
            sp.n_threads, sp.kv_type = model._threads, model._kv
            self._session = ctypes.c_void_p()
            _check(N.session_create(model._handle, ctypes.byref(sp), ctypes.byref(self._session)))
            status = N.stream_create_native(self._session, vad, ctypes.byref(p), ctypes.byref(self._rp), ctypes.byref(handle))
        else:
            if turn_detection == "semantic_vad":
                raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"),
                                      "semantic_vad needs a model that says where an utterance ends (.end_of_turn_token)")
            status = N.stream_create(vad, ctypes.byref(p), ctypes.byref(handle))
        if status != N.OK:
            self.close()
            _check(status)
        self._handle = handle

    def _events(self):
        session = None if self._session is not None else self._model._session()
        status = N.stream_decode(self._handle, session, None, ctypes.byref(self._rp))
        if status not in (N.OK, N.OUTPUT_TRUNCATED):
            _check(status)
        out, e = [], N.StreamEvent()
        while N.stream_next_event(self._handle, ctypes.byref(e)):
            out.append(LiveEvent(N.STREAM_EVENTS[e.type], e.item, e.audio_start_ms, e.audio_end_ms,
                                 (e.text or b"").decode("utf-8", "replace")))
        return out

    def _live(self):
        if self._handle is None:
            raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "the live stream was closed")
        return self._handle

    def push(self, samples: Sequence[float]) -> list:
        """Mono samples at the stream's rate (a numpy array, an array('f') or any sequence of numbers)."""
        pointer, n, keep = _float32(samples)
        _check(N.stream_push(self._live(), pointer, n))
        del keep
        return self._events()

    def commit(self) -> list:
        """The audio since the last turn (or the open turn) becomes a turn now, transcribed at once."""
        _check(N.stream_commit(self._live()))
        return self._events()

    def clear(self) -> list:
        _check(N.stream_clear(self._live()))
        return self._events()

    def close(self) -> None:
        if self._handle is not None:
            N.stream_free(self._handle)
            self._handle = None
        if self._session is not None:
            N.session_free(self._session)
            self._session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def _float32(samples):
    """(pointer, count, owner) of the samples as contiguous float32: numpy arrays are used in place when they
    already are float32 and contiguous."""
    float_p = ctypes.POINTER(ctypes.c_float)
    try:
        import numpy as np
        if isinstance(samples, np.ndarray):
            if samples.ndim != 1:
                raise TranscribeError(N.STATUS_NAMES.index("INVALID_ARG"), "samples must be one-dimensional (mono)")
            arr = np.ascontiguousarray(samples, dtype=np.float32)
            return arr.ctypes.data_as(float_p), arr.size, arr
    except ImportError:
        pass
    import array
    buf = samples if isinstance(samples, array.array) and samples.typecode == "f" else array.array("f", samples)
    address, n = buf.buffer_info()
    return ctypes.cast(address, float_p), n, buf
