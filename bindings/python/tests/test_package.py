"""The Python package against the CLI's JSON (same library, same settings) and the fixtures' goldens."""
import json
import subprocess
import threading
import wave

import pytest

import transcribe

CANARY_CLIPS = ["jfk", "jfk_0p7s", "jfk_div8", "tone_noise_3s"]
PARAKEET_CLIPS = ["jfk", "jfk_div8", "tone_noise_3s"]


def cli_json(paths, model, audio, *extra):
    r = subprocess.run([str(paths["cli"]), "-m", str(model), "--json", "--threads", "2", *extra, str(audio)],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_canary_text_and_tokens_equal_the_cli(paths):
    model = transcribe.Model(paths["models"] / "canary-qwen-tiny-f32.gguf", threads=2)
    assert (model.architecture, model.word_timestamps, model.languages) == ("canary_qwen", False, ["en"])
    for clip in CANARY_CLIPS:
        audio = paths["canary"] / "audio" / f"{clip}.wav"
        want = cli_json(paths, model_path(paths, "canary-qwen-tiny-f32.gguf"), audio, "--max-new-tokens", "16")
        got = model.transcribe(audio, max_new_tokens=16)
        assert (got.text, got.tokens, got.truncated) == (want["text"], want["tokens"], want["truncated"]), clip
        assert [(s.t0_ms, s.t1_ms, s.text) for s in got.segments] == \
               [(s["t0_ms"], s["t1_ms"], s["text"]) for s in want["segments"]]
        assert got.words == []
        assert got.timings["encode_ms"] > 0 and got.timings["n_decode_tokens"] > 0


def test_draft_gives_the_cli_s_result(paths):
    """draft= as a path (loaded once) or an open Model: the same text and tokens as the CLI's --draft run and
    as a plain run; the timings count the draft. A model that cannot take a draft refuses it."""
    model = transcribe.Model(paths["models"] / "canary-qwen-tiny-f32.gguf", threads=2)
    parakeet_path = paths["models"] / "parakeet-tdt-tiny-f32.gguf"
    parakeet = transcribe.Model(parakeet_path, threads=2)
    assert model.speculative and not parakeet.speculative
    for clip in CANARY_CLIPS[:2]:
        audio = paths["canary"] / "audio" / f"{clip}.wav"
        want = cli_json(paths, model_path(paths, "canary-qwen-tiny-f32.gguf"), audio, "--max-new-tokens", "16",
                        "--draft", str(parakeet_path))
        plain = model.transcribe(audio, max_new_tokens=16)
        for draft in (parakeet_path, parakeet):
            got = model.transcribe(audio, max_new_tokens=16, draft=draft)
            assert (got.text, got.tokens) == (want["text"], want["tokens"]) == (plain.text, plain.tokens), clip
            assert got.timings["draft_ms"] > 0 and got.timings["n_decode_steps"] > 0
    with pytest.raises(transcribe.TranscribeError) as err:
        parakeet.transcribe(paths["parakeet"] / "audio" / "jfk.wav", draft=model)
    assert err.value.status == "INVALID_ARG" and "does not decode with a draft" in err.value.message
    model.close()
    parakeet.close()


def model_path(paths, name):
    return paths["models"] / name


def test_parakeet_words_are_nemos(paths):
    model = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2)
    assert model.word_timestamps
    for clip in PARAKEET_CLIPS:
        audio = paths["parakeet"] / "audio" / f"{clip}.wav"
        got = model.transcribe(audio)
        want = cli_json(paths, model_path(paths, "parakeet-tdt-tiny-f32.gguf"), audio)
        assert (got.text, got.tokens) == (want["text"], want["tokens"]), clip
        hyp = json.loads((paths["parakeet"] / "golden" / clip / "hypothesis.json").read_text())
        assert [(w.word, w.t0_ms, w.t1_ms) for w in got.words] == \
               [(w["word"], w["start_offset"] * 80, w["end_offset"] * 80) for w in hyp["timestamp"]["word"]]
        assert [w for s in got.segments for w in s.words] == got.words


