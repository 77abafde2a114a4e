"""ctypes declarations of include/transcribe.h, and where libtranscribe.so is found."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

c_bool, c_int, c_float, c_double, c_char_p, c_void_p, c_size_t, c_int32, c_int64 = (
    ctypes.c_bool, ctypes.c_int, ctypes.c_float, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p,
    ctypes.c_size_t, ctypes.c_int32, ctypes.c_int64)

STATUS_NAMES = ["OK", "INVALID_ARG", "FILE_NOT_FOUND", "FILE_READ", "BAD_GGUF", "UNSUPPORTED_ARCH", "MISSING_TENSOR",
                "BAD_SHAPE", "AUDIO_DECODE", "BACKEND", "OOM", "ABORTED", "INPUT_TOO_LONG", "OUTPUT_TRUNCATED",
                "INTERNAL"]
OK, OUTPUT_TRUNCATED = 0, STATUS_NAMES.index("OUTPUT_TRUNCATED")


class LoadParams(ctypes.Structure):
    _fields_ = [("backend", c_int), ("device", c_int), ("use_mmap", c_bool), ("cpu_repack", c_bool)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("architecture", c_char_p), ("name", c_char_p), ("backend", c_char_p), ("sample_rate", c_int),
                ("max_audio_ms", c_int), ("n_vocab", c_int), ("n_languages", c_int),
                ("languages", ctypes.POINTER(c_char_p)), ("load_ms", c_double), ("word_timestamps", c_bool),
                ("language_prompt", c_bool), ("token_budget", c_bool), ("speculative", c_bool),
                ("translation", c_bool), ("beam_search", c_bool), ("timestamp_prompt", c_bool),
                ("transducer_head", c_bool), ("ctc_head", c_bool), ("hotwords", c_bool),
                ("text_prompt", c_bool), ("language_detection", c_bool), ("n_att_contexts", c_int),
                ("att_contexts", ctypes.POINTER(c_int32)), ("native_streaming", c_bool), ("end_of_turn_token", c_int32),
                ("forced_aligner", c_bool)]


AbortCallback = ctypes.CFUNCTYPE(c_bool, c_void_p)
ProgressCallback = ctypes.CFUNCTYPE(None, c_float, c_void_p)


class SessionParams(ctypes.Structure):
    _fields_ = [("n_threads", c_int), ("kv_type", c_int), ("n_ctx", c_int), ("abort_callback", AbortCallback),
                ("abort_user_data", c_void_p), ("progress_callback", ProgressCallback),
                ("progress_user_data", c_void_p), ("n_batch", c_int)]


class Audio(ctypes.Structure):
    _fields_ = [("samples", ctypes.POINTER(c_float)), ("n_samples", c_size_t), ("sample_rate", c_int)]


class VadParams(ctypes.Structure):
    _fields_ = [("threshold", c_float), ("neg_threshold", c_float), ("min_speech_ms", c_int),
                ("min_silence_ms", c_int), ("speech_pad_ms", c_int), ("max_speech_s", c_float)]


TokenCallback = ctypes.CFUNCTYPE(None, c_int32, ctypes.POINTER(ctypes.c_char), c_size_t, c_void_p)


class DiarizeParams(ctypes.Structure):
    _fields_ = [("onset", c_double), ("offset", c_double), ("pad_onset", c_double), ("pad_offset", c_double),
                ("min_duration_on", c_double), ("min_duration_off", c_double), ("mode", c_int),
                ("spkcache_len", c_int), ("fifo_len", c_int), ("spkcache_update_period", c_int), ("chunk_len", c_int),
                ("chunk_left_context", c_int), ("chunk_right_context", c_int)]


DECODER_TYPES = {None: 0, "tdt": 1, "rnnt": 1, "ctc": 2}  # transcribe_decoder_type


class RunParams(ctypes.Structure):
    _fields_ = [("language", c_char_p), ("max_new_tokens", c_int), ("chunk_ms", c_int), ("ignore_eos", c_bool),
                ("vad", c_void_p), ("vad_params", VadParams), ("token_callback", TokenCallback),
                ("token_user_data", c_void_p), ("abort_callback", AbortCallback), ("abort_user_data", c_void_p),
                ("draft", c_void_p), ("draft_ids", ctypes.POINTER(c_int32)), ("n_draft_ids", c_int),
                ("target_language", c_char_p), ("no_punctuation", c_bool), ("timestamps", c_bool), ("beam_size", c_int),
                ("diarizer", c_void_p), ("diarize_params", DiarizeParams), ("decoder_type", c_int),
                ("hotwords", c_char_p), ("hotword_weight", c_float), ("aligner", c_void_p),
                ("prompt", c_char_p), ("no_timestamps", c_bool), ("no_condition_on_previous_text", c_bool),
                ("temperatures", ctypes.POINTER(c_float)), ("n_temperatures", c_int), ("best_of", c_int),
                ("seed", ctypes.c_uint64), ("att_context_size", ctypes.POINTER(c_int32))]


class Timings(ctypes.Structure):
    _fields_ = [("load_ms", c_double), ("mel_ms", c_double), ("encode_ms", c_double), ("prefill_ms", c_double),
                ("decode_ms", c_double), ("n_prefill_tokens", c_int), ("n_decode_tokens", c_int),
                ("vad_ms", c_double), ("draft_ms", c_double), ("n_decode_steps", c_int),
                ("n_drafted_tokens", c_int), ("n_accepted_tokens", c_int), ("n_verify_steps", c_int), ("diarize_ms", c_double)]


class Word(ctypes.Structure):
    _fields_ = [("text", c_char_p), ("t0_ms", c_int64), ("t1_ms", c_int64), ("speaker", c_int)]


def _candidates() -> list[str]:
    here = Path(__file__).resolve().parent
    found = [os.environ.get("TRANSCRIBE_LIBRARY", "")]
    found += [str(p) for p in sorted(here.glob("libtranscribe.so*"))]           # bundled by setup.py
    checkout = here.parent.parent.parent                                          # bindings/python/transcribe
    found += [str(checkout / d / "src" / "libtranscribe.so") for d in ("build", "build-asan")]
    found += ["libtranscribe.so", "libtranscribe.so.0"]                            # cmake --install (ldconfig)
    return [f for f in found if f]


def _load() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path)  # CDLL: every call releases the GIL
        except OSError as exc:
            errors.append(f"{path}: {exc}")
    raise ImportError("libtranscribe.so not found (build the project, `cmake --install build`, or set "
                      "TRANSCRIBE_LIBRARY): " + "; ".join(errors or ["no candidate exists"]))


lib = _load()


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


P = ctypes.POINTER
status_string = _fn("transcribe_status_string", c_char_p, c_int)
last_error = _fn("transcribe_last_error", c_char_p)
version = _fn("transcribe_version", c_char_p)
load_params_init = _fn("transcribe_load_params_init", LoadParams)
backend_from_name = _fn("transcribe_backend_from_name", c_int, c_char_p, P(c_int))
model_load = _fn("transcribe_model_load", c_int, c_char_p, P(LoadParams), P(c_void_p))
model_free = _fn("transcribe_model_free", None, c_void_p)
model_get_info = _fn("transcribe_model_get_info", c_int, c_void_p, P(ModelInfo))
session_params_init = _fn("transcribe_session_params_init", SessionParams)
session_create = _fn("transcribe_session_create", c_int, c_void_p, P(SessionParams), P(c_void_p))
session_free = _fn("transcribe_session_free", None, c_void_p)
audio_load = _fn("transcribe_audio_load", c_int, c_char_p, c_int, P(Audio))
audio_from_pcm = _fn("transcribe_audio_from_pcm", c_int, P(c_float), c_size_t, c_int, c_int, c_int, P(Audio))
audio_free = _fn("transcribe_audio_free", None, P(Audio))
vad_model_load = _fn("transcribe_vad_model_load", c_int, c_char_p, P(c_void_p))
vad_model_free = _fn("transcribe_vad_model_free", None, c_void_p)
run_params_init = _fn("transcribe_run_params_init", RunParams)
run = _fn("transcribe_run", c_int, c_void_p, P(c_float), c_size_t, P(RunParams), P(c_void_p))
align = _fn("transcribe_align", c_int, c_void_p, P(c_float), c_size_t, c_char_p, c_char_p, P(c_void_p))
result_text = _fn("transcribe_result_text", c_char_p, c_void_p)
result_truncated = _fn("transcribe_result_truncated", c_bool, c_void_p)
result_n_tokens = _fn("transcribe_result_n_tokens", c_int, c_void_p)
result_tokens = _fn("transcribe_result_tokens", P(c_int32), c_void_p)
result_n_segments = _fn("transcribe_result_n_segments", c_int, c_void_p)
segment_t0 = _fn("transcribe_result_segment_t0_ms", c_int64, c_void_p, c_int)
segment_t1 = _fn("transcribe_result_segment_t1_ms", c_int64, c_void_p, c_int)
segment_text = _fn("transcribe_result_segment_text", c_char_p, c_void_p, c_int)
segment_truncated = _fn("transcribe_result_segment_truncated", c_bool, c_void_p, c_int)
segment_n_tokens = _fn("transcribe_result_segment_n_tokens", c_int, c_void_p, c_int)
segment_tokens = _fn("transcribe_result_segment_tokens", P(c_int32), c_void_p, c_int)
result_n_words = _fn("transcribe_result_n_words", c_int, c_void_p, c_int)
get_word = _fn("transcribe_get_word", c_int, c_void_p, c_int, c_int, P(Word))
result_free = _fn("transcribe_result_free", None, c_void_p)
diarize_params_init = _fn("transcribe_diarize_params_init", DiarizeParams)
diarize_params_from_yaml = _fn("transcribe_diarize_params_from_yaml", c_int, c_char_p, P(DiarizeParams))
diarizer_load = _fn("transcribe_diarizer_load", c_int, c_char_p, c_int, P(c_void_p))
diarizer_free = _fn("transcribe_diarizer_free", None, c_void_p)
segment_speaker = _fn("transcribe_result_segment_speaker", c_int, c_void_p, c_int)
result_language = _fn("transcribe_result_language", c_char_p, c_void_p)


class SegmentDecode(ctypes.Structure):
    _fields_ = [("seek", c_int), ("temperature", c_float), ("avg_logprob", c_double), ("compression_ratio", c_double),
                ("no_speech_prob", c_float)]


segment_decode = _fn("transcribe_result_segment_decode", c_int, c_void_p, c_int, ctypes.POINTER(SegmentDecode))
session_get_timings = _fn("transcribe_session_get_timings", c_int, c_void_p, P(Timings))


class StreamParams(ctypes.Structure):
    _fields_ = [("sample_rate", c_int), ("turn_detection", c_bool), ("threshold", c_float),
                ("prefix_padding_ms", c_int), ("silence_duration_ms", c_int), ("partial_interval_ms", c_int),
                ("end_of_turn", c_bool)]


class StreamEvent(ctypes.Structure):
    _fields_ = [("type", c_int), ("item", c_int64), ("audio_start_ms", c_int64), ("audio_end_ms", c_int64),
                ("text", c_char_p)]


STREAM_EVENTS = ["speech_started", "speech_stopped", "committed", "delta", "completed"]
stream_params_init = _fn("transcribe_stream_params_init", StreamParams)
stream_create = _fn("transcribe_stream_create", c_int, c_void_p, P(StreamParams), P(c_void_p))
stream_create_native = _fn("transcribe_stream_create_native", c_int, c_void_p, c_void_p, P(StreamParams), P(RunParams),
                           P(c_void_p))
stream_free = _fn("transcribe_stream_free", None, c_void_p)
stream_push = _fn("transcribe_stream_push", c_int, c_void_p, P(c_float), c_size_t)
stream_commit = _fn("transcribe_stream_commit", c_int, c_void_p)
stream_clear = _fn("transcribe_stream_clear", c_int, c_void_p)
stream_decode = _fn("transcribe_stream_decode", c_int, c_void_p, c_void_p, c_void_p, P(RunParams))
stream_next_event = _fn("transcribe_stream_next_event", c_bool, c_void_p, P(StreamEvent))
