#!/usr/bin/env python3
"""transcribe-server end to end over loopback: formats, error codes, a bounded load run, 503 on a full
queue, --vad, word timestamps, translation. Usage: test_server.py SERVER MODEL FIXTURE_DIR AUDIO_DIR VAD_MODEL
PARAKEET_MODEL PARAKEET_FIXTURE_DIR AED_MODEL AED_FIXTURE_DIR (AUDIO_DIR: wav/flac/mp3 copies of the clips)."""
import concurrent.futures as cf
import json
import os
import random
import signal
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request
import wave
from pathlib import Path

SERVER, MODEL, FIXTURE, AUDIO = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
VAD_MODEL = sys.argv[5]
PARAKEET_MODEL, PARAKEET_FIXTURE = sys.argv[6], Path(sys.argv[7])
AED_MODEL, AED_FIXTURE = sys.argv[8], Path(sys.argv[9])
WHISPER_MODEL, WHISPER_FIXTURE = sys.argv[10], Path(sys.argv[11])
JFK = (FIXTURE / "audio" / "jfk.wav").read_bytes()


class Server:
    def __init__(self, *args, model=MODEL, env=None, stderr=subprocess.DEVNULL):
        self.proc = subprocess.Popen([SERVER, "-m", model, "--port", "0", "--host", "127.0.0.1", *args],
                                     stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError("server did not start: " + line)
        self.base = line.split("listening on ")[1].split()[0]
        self.banner = line

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.last_words, self.last_err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.last_words, self.last_err = self.proc.communicate()
        return self.proc.returncode


def multipart(fields, files):
    boundary = "----transcribe%08x" % random.getrandbits(32)
    body = b""
    for k, v in (fields.items() if isinstance(fields, dict) else fields):
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    for k, (name, data) in files.items():
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{name}"\r\n'
                 f'Content-Type: application/octet-stream\r\n\r\n').encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def request(base, path, body=None, content_type=None, timeout=120, method=None, headers=None, full=False):
    req = urllib.request.Request(base + path, data=body, method=method or ("POST" if body is not None else "GET"))
    if content_type:
        req.add_header("Content-Type", content_type)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = r.status, r.headers.get("Content-Type", ""), r.read(), r.headers
    except urllib.error.HTTPError as e:
        out = e.code, e.headers.get("Content-Type", ""), e.read(), e.headers
    return out if full else out[:3]


def transcribe(base, data, name="a.wav", extra_fields=(), **fields):
    body, ctype = multipart(list(fields.items()) + list(extra_fields), {"file": (name, data)})
    return request(base, "/v1/audio/transcriptions", body, ctype)