def test_samples_as_numpy_array_or_plain_sequence(paths):
    np = pytest.importorskip("numpy")
    model = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2)
    audio = paths["parakeet"] / "audio" / "jfk_div8.wav"
    with wave.open(str(audio)) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
    from_file = model.transcribe(audio).text
    assert model.transcribe(pcm).text == from_file
    assert model.transcribe(pcm.tolist()).text == from_file
    # 8 kHz input is resampled to the model's rate (a different signal: just a transcript, no error)
    assert isinstance(model.transcribe(pcm[::2], sample_rate=8000).text, str)


def test_errors_are_exceptions_with_status_and_message(paths, tmp_path):
    with pytest.raises(transcribe.TranscribeError) as e:
        transcribe.Model(tmp_path / "missing.gguf")
    assert e.value.status == "FILE_NOT_FOUND" and "missing.gguf" in e.value.message
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model" * 100)
    with pytest.raises(transcribe.TranscribeError) as e:
        transcribe.Model(junk)
    assert e.value.status == "BAD_GGUF"
    model = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf")
    text = tmp_path / "notes.wav"
    text.write_text("not audio" * 100)
    with pytest.raises(transcribe.TranscribeError) as e:
        model.transcribe(text)
    assert e.value.status == "AUDIO_DECODE"
    with pytest.raises(transcribe.TranscribeError) as e:
        model.transcribe(paths["parakeet"] / "audio" / "jfk.wav", language="fr")
    assert e.value.status == "INVALID_ARG" and "en only" in e.value.message


def test_threads_each_get_a_session_and_the_same_results(paths):
    model = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=1)
    clips = [paths["parakeet"] / "audio" / f"{c}.wav" for c in PARAKEET_CLIPS] * 4
    serial = [model.transcribe(c).text for c in clips]
    got = [None] * len(clips)

    def work(k):
        for i in range(k, len(clips), 4):
            got[i] = model.transcribe(clips[i]).text
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == serial
    assert len(model._sessions) == 5  # the main thread's and one per worker thread
    model.close()
    with pytest.raises(transcribe.TranscribeError):
        model.transcribe(clips[0])


def test_canary_aed_tasks_are_nemos(paths):
    """Canary AED (canary-aed-tiny, F32 cache): language, translate_to, beam_size and timestamps give NeMo's
    ids and text; a task the model lacks is a TranscribeError naming what it can do."""
    fixture = paths["root"] / "tests" / "fixtures" / "canary-aed-tiny"
    model = transcribe.Model(paths["models"] / "canary-aed-tiny-f32.gguf", threads=2, kv_type="f32")
    assert (model.architecture, model.languages) == ("canary_aed", ["en", "de", "es", "fr"])
    assert model.translation and model.beam_search and model.timestamp_prompt
    audio = fixture / "audio" / "jfk_div8.wav"
    golden = fixture / "golden" / "jfk_div8"
    greedy = {t: json.loads((golden / t / "greedy.json").read_text()) for t in ("asr_en_pnc", "ast_en_de", "asr_en_timestamps")}
    got = model.transcribe(audio, language="en")
    assert (got.tokens, got.text) == (greedy["asr_en_pnc"]["hypothesis"]["y_sequence"], greedy["asr_en_pnc"]["hypothesis"]["text"])
    got = model.transcribe(audio, language="en", translate_to="de")
    assert got.tokens == greedy["ast_en_de"]["hypothesis"]["y_sequence"]
    got = model.transcribe(audio, language="en", translate_to="de", beam_size=4)
    assert got.tokens == json.loads((golden / "ast_en_de" / "beam.json").read_text())["best"]["y_sequence"]
    got = model.transcribe(audio, timestamps=True)
    assert got.text == greedy["asr_en_timestamps"]["timestamps"]["text_after"]
    with pytest.raises(transcribe.TranscribeError) as e:
        model.transcribe(audio, language="xx")
    assert "en, de, es, fr" in str(e.value)
    model.close()