def raw_exchange(base, data, timeout=10, drip=None):
    """Sends raw bytes (then DRIP bytes one at a time, 0.2 s apart, if given) and returns the status line
    of whatever the server answers, and the seconds it took."""
    import socket
    host, port = base.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)))
    s.settimeout(timeout)
    t0, out = time.time(), b""
    try:
        s.sendall(data)
        for b in (drip or b""):
            s.settimeout(0.2)
            try:
                out = s.recv(65536)
                if out:
                    break
            except socket.timeout:
                pass
            s.sendall(bytes([b]))
        s.settimeout(timeout)
        while not out.count(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except OSError as exc:
        out += f"<{exc}>".encode()
    finally:
        s.close()
    return out.split(b"\r\n")[0].decode(errors="replace"), time.time() - t0


class Hardening(unittest.TestCase):
    """Limits that hold against hostile clients: body bytes whatever the framing, encoded bodies, header
    size and count, audio duration, and slow clients (headers within the deadline, bodies at a rate)."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-upload-mb", "2", "--header-timeout-s", "2", "--max-audio-s", "60",
                            "--parallel", "2", "--queue", "4", "--max-new-tokens", "4")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_chunked_uploads_count_against_the_limit(self):
        body, ctype = multipart({}, {"file": ("big.wav", os.urandom(3 << 20))})
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 65536]), body[i:i + 65536]) for i in range(0, len(body), 65536))
        head = (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                "Transfer-Encoding: chunked\r\n\r\n").encode()
        status, took = raw_exchange(self.server.base, head + chunks + b"0\r\n\r\n")
        self.assertIn(" 413 ", status)
        self.assertLess(took, 5)
        body, ctype = multipart({}, {"file": ("jfk.wav", JFK)})  # under the limit, chunked: transcribed
        head = (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                "Transfer-Encoding: chunked\r\n\r\n").encode()
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 65536]), body[i:i + 65536]) for i in range(0, len(body), 65536))
        self.assertIn(" 200 ", raw_exchange(self.server.base, head + chunks + b"0\r\n\r\n")[0])

    def test_expect_100_continue_over_the_limit(self):
        head = (b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                b"Content-Length: 10485760\r\nExpect: 100-continue\r\n\r\n")
        self.assertIn(" 413 ", raw_exchange(self.server.base, head)[0])

    def test_encoded_bodies_are_refused(self):
        body, ctype = multipart({}, {"file": ("jfk.wav", JFK)})
        code, _, answer = request(self.server.base, "/v1/audio/transcriptions", body, ctype,
                                  headers={"Content-Encoding": "gzip"})
        self.assertEqual(code, 415, answer)

    def test_header_size_and_count_are_capped(self):
        line = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n"
        self.assertIn(" 431 ", raw_exchange(self.server.base, line)[0])
        many = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 20000 + b"\r\n"
        self.assertIn(" 431 ", raw_exchange(self.server.base, many)[0])
        self.assertEqual(request(self.server.base, "/health")[0], 200)

    def test_audio_longer_than_the_limit(self):
        import io
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:  # 90 s of 8 kHz 8-bit silence: 720 KB, under the upload limit
            w.setnchannels(1)
            w.setsampwidth(1)
            w.setframerate(8000)
            w.writeframes(b"\x80" * (90 * 8000))
        code, _, body = transcribe(self.server.base, buf.getvalue(), "long.wav")
        self.assertEqual(code, 413, body)
        self.assertIn("exceeds the limit of 60.0 s", json.loads(body)["error"]["message"])

    def test_slow_clients_are_cut_off_and_others_served(self):
        import socket
        host, port = self.server.base.split("//")[1].split(":")
        slow = []
        for _ in range(50):
            s = socket.create_connection((host, int(port)))
            s.sendall(b"GET /health HTTP/1.1\r\n")
            slow.append(s)
        # Served while all fifty are still held: had they taken every worker, /health would wait for one of
        # them to be cut off (--header-timeout-s 2), and that one would have its 408 (or be closed) by now.
        self.assertEqual(request(self.server.base, "/health", timeout=5)[0], 200)
        for s in slow:
            s.setblocking(False)
            with self.assertRaises(BlockingIOError, msg="a slow client was answered before /health was"):
                s.recv(1, socket.MSG_PEEK)
        status, took = raw_exchange(self.server.base, b"GET /health HTTP/1.1\r\n", drip=b"X-Slow: 1" * 10)
        self.assertIn(" 408 ", status)
        self.assertLess(took, 6)
        head = (b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                b"Content-Length: 100000\r\n\r\n")
        status, took = raw_exchange(self.server.base, head, drip=b"y" * 40)  # 5 bytes a second
        self.assertIn(" 408 ", status)
        for s in slow:
            s.close()
        self.assertEqual(request(self.server.base, "/health")[0], 200)

    def test_a_client_silent_in_its_headers_gets_408_at_the_header_timeout(self):
        status, took = raw_exchange(self.server.base, b"GET /health HTTP/1.1\r\nX-Half: ")
        self.assertIn(" 408 ", status)
        # --header-timeout-s 2, counted from the server's first read; httplib's own read timeout (5 s)
        # would have answered 400.
        self.assertGreater(took, 1.9)
        self.assertLess(took, 4.5)


class ServerPolicy(unittest.TestCase):
    """405 with Allow, the API key, CORS, the access log, container messages, trimmed verbose_json text."""

    def test_wrong_methods_get_405_with_allow(self):
        server = Server()
        try:
            for method, path, allow in (("GET", "/v1/audio/transcriptions", "POST"), ("POST", "/health", "GET, HEAD"),
                                        ("DELETE", "/v1/models", "GET, HEAD"), ("PUT", "/v1/audio/transcriptions", "POST")):
                code, ctype, body, headers = request(server.base, path, b"x" if method in ("POST", "PUT") else None,
                                                     method=method, full=True)
                self.assertEqual(code, 405, (method, path))
                self.assertEqual(headers.get("Allow"), allow)
                self.assertEqual(json.loads(body)["error"]["code"], 405)
            self.assertEqual(request(server.base, "/nowhere", method="GET")[0], 404)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_api_key(self):
        for args, env_key in ((("--api-key", "s3cret"), None), ((), "s3cret")):
            env = dict(os.environ, TRANSCRIBE_API_KEY=env_key) if env_key else None
            server = Server(*args, env=env)
            try:
                self.assertEqual(request(server.base, "/health")[0], 200)  # health stays open
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                    code, _, body = request(server.base, "/v1/models", headers=headers)
                    self.assertEqual(code, 401, headers)
                    self.assertEqual(json.loads(body)["error"]["code"], "invalid_api_key")
                ok = {"Authorization": "Bearer s3cret"}
                self.assertEqual(request(server.base, "/v1/models", headers=ok)[0], 200)
                body, ctype = multipart({}, {"file": ("a.wav", JFK)})
                self.assertEqual(request(server.base, "/v1/audio/transcriptions", body, ctype)[0], 401)
                self.assertEqual(request(server.base, "/v1/audio/transcriptions", body, ctype, headers=ok)[0], 200)
            finally:
                self.assertEqual(server.stop(), 0)

    def test_cors_preflight_and_headers(self):
        server = Server("--cors-origin", "https://app.example")
        try:
            code, _, _, headers = request(server.base, "/v1/audio/transcriptions", method="OPTIONS", full=True)
            self.assertEqual(code, 204)
            self.assertEqual(headers.get("Access-Control-Allow-Origin"), "https://app.example")
            self.assertEqual(headers.get("Access-Control-Allow-Methods"), "POST")
            self.assertIn("Authorization", headers.get("Access-Control-Allow-Headers"))
            code, _, _, headers = request(server.base, "/health", full=True)
            self.assertEqual(headers.get("Access-Control-Allow-Origin"), "https://app.example")
        finally:
            self.assertEqual(server.stop(), 0)
        server = Server()  # without --cors-origin: no CORS headers, OPTIONS is not a method of these routes
        try:
            code, _, _, headers = request(server.base, "/health", method="OPTIONS", full=True)
            self.assertEqual(code, 405)
            self.assertIsNone(headers.get("Access-Control-Allow-Origin"))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_access_log_containers_and_trimmed_text(self):
        server = Server("--max-new-tokens", "8", stderr=subprocess.PIPE)
        try:
            code, _, body = transcribe(server.base, JFK, response_format="verbose_json")
            self.assertEqual(code, 200, body)
            j = json.loads(body)
            self.assertEqual(j["text"], j["text"].strip())
            self.assertTrue(all(s["text"] == s["text"].strip() for s in j["segments"]))
            m4a = b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00" + b"\x00" * 500
            code, _, body = transcribe(server.base, m4a, "voice.m4a")
            self.assertEqual(code, 400)
            self.assertIn("MP4/M4A", json.loads(body)["error"]["message"])
            webm = b"\x1a\x45\xdf\xa3" + b"\x00" * 500
            self.assertIn("WebM", json.loads(transcribe(server.base, webm, "a.webm")[2])["error"]["message"])
        finally:
            self.assertEqual(server.stop(), 0)
        log = server.last_err
        line = [x for x in log.splitlines() if "POST /v1/audio/transcriptions 200" in x]
        self.assertEqual(len(line), 1, log)
        self.assertRegex(line[0], r"in=\d{6} audio_s=11\.00 ms=\d+\.\d")
        self.assertEqual(len([x for x in log.splitlines() if " 400 " in x]), 2, log)


def sse_events(response):
    """Server-sent events as the spec parses them: lines up to a blank line make one event; `data:`
    lines (one optional space after the colon) are joined with newlines; comments (`:`) ignored."""
    data, events = [], []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                events.append("\n".join(data))
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        events.append("\n".join(data))
    return [json.loads(e) for e in events]


def streamed(base, fields, name, data, path="/v1/audio/transcriptions", timeout=60):
    """A stream=true request's status, Content-Type and server-sent events (read to the end)."""
    import http.client
    host, port = base.split("//")[1].split(":")
    body, ctype = multipart(fields, {"file": (name, data)})
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": ctype})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), sse_events(r)
    finally:
        conn.close()


def streamed_jfk(base):
    """The events of jfk.wav transcribed with stream=true."""
    return streamed(base, {"stream": "true"}, "jfk.wav", JFK, timeout=120)[2]


def requests_beside_a_stream(base, n, fields_of=lambda i: {}):
    """N verbose_json requests cycling the four fixture clips (request I with FIELDS_OF(I) added) and one
    streamed jfk, all at once: [(clip, status, json)] and the stream's events."""
    clips = ("jfk", "jfk_0p7s", "jfk_div8", "tone_noise_3s")

    def one(i):
        c = clips[i % 4]
        audio = (FIXTURE / "audio" / f"{c}.wav").read_bytes()
        code, _, body = transcribe(base, audio, f"{c}.wav", response_format="verbose_json", **fields_of(i))
        return c, code, json.loads(body)

    with cf.ThreadPoolExecutor(max_workers=n + 1) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        stream = pool.submit(streamed_jfk, base)
        return [f.result() for f in futures], stream.result()


class StreamingTest(unittest.TestCase):
    def test_openai_streaming_events(self):
        """stream=true: text/event-stream of transcript.text.delta events, then one transcript.text.done whose
        text is what the deltas spell and what a plain request returns; the stream then ends."""
        server = Server(model=PARAKEET_MODEL)
        try:
            status, ctype, events = streamed(server.base, {"stream": "true", "response_format": "json"}, "jfk.wav", JFK)
            self.assertEqual(status, 200)
            self.assertTrue(ctype.startswith("text/event-stream"))
            self.assertGreater(len(events), 2)
            self.assertEqual([e["type"] for e in events], ["transcript.text.delta"] * (len(events) - 1) + ["transcript.text.done"])
            plain = json.loads(transcribe(server.base, JFK)[2])["text"]
            self.assertEqual(events[-1]["text"], plain)
            self.assertEqual("".join(e["delta"] for e in events[:-1]), plain)
            code, _, body = transcribe(server.base, JFK, stream="true", response_format="srt")
            self.assertEqual(code, 400)
        finally:
            self.assertEqual(server.stop(), 0)


class StreamedFormatsTest(unittest.TestCase):
    def test_formats_event_carries_each_plain_body(self):
        """stream=true with our formats=... field: one transcript.formats event before transcript.text.done, each
        format's body what the plain request of that format returns, byte for byte."""
        server = Server(model=PARAKEET_MODEL)
        try:
            fields = [("stream", "true"), ("response_format", "json"), ("formats", "text, json,srt"),
                      ("formats[]", "vtt,verbose_json"), ("timestamp_granularities[]", "segment"),
                      ("timestamp_granularities[]", "word")]
            status, _, events = streamed(server.base, fields, "jfk.wav", JFK)
            self.assertEqual(status, 200)
            self.assertEqual([e["type"] for e in events[-2:]], ["transcript.formats", "transcript.text.done"])
            formats = events[-2]["formats"]
            self.assertEqual(sorted(formats), ["json", "srt", "text", "verbose_json", "vtt"])
            for name in ("json", "text", "srt", "vtt"):
                code, _, plain = transcribe(server.base, JFK, response_format=name)
                self.assertEqual(code, 200)
                self.assertEqual(formats[name], plain.decode(), name)
            code, _, plain = transcribe(server.base, JFK, response_format="verbose_json",
                                        extra_fields=[("timestamp_granularities[]", "segment"),
                                                      ("timestamp_granularities[]", "word")])
            self.assertEqual(formats["verbose_json"], plain.decode())
            self.assertGreater(len(json.loads(plain)["words"]), 0)
            for fields, param in (({"formats": "srt"}, "formats"),
                                  ({"stream": "true", "formats": "docx"}, "formats"),
                                  ({"stream": "true", "formats": "diarized_json"}, "formats"),
                                  ({"stream": "true", "timestamp_granularities[]": "word"}, "timestamp_granularities")):
                code, _, body = transcribe(server.base, JFK, extra_fields=list(fields.items()))
                self.assertEqual(code, 400, fields)
                self.assertEqual(json.loads(body)["error"]["param"], param, fields)
        finally:
            self.assertEqual(server.stop(), 0)


class WebPageTest(unittest.TestCase):
    """The page's routes (the browser test, tests/web, drives the page itself): its files with a CSP and no
    key, GET and HEAD only, --no-web, and the capabilities /v1/models gives the page."""

    def test_page_routes(self):
        server = Server("--api-key", "s3cret")
        try:
            code, ctype, body, headers = request(server.base, "/", full=True)
            self.assertEqual((code, ctype), (200, "text/html; charset=utf-8"))
            self.assertIn(b'<script src="/web/app.js" defer></script>', body)
            self.assertNotIn(b"<script>", body)  # no inline script: the CSP allows none
            csp = headers.get("Content-Security-Policy")
            self.assertIn("script-src 'self'", csp)
            self.assertNotIn("unsafe-inline", csp)
            self.assertEqual(headers.get("X-Content-Type-Options"), "nosniff")
            code, ctype, _ = request(server.base, "/web/app.js")
            self.assertEqual((code, ctype), (200, "text/javascript; charset=utf-8"))
            code, _, body = request(server.base, "/", method="HEAD")
            self.assertEqual((code, body), (200, b""))
            code, _, _, headers = request(server.base, "/", b"x", method="POST", full=True)
            self.assertEqual((code, headers.get("Allow")), (405, "GET, HEAD"))
            self.assertEqual(request(server.base, "/web/missing.js")[0], 404)
            self.assertEqual(request(server.base, "/web/../../etc/passwd")[0], 404)
            self.assertEqual(request(server.base, "/v1/models")[0], 401)  # the data stays behind the key
        finally:
            self.assertEqual(server.stop(), 0)
        server = Server("--no-web")
        try:
            self.assertNotIn("the page at /", server.banner)
            self.assertEqual(request(server.base, "/")[0], 404)
            self.assertEqual(request(server.base, "/web/app.js")[0], 404)
            code, _, _, headers = request(server.base, "/", b"x", method="POST", full=True)
            self.assertEqual(code, 404)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_websocket_key_and_subprotocol_as_browsers_send_them(self):
        """A browser's upgrade carries the key as the subprotocol openai-insecure-api-key.KEY beside "realtime",
        which the 101 must name back (a browser drops the connection otherwise); a wrong key gets 401."""
        import socket
        server = Server("--api-key", "s3cret")
        try:
            host, port = server.base.split("//")[1].split(":")

            def upgrade(protocols):
                s = socket.create_connection((host, int(port)), timeout=10)
                s.sendall(("GET /v1/realtime?intent=transcription HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                           f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {protocols}\r\n\r\n").encode())
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                s.close()
                lines = head.decode(errors="replace").split("\r\n")
                fields = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
                return lines[0].split()[1], fields.get("sec-websocket-protocol")

            self.assertEqual(upgrade("realtime, openai-insecure-api-key.s3cret"), ("101", "realtime"))
            self.assertEqual(upgrade("openai-insecure-api-key.s3cret"), ("101", None))
            self.assertEqual(upgrade("realtime, openai-insecure-api-key.wrong")[0], "401")
        finally:
            self.assertEqual(server.stop(), 0)

    def test_models_say_what_each_model_can_do(self):
        for model, expected in ((MODEL, {"prompt": True, "hotwords": False, "word_timestamps": False,
                                         "translation": False, "diarization": False, "vad": False}),
                                (PARAKEET_MODEL, {"prompt": False, "hotwords": True, "word_timestamps": True,
                                                  "translation": False, "diarization": False, "vad": True}),
                                (AED_MODEL, {"prompt": False, "hotwords": False, "translation": True,
                                             "beam_search": True})):
            server = Server(*(("--vad", VAD_MODEL) if model == PARAKEET_MODEL else ()), model=model)
            try:
                caps = json.loads(request(server.base, "/v1/models")[2])["data"][0]["capabilities"]
                for k, v in expected.items():
                    self.assertEqual(caps[k], v, (model, k))
                self.assertEqual(caps["sample_rate"], 16000)
                self.assertTrue(caps["realtime"] and caps["web"])
                if model == AED_MODEL:
                    self.assertGreater(len(caps["languages"]), 1)
            finally:
                self.assertEqual(server.stop(), 0)


class DiarizedServer(unittest.TestCase):
    """--diarize SORTFORMER: response_format=diarized_json in OpenAI's shape (TranscriptionDiarized), plain and
    streamed (transcript.text.segment events before transcript.text.done), and its errors."""

    @classmethod
    def setUpClass(cls):
        cls.diarizer = str(Path(MODEL).parent / "sortformer-tiny-f32.gguf")
        cls.audio = (PARAKEET_FIXTURE.parent / "sortformer-tiny" / "audio" / "conv2_budget.wav").read_bytes()
        cls.server = Server("--diarize", cls.diarizer, model=PARAKEET_MODEL)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_diarized_json_shape_and_speakers(self):
        code, ctype, body = transcribe(self.server.base, self.audio, response_format="diarized_json")
        self.assertEqual(code, 200, body)
        j = json.loads(body)
        self.assertEqual(list(j), ["task", "duration", "text", "segments", "usage"])
        self.assertEqual(j["task"], "transcribe")
        self.assertAlmostEqual(j["duration"], 1459 * 160 / 16000, delta=0.02)
        self.assertEqual(j["usage"], {"type": "duration", "seconds": j["duration"]})
        plain = json.loads(transcribe(self.server.base, self.audio)[2])["text"]
        self.assertEqual(j["text"], plain.strip())  # the same words, now by speaker
        self.assertGreater(len(j["segments"]), 1)
        seen = []
        for i, seg in enumerate(j["segments"]):
            self.assertEqual(list(seg), ["type", "id", "start", "end", "text", "speaker"])
            self.assertEqual(seg["type"], "transcript.text.segment")
            self.assertEqual(seg["id"], f"seg_{i}")
            self.assertLessEqual(seg["start"], seg["end"])
            if seg["speaker"] not in seen:  # labelled A, B, ... in order of first appearance
                seen.append(seg["speaker"])
        self.assertEqual(seen, [chr(ord("A") + k) for k in range(len(seen))])
        self.assertGreater(len(seen), 1)
        self.assertEqual(" ".join(seg["text"] for seg in j["segments"]), j["text"])

    def test_streamed_segments_then_done(self):
        status, _, events = streamed(self.server.base, {"stream": "true", "response_format": "diarized_json"}, "c.wav",
                                     self.audio)
        self.assertEqual(status, 200)
        kinds = [e["type"] for e in events]
        n_delta, n_seg = kinds.count("transcript.text.delta"), kinds.count("transcript.text.segment")
        self.assertEqual(kinds, ["transcript.text.delta"] * n_delta + ["transcript.text.segment"] * n_seg
                         + ["transcript.text.done"])
        whole = json.loads(transcribe(self.server.base, self.audio, response_format="diarized_json")[2])
        self.assertEqual([e for e in events if e["type"] == "transcript.text.segment"], whole["segments"])
        self.assertEqual(events[-1]["text"], whole["text"])

    def test_errors(self):
        base = self.server.base
        body, ctype = multipart({"response_format": "diarized_json"}, {"file": ("c.wav", self.audio)})
        code, _, out = request(base, "/v1/audio/translations", body, ctype)
        self.assertEqual(code, 400, out)
        code, _, out = transcribe(base, self.audio, response_format="diarized_json",
                                  extra_fields=[("known_speaker_names[]", "agent")])
        self.assertEqual(code, 400, out)
        self.assertIn("known speakers", json.loads(out)["error"]["message"])


class BatchedServer(unittest.TestCase):
    """--parallel N on a model that batches: one session, concurrent requests decoded in the same steps."""

    def assert_golden_ids(self, results, length=None):
        """Each request its own reference ids (a prefix of them: the budget), whatever ran beside it."""
        for c, code, j in results:
            self.assertEqual(code, 200, j)
            tokens = [t for seg in j["segments"] for t in seg["tokens"]]
            self.assertTrue(tokens, c)
            golden = json.loads((FIXTURE / "golden" / c / "greedy_ids.json").read_text())
            self.assertEqual(tokens, golden[:len(tokens)], c)
            if length is not None:
                self.assertEqual(len(tokens), length, c)

    def test_concurrent_requests_decode_together_with_their_own_results(self):
        server = Server("--parallel", "3", "--queue", "32", "--max-new-tokens", "16", "--kv-type", "f32")
        self.assertIn("decoded together", server.banner)
        try:
            results, events = requests_beside_a_stream(server.base, 12)
            self.assert_golden_ids(results)
            self.assertEqual(events[-1]["type"], "transcript.text.done")
            self.assertEqual("".join(e["delta"] for e in events[:-1]), events[-1]["text"])
            jfk_text = next(j["text"] for c, _, j in results if c == "jfk")
            self.assertEqual(events[-1]["text"], jfk_text)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_drafted_and_plain_requests_in_one_batch_keep_their_ids(self):
        """--draft (the Parakeet fixture model): concurrent requests, half with the draft and half opting out
        (draft=false), one streamed, share the decode steps; each has the reference's greedy ids. A bad
        draft value is a 400; a model that cannot take a draft refuses to start."""
        server = Server("--parallel", "3", "--queue", "32", "--max-new-tokens", "16", "--kv-type", "f32",
                        "--draft", PARAKEET_MODEL)
        self.assertIn("drafts by", server.banner)
        try:
            results, events = requests_beside_a_stream(server.base, 8, lambda i: {"draft": "false"} if i % 2 else {})
            self.assert_golden_ids(results, length=16)  # the random-weight model never ends: the budget does
            self.assertEqual(events[-1]["type"], "transcript.text.done")
            self.assertEqual(events[-1]["text"], next(j["text"] for c, _, j in results if c == "jfk"))
            code, _, body = transcribe(server.base, JFK, draft="maybe")
            self.assertEqual(code, 400, body)
            self.assertEqual(json.loads(body)["error"]["param"], "draft")
        finally:
            self.assertEqual(server.stop(), 0)
        r = subprocess.run([SERVER, "-m", PARAKEET_MODEL, "--draft", MODEL, "--port", "0"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not decode with a draft", r.stderr)

    def test_startup_says_whether_requests_are_batched(self):
        for model, batched in ((MODEL, True), (PARAKEET_MODEL, False)):
            server = Server("--parallel", "2", model=model)
            try:
                self.assertEqual("decoded together" in server.banner, batched, server.banner)
            finally:
                self.assertEqual(server.stop(), 0)


class WordTimestampsTest(unittest.TestCase):
    def test_openai_words_are_nemos(self):
        """Parakeet-TDT: verbose_json with timestamp_granularities[]=word gives NeMo's words and times; word
        only leaves segments out; SRT cues follow words (<= 42 characters); a bad granularity is a 400."""
        hyp = json.loads((PARAKEET_FIXTURE / "golden" / "jfk" / "hypothesis.json").read_text())
        server = Server(model=PARAKEET_MODEL)
        try:
            # OpenAI's prompt is accepted and ignored by a model without a text prompt (Whisper clients send one).
            code, _, body = transcribe(server.base, JFK, response_format="verbose_json", prompt="Kennedy",
                                       extra_fields=[("timestamp_granularities[]", "word"),
                                                     ("timestamp_granularities[]", "segment")])
            self.assertEqual(code, 200, body)
            j = json.loads(body)
            self.assertEqual(j["text"], hyp["text"])
            want = [(w["word"], round(w["start"], 3), round(w["end"], 3)) for w in hyp["timestamp"]["word"]]
            self.assertEqual([(w["word"], round(w["start"], 3), round(w["end"], 3)) for w in j["words"]], want)
            self.assertEqual([s["text"] for s in j["segments"]], [s["segment"] for s in hyp["timestamp"]["segment"]])
            code, _, body = transcribe(server.base, JFK, response_format="verbose_json",
                                       extra_fields=[("timestamp_granularities[]", "word")])
            self.assertEqual(code, 200, body)
            self.assertNotIn("segments", json.loads(body))
            code, _, body = transcribe(server.base, JFK, response_format="srt")
            cues = body.decode().strip().split("\n\n")
            self.assertGreater(len(cues), 1)
            for cue in cues:
                self.assertLessEqual(len(cue.split("\n", 2)[2]), 42, cue)
            code, _, body = transcribe(server.base, JFK, response_format="verbose_json",
                                       extra_fields=[("timestamp_granularities[]", "sentence")])
            self.assertEqual(code, 400, body)
            code, _, body = transcribe(server.base, JFK, extra_fields=[("timestamp_granularities[]", "word")])
            self.assertEqual(code, 400, body)  # needs verbose_json
        finally:
            self.assertEqual(server.stop(), 0)


class AlignedServerTest(unittest.TestCase):
    def test_align_with_times_any_models_words_as_nfa_does(self):
        """--align-with parakeet-ctc-tiny: parakeet-tdt-tiny's words and segments in verbose_json are where NeMo
        Forced Aligner puts them (the parakeet-ctc-alignment golden for its transcript of jfk); Canary-Qwen,
        which times no words of its own, now gives them (its text's words, in order, inside the audio); an
        aligner without a CTC head stops the server at start with one clear line."""
        ctc = str(Path(PARAKEET_MODEL).parent / "parakeet-ctc-tiny-f32.gguf")
        golden = json.loads((PARAKEET_FIXTURE.parent / "parakeet-ctc-alignment" / "golden" / "tdt_text_jfk.json").read_text())
        jfk = (PARAKEET_FIXTURE / "audio" / "jfk.wav").read_bytes()
        granularities = [("timestamp_granularities[]", "word"), ("timestamp_granularities[]", "segment")]
        server = Server("--align-with", ctc, model=str(Path(PARAKEET_MODEL).parent / "parakeet-tdt-tiny-f32.gguf"))
        try:
            self.assertIn("words aligned by", server.banner)
            code, _, body = transcribe(server.base, jfk, response_format="verbose_json", extra_fields=granularities)
            self.assertEqual(code, 200, body)
            j = json.loads(body)
            self.assertEqual([(w["word"], round(w["start"], 3), round(w["end"], 3)) for w in j["words"]],
                             [(w["text"], round(w["t_start"], 3), round(w["t_end"], 3)) for w in golden["words"]])
            self.assertEqual([(s["text"], round(s["start"], 3), round(s["end"], 3)) for s in j["segments"]],
                             [(s["text"], round(s["t_start"], 3), round(s["t_end"], 3)) for s in golden["segments"]])
        finally:
            self.assertEqual(server.stop(), 0)
        server = Server("--align-with", ctc, "--max-new-tokens", "12")  # Canary-Qwen: a text the frames hold
        try:
            code, _, body = transcribe(server.base, JFK, response_format="verbose_json",
                                       extra_fields=[("timestamp_granularities[]", "word")])
            self.assertEqual(code, 200, body)
            j = json.loads(body)
            self.assertGreater(len(j["words"]), 2)
            self.assertEqual([w["word"] for w in j["words"]], [w for w in j["text"].split(" ") if w])
            spans = [(w["start"], w["end"]) for w in j["words"]]
            self.assertTrue(all(0 <= a < b <= 11.04 for a, b in spans), spans)
            self.assertEqual(spans, sorted(spans))
        finally:
            self.assertEqual(server.stop(), 0)
        r = subprocess.run([SERVER, "-m", MODEL, "--align-with", PARAKEET_MODEL, "--port", "0"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("neither has a CTC head", r.stderr)
        r = subprocess.run([SERVER, "-m", str(Path(MODEL).parent / "qwen3-aligner-tiny-f32.gguf"), "--port", "0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is a forced aligner", r.stderr)


class HybridServerTest(unittest.TestCase):
    def test_decoder_type_field_picks_the_head(self):
        """A hybrid Parakeet (parakeet-tdt-ctc-tiny): the transducer by default and with decoder_type=tdt,
        the CTC head with decoder_type=ctc (each its NeMo fixture's text); an unknown type is a 400."""
        fixtures = PARAKEET_FIXTURE.parent
        text = lambda fixture: json.loads((fixtures / fixture / "golden" / "jfk" / "hypothesis.json").read_text())["text"]
        server = Server(model=str(Path(PARAKEET_MODEL).parent / "parakeet-tdt-ctc-tiny-f32.gguf"))
        try:
            for fields, fixture in (([], "parakeet-tdt-tiny"), ([("decoder_type", "tdt")], "parakeet-tdt-tiny"),
                                    ([("decoder_type", "ctc")], "parakeet-ctc-tiny")):
                code, _, body = transcribe(server.base, JFK, response_format="json", extra_fields=fields)
                self.assertEqual(code, 200, body)
                self.assertEqual(json.loads(body)["text"], text(fixture), fields)
            code, _, body = transcribe(server.base, JFK, extra_fields=[("decoder_type", "attention")])
            self.assertEqual(code, 400, body)
            self.assertIn(b"decoder_type", body)
        finally:
            self.assertEqual(server.stop(), 0)


class HotwordsServerTest(unittest.TestCase):
    def test_hotwords_fields_give_nemos_boosted_text(self):
        """hotwords=a,b with hotword_weight=W: NeMo's boosted transcript (parakeet-hotwords golden of
        parakeet-rnnt-tiny on jfk); a bad weight is a 400."""
        want = json.loads((PARAKEET_FIXTURE.parent / "parakeet-hotwords" / "golden" / "parakeet-rnnt-tiny" / "case0" /
                           "jfk.json").read_text())
        plain = json.loads((PARAKEET_FIXTURE.parent / "parakeet-rnnt-tiny" / "golden" / "jfk" / "hypothesis.json").read_text())
        server = Server(model=str(Path(PARAKEET_MODEL).parent / "parakeet-rnnt-tiny-f32.gguf"))
        try:
            fields = [("hotwords", ",".join(want["phrases"])), ("hotword_weight", str(want["alpha"]))]
            code, _, body = transcribe(server.base, JFK, response_format="json", extra_fields=fields)
            self.assertEqual(code, 200, body)
            self.assertEqual(json.loads(body)["text"], want["text"])
            code, _, body = transcribe(server.base, JFK, response_format="json")
            self.assertEqual((code, json.loads(body)["text"]), (200, plain["text"]))
            for bad in ("-1", "x", ""):
                code, _, body = transcribe(server.base, JFK, extra_fields=[("hotwords", "so"), ("hotword_weight", bad)])
                self.assertEqual(code, 400, bad)
                self.assertIn(b"hotword_weight", body)
        finally:
            self.assertEqual(server.stop(), 0)


class TranslationTest(unittest.TestCase):
    def test_canary_aed_routes_give_nemos_text(self):
        """Canary AED (canary-aed-tiny, F32 cache), on jfk_div8: /v1/audio/translations with target_language de
        (ours; OpenAI's route translates into English, the default) and streaming, /v1/audio/transcriptions,
        timestamp_granularities word (the prompt asks for timestamps), beam_size 4: NeMo's text; an unknown
        language, a bad beam size or a model that does not translate: 400."""
        wav = (AED_FIXTURE / "audio" / "jfk_div8.wav").read_bytes()
        golden = AED_FIXTURE / "golden" / "jfk_div8"
        text = {t: json.loads((golden / t / "greedy.json").read_text()) for t in ("asr_en_pnc", "ast_en_de", "asr_en_timestamps")}
        beam = json.loads((golden / "ast_en_de" / "beam.json").read_text())["best"]["text"]

        def post(path, **fields):
            body, ctype = multipart(list(fields.items()), {"file": ("a.wav", wav)})
            return request(server.base, path, body, ctype)

        server = Server("--kv-type", "f32", model=AED_MODEL)
        try:
            code, _, body = post("/v1/audio/translations", language="en", target_language="de")
            self.assertEqual((code, json.loads(body)["text"]), (200, text["ast_en_de"]["hypothesis"]["text"]))
            code, _, body = post("/v1/audio/translations", language="en", target_language="de", beam_size="4")
            self.assertEqual((code, json.loads(body)["text"]), (200, beam))
            code, _, body = post("/v1/audio/translations", language="en", target_language="de", response_format="verbose_json")
            self.assertEqual((json.loads(body)["task"], json.loads(body)["language"]), ("translate", "de"))
            code, _, body = post("/v1/audio/transcriptions", language="en")
            self.assertEqual((code, json.loads(body)["text"]), (200, text["asr_en_pnc"]["hypothesis"]["text"]))
            code, _, body = post("/v1/audio/translations")  # into English from the model's first language: transcription
            self.assertEqual((code, json.loads(body)["text"]), (200, text["asr_en_pnc"]["hypothesis"]["text"]))
            body, ctype = multipart([("response_format", "verbose_json"), ("timestamp_granularities[]", "word")],
                                    {"file": ("a.wav", wav)})
            code, _, body = request(server.base, "/v1/audio/transcriptions", body, ctype)
            self.assertEqual(code, 200, body)
            ts = text["asr_en_timestamps"]["timestamps"]
            self.assertEqual([(w["word"], round(w["start"], 3), round(w["end"], 3)) for w in json.loads(body)["words"]],
                             [(w["word"], round(w["start"], 3), round(w["end"], 3)) for w in ts["word"]])
            self.assertEqual(json.loads(body)["text"], ts["text_after"])
            events = streamed(server.base, {"stream": "true", "language": "en", "target_language": "de"}, "a.wav", wav,
                              path="/v1/audio/translations")[2]
            self.assertEqual(events[-1]["text"], text["ast_en_de"]["hypothesis"]["text"])
            # Beam search streams its best hypothesis once found: its text, not the pads past its end.
            events = streamed(server.base, {"stream": "true", "language": "en", "target_language": "de", "beam_size": "4"},
                              "a.wav", wav, path="/v1/audio/translations")[2]
            self.assertEqual(events[-1]["text"], beam)
            self.assertEqual("".join(e["delta"] for e in events[:-1]), beam)
            for path, fields, says in (("/v1/audio/transcriptions", {"language": "xx"}, "en, de, es, fr"),
                                       ("/v1/audio/translations", {"target_language": "it"}, "en, de, es, fr"),
                                       ("/v1/audio/transcriptions", {"beam_size": "9"}, "beam_size")):
                code, _, body = post(path, **fields)
                self.assertEqual(code, 400, body)
                self.assertIn(says, json.loads(body)["error"]["message"])
        finally:
            self.assertEqual(server.stop(), 0)
        server = Server(model=PARAKEET_MODEL)
        try:
            code, _, body = post("/v1/audio/translations", target_language="de")
            self.assertEqual(code, 400, body)
            self.assertIn("does not translate", json.loads(body)["error"]["message"])
        finally:
            self.assertEqual(server.stop(), 0)


class WhisperServerTest(unittest.TestCase):
    def test_whisper_routes_give_openai_whispers_tokens_and_segment_fields(self):
        """Whisper (whisper-tiny, F32 cache) on cards_005: verbose_json carries the language (given, or detected
        as transcribe() detects it) and OpenAI's segment fields, with the ids openai/whisper's decode() gave
        (transcribe_ts: their timestamp pairs end at index 12 and the rest is an unfinished segment, which
        transcribe() drops); /v1/audio/translations with without_timestamps (ours) gives decode()'s translate
        ids; a target other than English: 400."""
        wav = (WHISPER_FIXTURE / "audio" / "cards_005.wav").read_bytes()
        golden = WHISPER_FIXTURE / "golden" / "cards_005"
        ts = json.loads((golden / "transcribe_ts" / "decode.json").read_text())
        tr = json.loads((golden / "translate" / "decode.json").read_text())

        def post(path, **fields):
            body, ctype = multipart(list(fields.items()), {"file": ("a.wav", wav)})
            return request(server.base, path, body, ctype)

        server = Server("--kv-type", "f32", model=WHISPER_MODEL)
        try:
            code, _, body = post("/v1/audio/transcriptions", language="en", response_format="verbose_json")
            self.assertEqual(code, 200, body)
            j = json.loads(body)
            self.assertEqual((j["task"], j["language"]), ("transcribe", "en"))
            self.assertEqual([t for s in j["segments"] for t in s["tokens"]], ts["tokens"][:12])
            self.assertEqual(len(j["segments"]), 4)
            for s in j["segments"]:
                self.assertEqual((s["seek"], s["temperature"]), (0, 0.0))
                self.assertAlmostEqual(s["avg_logprob"], ts["avg_logprob"]["value"], delta=ts["avg_logprob"]["suggested_atol"])
                self.assertAlmostEqual(s["no_speech_prob"], ts["no_speech_prob"]["value"], delta=1e-5)
                self.assertIn("compression_ratio", s)
            code, _, body = post("/v1/audio/transcriptions", response_format="verbose_json")
            self.assertEqual(code, 200, body)
            detected = json.loads(body)["language"]
            code, _, body = post("/v1/audio/translations", language=tr["language"], without_timestamps="true",
                                 response_format="verbose_json")
            self.assertEqual(code, 200, body)
            self.assertEqual(json.loads(body)["task"], "translate")
            self.assertEqual([t for s in json.loads(body)["segments"] for t in s["tokens"]], tr["tokens"])
            self.assertEqual(json.loads(body)["text"], tr["text"])
            code, _, body = post("/v1/audio/translations", language="en", target_language="de")
            self.assertEqual(code, 400, body)
            self.assertIn("English (en) only", json.loads(body)["error"]["message"])
            # temperature: a fixed one samples (the segments say it); a list falls back; out of range: 400.
            code, _, body = post("/v1/audio/transcriptions", language="en", temperature="0.5", response_format="verbose_json")
            self.assertEqual(code, 200, body)
            self.assertEqual({s["temperature"] for s in json.loads(body)["segments"]}, {0.5})
            code, _, body = post("/v1/audio/transcriptions", language="en", temperature="0,0.4", response_format="verbose_json")
            self.assertEqual({s["temperature"] for s in json.loads(body)["segments"]}, {0.4})  # random weights: unlikely at 0
            code, _, body = post("/v1/audio/transcriptions", temperature="2")
            self.assertEqual(code, 400, body)
            caps = json.loads(request(server.base, "/v1/models")[2])["data"][0]["capabilities"]
            self.assertTrue(caps["language_detection"])
            self.assertIn(detected, caps["languages"])  # detected: one of the model's codes
        finally:
            self.assertEqual(server.stop(), 0)


class VadServerTest(unittest.TestCase):
    def test_segments_follow_speech(self):
        """--vad: verbose_json segments lie inside the speech regions Silero VAD finds in jfk.wav
        (onnxruntime's regions, from the fixture), with no segment in the silences between them."""
        regions = [(0.290, 2.238), (3.330, 3.774), (4.002, 4.350), (5.378, 7.646), (8.162, 10.622)]
        server = Server("--vad", VAD_MODEL, "--max-new-tokens", "64")
        try:
            code, _, body = transcribe(server.base, JFK, response_format="verbose_json")
            self.assertEqual(code, 200, body)
            segs = json.loads(body)["segments"]
            self.assertGreater(len(segs), 1)
            for seg in segs:
                self.assertTrue(any(b - 0.001 <= seg["start"] and seg["end"] <= e + 0.001 for b, e in regions), seg)
        finally:
            self.assertEqual(server.stop(), 0)
        bad = subprocess.run([SERVER, "-m", MODEL, "--port", "0", "--vad", MODEL], capture_output=True, timeout=60)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("VAD model", bad.stderr.decode())

    def test_chunking_strategy(self):
        """OpenAI's chunking_strategy: "auto" is the server's VAD as it is; a server_vad object with Silero's
        own defaults (threshold 0.5, 30 ms padding, 100 ms silence) is too; 2 s of silence to end speech
        merges jfk.wav's regions (gaps of 0.2 to 1.1 s) into one, and so one segment; bad values are 400."""
        server = Server("--vad", VAD_MODEL, "--max-new-tokens", "64")
        try:
            def segments(**fields):
                code, _, body = transcribe(server.base, JFK, response_format="verbose_json", **fields)
                self.assertEqual(code, 200, body)
                return [(s["start"], s["end"], s["text"]) for s in json.loads(body)["segments"]]
            plain = segments()
            self.assertGreater(len(plain), 1)
            self.assertEqual(segments(chunking_strategy="auto"), plain)
            defaults = {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 30, "silence_duration_ms": 100}
            self.assertEqual(segments(chunking_strategy=json.dumps(defaults)), plain)
            merged = segments(chunking_strategy=json.dumps({"type": "server_vad", "silence_duration_ms": 2000}))
            self.assertLess(len({(s, e) for s, e, _ in merged}), len({(s, e) for s, e, _ in plain}))
            for bad in ("manual", "{\"type\": \"semantic_vad\"}", json.dumps({"type": "server_vad", "threshold": 2})):
                code, _, body = transcribe(server.base, JFK, chunking_strategy=bad)
                self.assertEqual(code, 400, body)
                self.assertEqual(json.loads(body)["error"]["param"], "chunking_strategy")
        finally:
            self.assertEqual(server.stop(), 0)
        server = Server()
        try:
            code, _, body = transcribe(server.base, JFK, chunking_strategy=json.dumps({"type": "server_vad"}))
            self.assertEqual(code, 400, body)
            self.assertIn("--vad", json.loads(body)["error"]["message"])
        finally:
            self.assertEqual(server.stop(), 0)



class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--parallel", "2", "--queue", "64", "--max-new-tokens", "8", "--max-upload-mb", "2",
                            "--kv-type", "f32", "--threads", "1")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def test_health_and_models(self):
        self.assertEqual(request(self.server.base, "/health")[2], b'{"status":"ok"}')
        models = json.loads(request(self.server.base, "/v1/models")[2])
        self.assertEqual(models["object"], "list")
        self.assertEqual(models["data"][0]["id"], "canary-qwen-tiny")

    def test_every_format_and_container(self):
        golden = json.loads((FIXTURE / "golden" / "jfk" / "greedy_ids.json").read_text())[:8]
        for ext in ("wav", "flac", "mp3"):
            data = (AUDIO / f"jfk.{ext}").read_bytes() if ext != "wav" else JFK
            status, ctype, body = transcribe(self.server.base, data, f"jfk.{ext}", model="whisper-1",
                                             response_format="verbose_json", language="en", temperature="0")
            self.assertEqual(status, 200, body)
            j = json.loads(body)
            self.assertEqual(j["task"], "transcribe")
            self.assertEqual(j["language"], "en")
            self.assertAlmostEqual(j["duration"], 11.0, delta=0.1)
            self.assertEqual(len(j["segments"]), 1)
            seg = j["segments"][0]
            self.assertTrue(0 <= seg["start"] < seg["end"] <= 11.0 + 0.1)
            if ext in ("wav", "flac"):  # lossless: exactly the reference's first 8 greedy ids
                self.assertEqual(seg["tokens"], golden, ext)
        status, ctype, body = transcribe(self.server.base, JFK)
        self.assertEqual((status, ctype), (200, "application/json"))
        text = json.loads(body)["text"]
        self.assertEqual(list(json.loads(body)), ["text"])
        status, ctype, body = transcribe(self.server.base, JFK, response_format="text")
        self.assertEqual(body.decode(), text.lstrip() + "\n")
        self.assertTrue(ctype.startswith("text/plain"))
        status, _, body = transcribe(self.server.base, JFK, response_format="srt")
        self.assertRegex(body.decode(), r"^1\n00:00:00,\d{3} --> 00:00:1[01],\d{3}\n" + ".+\n\n$")
        status, ctype, body = transcribe(self.server.base, JFK, response_format="vtt")
        self.assertTrue(body.decode().startswith("WEBVTT\n\n00:00:00."))
        self.assertTrue(ctype.startswith("text/vtt"))

    def test_prompt_is_context_for_canary_qwen(self):
        """OpenAI's prompt reaches Canary-Qwen's chat prompt (tests/test_canary_qwen_prompt.cpp checks where):
        the same ids for the same prompt, other ids than without one; text that is not UTF-8, or too long for
        the decoder's context, is a 400 naming it."""
        golden = json.loads((FIXTURE / "golden" / "jfk" / "greedy_ids.json").read_text())[:8]
        runs = []
        for _ in range(2):
            status, _, body = transcribe(self.server.base, JFK, response_format="verbose_json", prompt="Names: Kennedy")
            self.assertEqual(status, 200, body)
            runs.append(json.loads(body)["segments"][0]["tokens"])
        self.assertEqual(runs[0], runs[1])
        self.assertNotEqual(runs[0], golden)
        body, ctype = multipart([("prompt", "caf\xc3")], {"file": ("a.wav", JFK)})
        body = body.replace("caf\xc3".encode("utf-8"), b"caf\xc3")
        status, _, body = request(self.server.base, "/v1/audio/transcriptions", body, ctype)
        self.assertEqual(status, 400, body)
        self.assertIn("prompt", json.loads(body)["error"]["message"])
        status, _, body = transcribe(self.server.base, JFK, prompt=" word" * 1000)
        self.assertEqual(status, 400, body)
        self.assertIn("exceed the context", json.loads(body)["error"]["message"])

    def assert_error(self, result, code):
        status, ctype, body = result
        self.assertEqual(status, code, body)
        self.assertEqual(ctype, "application/json")
        err = json.loads(body)["error"]
        self.assertTrue(err["message"])
        self.assertIn("type", err)

    def test_error_codes(self):
        base = self.server.base
        body, ctype = multipart({"model": "x"}, {})
        self.assert_error(request(base, "/v1/audio/transcriptions", body, ctype), 400)           # no file
        self.assert_error(transcribe(base, b"RIFF....not really audio" * 50), 400)               # undecodable
        self.assert_error(transcribe(base, b""), 400)                                            # empty upload
        self.assert_error(transcribe(base, JFK, response_format="docx"), 400)                    # bad format
        self.assert_error(transcribe(base, JFK, response_format="diarized_json"), 400)           # no --diarize
        self.assert_error(transcribe(base, JFK, response_format="verbose_json",                   # no word times
                                     extra_fields=[("timestamp_granularities[]", "word")]), 400)
        # Found by fuzz_server: an error message echoing invalid UTF-8 from the form was a 500.
        body = (FIXTURE.parent.parent / "fuzz" / "regressions" / "server" / "invalid-utf8-form-value.bin").read_bytes()
        self.assert_error(request(base, "/v1/audio/transcriptions", body, "multipart/form-data; boundary=fuzzboundary"), 400)
        self.assert_error(transcribe(base, os.urandom(3 * 1024 * 1024)), 413)                    # over 2 MiB
        self.assert_error(request(base, "/v1/audio/transcriptions", b'{"file": 1}', "application/json"), 415)
        self.assert_error(request(base, "/v1/nothing"), 404)
        self.assertEqual(request(base, "/health")[0], 200)

    def test_load_run(self):
        """64 requests from 8 concurrent clients, every 4th one malformed: zero failed good requests."""
        base = self.server.base
        flac = (AUDIO / "jfk_0p7s.flac").read_bytes()
        short = (FIXTURE / "audio" / "jfk_0p7s.wav").read_bytes()

        def one(i):
            if i % 4 == 3:
                return "bad", transcribe(base, b"\x00garbage" * (i + 10))[0]
            return "good", transcribe(base, flac if i % 2 else short, "c.flac" if i % 2 else "c.wav")[0]

        t0 = time.time()
        with cf.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(64)))
        elapsed = time.time() - t0
        good = [s for kind, s in results if kind == "good"]
        bad = [s for kind, s in results if kind == "bad"]
        self.assertEqual(good, [200] * 48)
        self.assertEqual(bad, [400] * 16)
        self.assertEqual(request(base, "/health")[0], 200)
        print(f"\nload run: 64 requests (48 good, 16 malformed) from 8 clients in {elapsed:.2f} s = "
              f"{64 / elapsed:.1f} requests/s", file=sys.stderr)


class QueueLimit(unittest.TestCase):
    def test_full_queue_answers_503(self):
        server = Server("--parallel", "1", "--queue", "1", "--max-new-tokens", "256", "--threads", "1")
        try:
            body, ctype = multipart({}, {"file": ("a.wav", JFK)})
            with cf.ThreadPoolExecutor(6) as pool:
                answers = list(pool.map(lambda _: request(server.base, "/v1/audio/transcriptions", body, ctype, full=True),
                                        range(6)))
            codes = [a[0] for a in answers]
            self.assertTrue(all(a[3].get("Retry-After") == "1" for a in answers if a[0] == 503))
            self.assertIn(503, codes)
            self.assertIn(200, codes)
            self.assertEqual(set(codes), {200, 503})
            self.assertEqual(request(server.base, "/health")[0], 200)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_client_disconnect_aborts_the_run(self):
        import socket
        server = Server("--parallel", "1", "--queue", "4", "--max-new-tokens", "800", "--threads", "1")
        try:
            host, port = server.base.split("//")[1].split(":")
            body, ctype = multipart({}, {"file": ("a.wav", JFK)})
            s = socket.create_connection((host, int(port)))
            s.sendall((f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
            time.sleep(0.3)
            s.close()  # mid-run: the 800-token budget keeps the only session busy far longer than this
            status, _, _ = transcribe(server.base, (FIXTURE / "audio" / "jfk_0p7s.wav").read_bytes())
            self.assertEqual(status, 200)
        finally:
            self.assertEqual(server.stop(), 0)
        # Had the run gone on, it would have finished before the shutdown and counted as a transcription.
        self.assertIn("stopped after 1 transcriptions (1 aborted by clients)", server.last_words)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