def test_whisper_transcribes_as_openai_whisper(paths):
    """Whisper (whisper-tiny, F32 cache) on the long clip with timestamps=True (word_timestamps=True):
    openai/whisper's transcribe() segments, words and text; each segment's window decode; the language;
    a seeded sampling run at one temperature gives the same result twice."""
    fixture = paths["root"] / "tests" / "fixtures" / "whisper-tiny"
    golden = json.loads((fixture / "golden" / "long_38s" / "transcribe.json").read_text())
    model = transcribe.Model(paths["models"] / "whisper-tiny-f32.gguf", threads=2, kv_type="f32")
    assert model.architecture == "whisper" and model.language_detection and model.translation
    audio = fixture / "audio" / "long_38s.wav"
    got = model.transcribe(audio, language="en", timestamps=True)
    assert got.language == "en"
    assert got.text == golden["text"].strip()
    assert [(s.tokens, round(s.t0_ms / 1000, 2), round(s.t1_ms / 1000, 2)) for s in got.segments] == \
        [(s["tokens"], round(s["start"], 2), round(s["end"], 2)) for s in golden["segments"]]
    assert [w.word for w in got.words] == [w["word"].strip() for s in golden["segments"] for w in s["words"]]
    assert [s.decode["seek"] for s in got.segments] == [s["seek"] for s in golden["segments"]]
    sampled = [model.transcribe(audio, language="en", temperature=0.7, best_of=2, seed=3) for _ in range(2)]
    assert sampled[0].tokens == sampled[1].tokens and sampled[0].segments[0].decode["temperature"] == pytest.approx(0.7)
    model.close()


def test_diarize_gives_the_cli_s_speakers(paths):
    """diarize= with the Sortformer fixture model: segments and words carry the CLI --diarize run's speakers
    (Parakeet: each word; Canary-Qwen: turn by turn); the timings count the diarizer."""
    diarizer = paths["models"] / "sortformer-tiny-f32.gguf"
    audio = paths["root"] / "tests" / "fixtures" / "sortformer-tiny" / "audio" / "conv2_budget.wav"
    for name, extra in (("parakeet-tdt-tiny-f32.gguf", {}), ("canary-qwen-tiny-f32.gguf", {"max_new_tokens": 4})):
        model = transcribe.Model(paths["models"] / name, threads=2)
        flags = ["--max-new-tokens", "4"] if extra else []
        want = cli_json(paths, model_path(paths, name), audio, "--diarize", str(diarizer), "--timestamps",
                        "word" if model.word_timestamps else "segment", *flags)
        got = model.transcribe(audio, diarize=diarizer, **extra)
        assert [f"speaker_{s.speaker}" for s in got.segments] == [s["speaker"] for s in want["segments"]], name
        assert [s.text.strip() for s in got.segments] == [s["text"].strip() for s in want["segments"]], name
        assert [f"speaker_{w.speaker}" for w in got.words] == [w["speaker"] for w in want.get("words", [])], name
        assert len({s.speaker for s in got.segments}) > 1
        assert got.timings["diarize_ms"] > 0
        with pytest.raises(transcribe.TranscribeError) as err:
            model.transcribe(audio, diarize=diarizer, diarize_postprocessing="/nonexistent.yaml")
        assert err.value.status == "FILE_NOT_FOUND"
        model.close()


def test_hybrid_decoder_type_picks_the_head(paths):
    """A hybrid Parakeet (parakeet-tdt-ctc-tiny): the transducer by default, decoder_type="ctc" its CTC head,
    each with its NeMo fixture's text (parakeet-tdt-tiny's, parakeet-ctc-tiny's); a head a model lacks or an
    unknown decoder_type is a TranscribeError."""
    model = transcribe.Model(paths["models"] / "parakeet-tdt-ctc-tiny-f32.gguf", threads=2)
    assert model.transducer_head and model.ctc_head
    root = paths["root"] / "tests" / "fixtures"
    audio = paths["parakeet"] / "audio" / "jfk.wav"
    golden = lambda fixture: json.loads((root / fixture / "golden" / "jfk" / "hypothesis.json").read_text())["text"]
    assert model.transcribe(audio).text == golden("parakeet-tdt-tiny")
    assert model.transcribe(audio, decoder_type="tdt").text == golden("parakeet-tdt-tiny")
    assert model.transcribe(audio, decoder_type="ctc").text == golden("parakeet-ctc-tiny")
    with pytest.raises(transcribe.TranscribeError) as e:
        model.transcribe(audio, decoder_type="attention")
    assert e.value.status == "INVALID_ARG"
    model.close()
    ctc = transcribe.Model(paths["models"] / "parakeet-ctc-tiny-f32.gguf", threads=2)
    assert ctc.ctc_head and not ctc.transducer_head
    with pytest.raises(transcribe.TranscribeError) as e:
        ctc.transcribe(audio, decoder_type="tdt")
    assert "no transducer head" in str(e.value)
    ctc.close()


def test_hotwords_give_nemos_boosted_text(paths):
    """hotwords= (a list, or a comma-separated string) with hotword_weight=: NeMo's boosted transcript (the
    parakeet-hotwords golden of parakeet-ctc-tiny); a model without hotwords is a TranscribeError."""
    root = paths["root"] / "tests" / "fixtures"
    want = json.loads((root / "parakeet-hotwords" / "golden" / "parakeet-ctc-tiny" / "case0" / "jfk_div8.json").read_text())
    model = transcribe.Model(paths["models"] / "parakeet-ctc-tiny-f32.gguf", threads=2)
    assert model.hotwords
    audio = paths["parakeet"] / "audio" / "jfk_div8.wav"
    assert model.transcribe(audio, hotwords=want["phrases"], hotword_weight=want["alpha"]).text == want["text"]
    assert model.transcribe(audio, hotwords=",".join(want["phrases"]), hotword_weight=want["alpha"]).text == want["text"]
    model.close()
    canary = transcribe.Model(paths["models"] / "canary-qwen-tiny-f32.gguf", threads=2)
    assert not canary.hotwords
    with pytest.raises(transcribe.TranscribeError) as e:
        canary.transcribe(paths["root"] / "tests" / "fixtures" / "canary-qwen-tiny" / "audio" / "jfk.wav", hotwords=["so"])
    assert e.value.status == "INVALID_ARG"
    canary.close()


def test_prompt_gives_the_cli_s_result(paths):
    """prompt= is the CLI's --prompt (Canary-Qwen: context in its chat prompt); a model without a text prompt
    refuses it."""
    model = transcribe.Model(paths["models"] / "canary-qwen-tiny-f32.gguf", threads=2)
    assert model.text_prompt
    audio = paths["canary"] / "audio" / "jfk.wav"
    want = cli_json(paths, model_path(paths, "canary-qwen-tiny-f32.gguf"), audio, "--max-new-tokens", "8",
                    "--prompt", "Names: Kennedy")
    got = model.transcribe(audio, max_new_tokens=8, prompt="Names: Kennedy")
    assert (got.text, got.tokens) == (want["text"], want["tokens"])
    assert got.tokens != model.transcribe(audio, max_new_tokens=8).tokens
    model.close()
    parakeet = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2)
    assert not parakeet.text_prompt
    with pytest.raises(transcribe.TranscribeError) as e:
        parakeet.transcribe(audio, prompt="Kennedy")
    assert e.value.status == "INVALID_ARG"
    parakeet.close()


def test_align_with_gives_nfas_word_times(paths):
    """align_with= a CTC model (a path, or an open Model): parakeet-tdt-tiny's transcript of jfk placed as NeMo
    Forced Aligner places it (the parakeet-ctc-alignment golden)."""
    root = paths["root"] / "tests" / "fixtures"
    g = json.loads((root / "parakeet-ctc-alignment" / "golden" / "tdt_text_jfk.json").read_text())
    want = [(w["text"], round(w["t_start"] * 1000), round(w["t_end"] * 1000)) for w in g["words"]]
    model = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2)
    ctc = transcribe.Model(paths["models"] / "parakeet-ctc-tiny-f32.gguf", threads=2)
    audio = paths["parakeet"] / "audio" / "jfk.wav"
    for aligner in (paths["models"] / "parakeet-ctc-tiny-f32.gguf", ctc):
        r = model.transcribe(audio, align_with=aligner)
        assert [(w.word, w.t0_ms, w.t1_ms) for w in r.words] == want
    model.close()
    ctc.close()


def test_align_with_qwen3_forced_aligner(paths):
    """align_with= a Qwen3-ForcedAligner GGUF: the model says it is one; a transcript's words come back timed,
    in order; the aligner itself transcribes nothing (a clear error)."""
    aligner = transcribe.Model(paths["models"] / "qwen3-aligner-tiny-f32.gguf", threads=2)
    assert aligner.forced_aligner and not aligner.ctc_head
    model = transcribe.Model(paths["models"] / "qwen3-asr-tiny-f32.gguf", threads=2)
    assert not model.forced_aligner
    audio = paths["root"] / "tests" / "fixtures" / "qwen3-asr-tiny" / "audio" / "jfk_2p37s.wav"
    r = model.transcribe(audio, align_with=aligner, max_new_tokens=12)
    assert r.words
    times = [t for w in r.words for t in (w.t0_ms, w.t1_ms)]
    assert times == sorted(times)
    with pytest.raises(transcribe.TranscribeError, match="align-with"):
        aligner.transcribe(audio)
    model.close()
    aligner.close()


def test_align_times_a_given_text(paths):
    """Model.align(audio, text, language) on an aligner: Qwen3-ForcedAligner gives the reference's align() items
    (qwen3-aligner-tiny's goldens, F32 cache); a CTC model NeMo Forced Aligner's words for the text (the
    parakeet-ctc-alignment golden); a model that aligns nothing is refused."""
    fixtures = paths["root"] / "tests" / "fixtures"
    aligner = transcribe.Model(paths["models"] / "qwen3-aligner-tiny-f32.gguf", threads=2, kv_type="f32")
    for run in ("jfk_en", "jfk_2p37s_zh", "jfk_0p7s_punct"):
        g = json.loads((fixtures / "qwen3-aligner-tiny" / "golden" / run / "align.json").read_text())
        r = aligner.align(fixtures / "qwen3-asr-tiny" / "audio" / f"{g['clip']}.wav", g["text"], g["language"])
        assert r.text == g["text"]
        want = [(i["text"], round(i["start_time"] * 1000), round(i["end_time"] * 1000)) for i in g["items"]]
        assert [(w.word, w.t0_ms, w.t1_ms) for w in r.words] == want
    aligner.close()
    g = json.loads((fixtures / "parakeet-ctc-alignment" / "golden" / "tdt_text_jfk.json").read_text())
    ctc = transcribe.Model(paths["models"] / "parakeet-ctc-tiny-f32.gguf", threads=2)
    r = ctc.align(paths["parakeet"] / "audio" / "jfk.wav", g["text"])
    assert [(w.word, w.t0_ms, w.t1_ms) for w in r.words] == [
        (w["text"], round(w["t_start"] * 1000), round(w["t_end"] * 1000)) for w in g["words"]]
    ctc.close()
    model = transcribe.Model(paths["models"] / "qwen3-asr-tiny-f32.gguf", threads=2)
    with pytest.raises(transcribe.TranscribeError, match="forced aligner"):
        model.align(fixtures / "qwen3-asr-tiny" / "audio" / "jfk_0p7s.wav", "a b")
    model.close()


def test_a_streaming_model_s_contexts_and_their_offline_runs(paths):
    """A cache-aware streaming model (streaming-tiny's hybrid): its attention contexts, and at each one the
    ids NeMo's offline run gives (the fixture's goldens); one it was not trained with is an error."""
    model = transcribe.Model(paths["models"] / "streaming-hybrid-tiny-f32.gguf", threads=2)
    assert model.att_contexts == [(70, 13), (70, 6), (70, 1), (70, 0)]
    assert (model.native_streaming, model.end_of_turn_token) == (True, -1)
    fixture = paths["root"] / "tests" / "fixtures" / "streaming-tiny"
    audio = fixture / "audio" / "cards_005.wav"
    for left, right in model.att_contexts:
        golden = json.loads((fixture / "golden" / "cards_005" / f"att_{left}_{right}" / "offline.json").read_text())
        assert model.transcribe(audio, att_context_size=(left, right)).tokens == golden["rnnt"]["ids"]
    with pytest.raises(transcribe.TranscribeError) as e:
        model.transcribe(audio, att_context_size=(70, 2))
    assert "70,13, 70,6, 70,1, 70,0" in str(e.value)
    assert transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2).att_contexts == []


def _samples(path):
    with wave.open(str(path)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        raw = w.readframes(w.getnframes())
    import array
    pcm = array.array("h", raw)
    return [v / 32768.0 for v in pcm]


def test_live_semantic_turns_are_nemos_streaming_text_cut_at_eou(paths):
    """The end-of-utterance model live (semantic_vad): a turn per <EOU> of NeMo's streaming run (the
    fixture's golden), each turn's deltas joining into its completed text; commit() ends the last."""
    model = transcribe.Model(paths["models"] / "streaming-eou-tiny-f32.gguf", threads=2)
    fixture = paths["root"] / "tests" / "fixtures" / "streaming-tiny" / "eou"
    golden = json.loads((fixture / "golden" / "eou_two_utts" / "att_70_1" / "stream.json").read_text())
    expected = [t.strip() for t in golden["final_rnnt_text"].split("<EOU>")]
    pcm = _samples(fixture / "audio" / "eou_two_utts.wav")
    events = []
    with model.live(turn_detection="semantic_vad") as live:
        for at in range(0, len(pcm), 1600):
            events += live.push(pcm[at:at + 1600])
        events += live.commit()
    completed = [e for e in events if e.type == "completed"]
    nemo_spaces = lambda t: "".join(c for i, c in enumerate(t) if not (c == " " and t[i + 1:i + 2] in (",", ".", "'")))
    assert [nemo_spaces(e.text.strip()) for e in completed] == expected
    for c in completed:
        assert "".join(e.text for e in events if e.type == "delta" and e.item == c.item).strip() == c.text.strip()
    with pytest.raises(transcribe.TranscribeError):
        transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2).live(turn_detection="semantic_vad")


def test_live_vad_turns_of_an_offline_model_transcribe_as_their_samples_do(paths):
    """server_vad turns of an offline model: each completed turn is what transcribe() gives its samples."""
    model = transcribe.Model(paths["models"] / "parakeet-tdt-tiny-f32.gguf", threads=2)
    pcm = _samples(paths["parakeet"] / "audio" / "jfk.wav") + [0.0] * 16000
    events = []
    with model.live(vad=paths["models"] / "silero-vad-v5.gguf") as live:
        for at in range(0, len(pcm), 3200):
            events += live.push(pcm[at:at + 3200])
    completed = [e for e in events if e.type == "completed"]
    assert completed
    for c in completed:
        turn = pcm[c.audio_start_ms * 16:c.audio_end_ms * 16]
        assert c.text == model.transcribe(turn).text
