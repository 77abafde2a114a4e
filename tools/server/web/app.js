// transcribe-server's page: a file → its transcript (streamed), the microphone → the Realtime API. It
// uses only the server's public API, so what it shows is what any client gets. Every piece of text from
// a file, a transcript or the server goes into the page as text (textContent), never as markup.
'use strict';

const $ = (id) => document.getElementById(id);

const state = {
  key: '',          // the API key, in memory only
  caps: null,       // /v1/models' capabilities of the loaded model
  model: '',
  audioUrl: null,   // the uploaded file, for the player
  words: [],        // [{start, end, el}] of the shown transcript, in time order
  downloads: [],    // object URLs to revoke
  upload: null,     // the request in flight
  live: null,       // the Listen session
  lastLive: null,   // the last one, its events and recording kept after Stop
};

function authHeaders() {
  return state.key ? { Authorization: 'Bearer ' + state.key } : {};
}

function text(el, value) {
  el.textContent = value;
  return el;
}

function element(tag, className, value) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (value !== undefined) el.textContent = value;
  return el;
}

// 83.4 → "01:23.40"; an hour or more → "1:01:23.40".
function clock(seconds) {
  const s = Math.max(0, seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const mm = String(m).padStart(2, '0'), ss = r.toFixed(2).padStart(5, '0');
  return h > 0 ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

// ---------------------------------------------------------------- the model and its controls

async function loadModel() {
  let response;
  try {
    response = await fetch('/v1/models', { headers: authHeaders() });
  } catch (e) {
    text($('model'), 'the server does not answer: ' + e.message);
    return;
  }
  if (response.status === 401) {
    $('key-panel').hidden = false;
    text($('model'), 'an API key is needed');
    text($('key-status'), state.key ? 'That key was refused.' : '');
    $('api-key').focus();
    return;
  }
  if (!response.ok) {
    text($('model'), 'could not read the model: HTTP ' + response.status);
    return;
  }
  const model = (await response.json()).data[0];
  state.model = model.id;
  state.caps = model.capabilities || {};
  $('key-panel').hidden = true;
  text($('model'), `${model.id} (${model.architecture})`);
  applyCapabilities(state.caps);
}

function fillLanguages(select, languages, first) {
  select.replaceChildren();
  if (first) select.append(new Option(first, ''));
  for (const lang of languages) select.append(new Option(lang, lang));
}

function applyCapabilities(caps) {
  const languages = caps.languages || [];
  $('language-row').hidden = !(caps.language_choice && languages.length > 1);
  fillLanguages($('language'), languages, 'the model\'s default');
  $('translate-row').hidden = !caps.translation;
  fillLanguages($('translate-to'), caps.translation ? languages : [], 'no translation');
  $('beam-row').hidden = !caps.beam_search;
  $('hotwords-row').hidden = !caps.hotwords;
  $('prompt-row').hidden = !caps.prompt;
  $('times-word').disabled = !caps.word_timestamps;
  if (!caps.word_timestamps) $('times-segment').checked = true;
  $('speakers-row').hidden = !caps.diarization;
  $('file').disabled = false;
  $('listen').disabled = !caps.realtime;
  if (!caps.realtime) text($('live-status'), 'live transcription is off on this server');
}

$('key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  state.key = $('api-key').value.trim();
  loadModel();
});

// ---------------------------------------------------------------- a file

const drop = $('drop');
drop.addEventListener('dragover', (event) => {
  event.preventDefault();
  drop.classList.add('over');
});
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (event) => {
  event.preventDefault();
  drop.classList.remove('over');
  const file = event.dataTransfer.files[0];
  if (file && !$('file').disabled) transcribeFile(file);
});
$('file').addEventListener('change', () => {
  const file = $('file').files[0];
  if (file) transcribeFile(file);
});

function wantsSpeakers() {
  return state.caps && state.caps.diarization && $('speakers').checked;
}

function wantsWords() {
  return state.caps && state.caps.word_timestamps && $('times-word').checked;
}

// The request: OpenAI's fields, streamed, with every format the page offers made from the one decode
// (our `formats` extension).
function requestForm(file) {
  const form = new FormData();
  form.append('file', file, file.name);
  form.append('model', state.model);
  form.append('stream', 'true');
  const speakers = wantsSpeakers();
  form.append('response_format', speakers ? 'diarized_json' : 'json');
  form.append('formats', 'text,json,srt,vtt,verbose_json' + (speakers ? ',diarized_json' : ''));
  form.append('timestamp_granularities[]', 'segment');
  if (wantsWords()) form.append('timestamp_granularities[]', 'word');
  const caps = state.caps || {};
  if (!$('language-row').hidden && $('language').value) form.append('language', $('language').value);
  if (caps.beam_search && Number($('beam').value) > 0) form.append('beam_size', String(Number($('beam').value)));
  if (caps.hotwords && $('hotwords').value.trim()) form.append('hotwords', $('hotwords').value.trim());
  if (caps.prompt && $('prompt').value.trim()) form.append('prompt', $('prompt').value.trim());
  const target = caps.translation ? $('translate-to').value : '';
  if (target) form.append('target_language', target);
  return { form, route: target ? '/v1/audio/translations' : '/v1/audio/transcriptions' };
}

// Server-sent events from a growing response text: the complete events past OFFSET, and where the
// next one starts.
function sseEvents(body, offset) {
  const events = [];
  for (;;) {
    const end = body.indexOf('\n\n', offset);
    if (end < 0) break;
    for (const line of body.slice(offset, end).split('\n')) {
      if (line.startsWith('data: ')) {
        try {
          events.push(JSON.parse(line.slice(6)));
        } catch (e) {
          events.push({ type: 'error', error: { message: 'unreadable event from the server' } });
        }
      }
    }
    offset = end + 2;
  }
  return { events, offset };
}

function setStatus(message, isError) {
  const status = $('status');
  text(status, message);
  status.classList.toggle('error', !!isError);
}

function transcribeFile(file) {
  if (state.upload) state.upload.abort();
  $('progress').hidden = false;
  text($('file-name'), file.name);
  $('upload-progress').value = 0;
  text($('streaming-text'), '');
  setStatus('uploading…');
  if (state.audioUrl) URL.revokeObjectURL(state.audioUrl);
  state.audioUrl = URL.createObjectURL(file);

  const { form, route } = requestForm(file);
  const xhr = new XMLHttpRequest();
  state.upload = xhr;
  xhr.open('POST', route);
  for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
  const started = performance.now();
  let offset = 0, formats = null, done = false;
  xhr.upload.onprogress = (event) => {
    if (event.lengthComputable) $('upload-progress').value = event.loaded / event.total;
  };
  xhr.upload.onload = () => {
    $('upload-progress').value = 1;
    setStatus('transcribing…');
  };
  xhr.onprogress = () => {
    if (xhr.status !== 200) return;
    const parsed = sseEvents(xhr.responseText, offset);
    offset = parsed.offset;
    for (const event of parsed.events) {
      if (event.type === 'transcript.text.delta') {
        $('streaming-text').append(document.createTextNode(event.delta));
        setStatus(`transcribing… ${((performance.now() - started) / 1000).toFixed(1)} s`);
      } else if (event.type === 'transcript.formats') {
        formats = event.formats;
      } else if (event.type === 'transcript.text.done') {
        done = true;
      } else if (event.type === 'error') {
        setStatus('the transcription failed: ' + (event.error && event.error.message), true);
      }
    }
  };
  xhr.onloadend = () => {
    if (state.upload === xhr) state.upload = null;
    if (xhr.status === 0) {
      if (xhr.readyState === 4 && !done) setStatus('the connection was lost', true);
      return;
    }
    if (xhr.status !== 200) {
      let message = 'HTTP ' + xhr.status;
      try {
        message = JSON.parse(xhr.responseText).error.message;
      } catch (e) { /* not OpenAI's error shape: the status says it */ }
      if (xhr.status === 401) {
        $('key-panel').hidden = false;
        $('api-key').focus();
      }
      setStatus('the server refused the file: ' + message, true);
      return;
    }
    xhr.onprogress();
    if (!done || !formats) return; // an error event said why
    setStatus(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    showResult(file.name, formats);
  };
  xhr.send(form);
}

// ---------------------------------------------------------------- the transcript

const player = $('player');

function seek(seconds) {
  player.currentTime = seconds;
  player.play().catch(() => { /* a browser that will not play unasked still seeks */ });
}

function speakerClass(label, speakers) {
  if (!speakers.has(label)) speakers.set(label, speakers.size);
  return 'spk-' + (speakers.get(label) % 8);
}

// Which diarized segment (speaker) a time falls in.
function speakerAt(segments, t) {
  for (const s of segments) if (t >= s.start && t < s.end) return s.speaker;
  let best = null, gap = Infinity;
  for (const s of segments) {
    const d = Math.min(Math.abs(t - s.start), Math.abs(t - s.end));
    if (d < gap) gap = d, best = s.speaker;
  }
  return best;
}

function showResult(fileName, formats) {
  const verbose = JSON.parse(formats.verbose_json);
  const diarized = formats.diarized_json ? JSON.parse(formats.diarized_json) : null;
  const speakers = new Map();
  player.src = state.audioUrl;
  const meta = [`language: ${verbose.language}`, `duration: ${clock(verbose.duration)}`];
  if (diarized) meta.push(`speakers: ${new Set(diarized.segments.map((s) => s.speaker)).size}`);
  text($('result-meta'), meta.join(' · '));
  $('result-meta').dataset.language = verbose.language;

  const transcript = $('transcript');
  transcript.replaceChildren();
  transcript.classList.toggle('with-speakers', !!diarized);
  state.words = [];
  const words = verbose.words || [];
  let w = 0;
  const segments = verbose.segments || [];
  segments.forEach((segment, i) => {
    const row = element('div', 'segment');
    row.dataset.index = String(i);
    const time = element('button', 'time', `${clock(segment.start)} → ${clock(segment.end)}`);
    time.type = 'button';
    time.setAttribute('aria-label', `play from ${clock(segment.start)}`);
    time.addEventListener('click', () => seek(segment.start));
    const speaker = element('span', 'speaker');
    if (diarized) {
      const label = speakerAt(diarized.segments, (segment.start + segment.end) / 2);
      if (label !== null) {
        text(speaker, label);
        speaker.className = 'speaker ' + speakerClass(label, speakers);
      }
    }
    const body = element('span', 'text');
    // The segment's words where the model times them (those that start before the next segment does),
    // else its text.
    const next = i + 1 < segments.length ? segments[i + 1].start : Infinity;
    const first = w;
    while (w < words.length && (words[w].start < next || i + 1 === segments.length)) {
      const word = words[w++];
      if (w - 1 > first) body.append(' ');
      const span = element('span', 'word', word.word);
      span.dataset.start = String(word.start);
      span.dataset.end = String(word.end);
      span.addEventListener('click', () => seek(word.start));
      body.append(span);
      state.words.push({ start: word.start, end: word.end, el: span });
    }
    if (w === first) text(body, segment.text);
    row.append(time, speaker, body);
    transcript.append(row);
  });
  if (segments.length === 0) transcript.append(element('p', 'meta', '(no speech)'));

  drawTimeline(diarized, verbose.duration, speakers);
  offerDownloads(fileName, formats);
  $('result').hidden = false;
}

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attributes) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, String(value));
  return el;
}

// One lane per speaker, a bar per diarized segment, and a playhead that follows the player.
function drawTimeline(diarized, duration, speakers) {
  const box = $('timeline-box'), timeline = $('timeline');
  timeline.replaceChildren();
  if (!diarized || !diarized.segments.length || !(duration > 0)) {
    box.hidden = true;
    return;
  }
  for (const s of diarized.segments) speakerClass(s.speaker, speakers);
  const width = 1000, label = 60, lane = 28, height = speakers.size * lane + 8;
  timeline.setAttribute('viewBox', `0 0 ${width} ${height}`);
  timeline.style.height = `${height}px`;
  const x = (t) => label + (width - label - 4) * Math.min(1, t / duration);
  for (const [name, index] of speakers) {
    const title = svg('text', { x: 4, y: 4 + index * lane + lane * 0.65, class: 'lane-label' });
    title.textContent = name;
    timeline.append(title);
  }
  for (const s of diarized.segments) {
    const bar = svg('rect', {
      x: x(s.start), y: 4 + speakers.get(s.speaker) * lane + 4, width: Math.max(2, x(s.end) - x(s.start)),
      height: lane - 8, rx: 3, class: 'turn ' + speakerClass(s.speaker, speakers),
    });
    const tip = svg('title', {});
    tip.textContent = `${s.speaker}: ${clock(s.start)} → ${clock(s.end)}`;
    bar.append(tip);
    bar.addEventListener('click', () => seek(s.start));
    timeline.append(bar);
  }
  const head = svg('line', { x1: label, x2: label, y1: 0, y2: height, class: 'playhead', id: 'playhead' });
  timeline.append(head);
  timeline.dataset.duration = String(duration);
  timeline.dataset.offset = String(label);
  box.hidden = false;
}

// The word being played is highlighted, and the playhead moves with the player.
function followPlayer() {
  const t = player.currentTime;
  for (const w of state.words) w.el.classList.toggle('now', t >= w.start && t < w.end);
  const head = $('playhead');
  if (head) {
    const duration = Number($('timeline').dataset.duration), label = Number($('timeline').dataset.offset);
    const x = label + (1000 - label - 4) * Math.min(1, t / duration);
    head.setAttribute('x1', String(x));
    head.setAttribute('x2', String(x));
  }
}
player.addEventListener('timeupdate', followPlayer);
player.addEventListener('seeked', followPlayer);

const DOWNLOADS = [
  ['text', 'txt', 'text/plain', 'text'],
  ['srt', 'srt', 'application/x-subrip', 'SRT subtitles'],
  ['vtt', 'vtt', 'text/vtt', 'WebVTT subtitles'],
  ['json', 'json', 'application/json', 'JSON'],
  ['verbose_json', 'verbose.json', 'application/json', 'verbose JSON'],
  ['diarized_json', 'diarized.json', 'application/json', 'diarized JSON'],
];

function offerDownloads(fileName, formats) {
  for (const url of state.downloads) URL.revokeObjectURL(url);
  state.downloads = [];
  const list = $('downloads');
  list.replaceChildren();
  const base = fileName.replace(/\.[^.]*$/, '') || 'transcript';
  for (const [format, extension, type, label] of DOWNLOADS) {
    if (!(format in formats)) continue;
    const url = URL.createObjectURL(new Blob([formats[format]], { type }));
    state.downloads.push(url);
    const link = element('a', '', label);
    link.href = url;
    link.download = `${base}.${extension}`;
    link.dataset.format = format;
    const item = element('li');
    item.append(link);
    list.append(item);
  }
}

// ---------------------------------------------------------------- live: the Realtime API

const LIVE_RATE = 24000; // OpenAI's audio/pcm

function base64(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function pcm16(samples) {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; ++i) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    out[i] = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
  }
  return out;
}

function wavBlob(chunks, rate) {
  const n = chunks.reduce((sum, c) => sum + c.length, 0);
  const header = new DataView(new ArrayBuffer(44));
  const ascii = (at, s) => { for (let i = 0; i < s.length; ++i) header.setUint8(at + i, s.charCodeAt(i)); };
  ascii(0, 'RIFF'); header.setUint32(4, 36 + n * 2, true); ascii(8, 'WAVE'); ascii(12, 'fmt ');
  header.setUint32(16, 16, true); header.setUint16(20, 1, true); header.setUint16(22, 1, true);
  header.setUint32(24, rate, true); header.setUint32(28, rate * 2, true); header.setUint16(32, 2, true);
  header.setUint16(34, 16, true); ascii(36, 'data'); header.setUint32(40, n * 2, true);
  return new Blob([header, ...chunks], { type: 'audio/wav' });
}

function liveStatus(message, isError) {
  text($('live-status'), message);
  $('live-status').classList.toggle('error', !!isError);
}

function liveTurn(live, itemId) {
  let turn = live.turns.get(itemId);
  if (!turn) {
    const el = element('li', 'turn pending');
    el.dataset.item = itemId;
    $('live-turns').append(el);
    turn = { el, partial: '' };
    live.turns.set(itemId, turn);
  }
  return turn;
}

function onLiveEvent(live, event) {
  live.events.push(event);
  switch (event.type) {
    case 'session.created':
      live.socket.send(JSON.stringify({
        type: 'session.update',
        session: {
          type: 'transcription',
          audio: {
            input: {
              format: { type: 'audio/pcm', rate: LIVE_RATE },
              transcription: $('language').value && !$('language-row').hidden ? { language: $('language').value } : {},
              turn_detection: state.caps.vad ? { type: 'server_vad' } : null,
            },
          },
        },
      }));
      break;
    case 'session.updated':
      live.ready = true;
      liveStatus(state.caps.vad ? 'listening: speak; a pause ends a turn' : 'listening: Stop ends the turn');
      break;
    case 'input_audio_buffer.speech_started':
      liveTurn(live, event.item_id);
      break;
    case 'conversation.item.input_audio_transcription.delta': {
      const turn = liveTurn(live, event.item_id);
      turn.partial += event.delta;
      text($('live-partial'), turn.partial);
      break;
    }
    case 'conversation.item.input_audio_transcription.completed': {
      const turn = liveTurn(live, event.item_id);
      turn.el.classList.remove('pending');
      text(turn.el, event.transcript || '(nothing heard)');
      text($('live-partial'), '');
      live.completed += 1;
      if (live.closing && live.completed >= live.turns.size) live.socket.close();
      break;
    }
    case 'error':
      if (!(live.closing && event.error && event.error.code === 'input_audio_buffer_commit_empty')) {
        liveStatus('the server said: ' + (event.error && event.error.message), true);
      } else if (live.completed >= live.turns.size) {
        live.socket.close();
      }
      break;
    default:
      break;
  }
}

async function startListening() {
  const live = { socket: null, context: null, stream: null, chunks: [], turns: new Map(), events: [], completed: 0,
                 ready: false, closing: false };
  state.live = live;
  state.lastLive = live;
  $('listen').setAttribute('aria-pressed', 'true');
  text($('listen'), 'Stop');
  $('live-turns').replaceChildren();
  text($('live-partial'), '');
  $('live-recording').hidden = true;
  liveStatus('asking for the microphone…');
  try {
    live.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    // The context runs at the Realtime API's rate: the browser resamples the microphone.
    live.context = new AudioContext({ sampleRate: LIVE_RATE });
    await live.context.audioWorklet.addModule('/web/live-capture.js');
  } catch (e) {
    liveStatus('no microphone: ' + e.message, true);
    stopListening(true);
    return;
  }
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const protocols = ['realtime'];
  if (state.key) protocols.push('openai-insecure-api-key.' + state.key);
  live.socket = new WebSocket(`${scheme}//${location.host}/v1/realtime?intent=transcription`, protocols);
  live.socket.onmessage = (message) => {
    try {
      onLiveEvent(live, JSON.parse(message.data));
    } catch (e) {
      liveStatus('unreadable event from the server', true);
    }
  };
  live.socket.onerror = () => liveStatus('the live connection failed', true);
  live.socket.onclose = () => {
    if (state.live === live) stopListening(true);
    finishRecording(live);
    if (!live.closing) liveStatus('the live connection closed', true);
    else liveStatus(`stopped: ${live.completed} turn${live.completed === 1 ? '' : 's'}`);
  };
  const source = live.context.createMediaStreamSource(live.stream);
  const capture = new AudioWorkletNode(live.context, 'live-capture');
  capture.port.onmessage = (message) => {
    if (!live.ready || live.closing || live.socket.readyState !== WebSocket.OPEN) return;
    const samples = pcm16(message.data);
    live.chunks.push(samples);
    live.socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: base64(new Uint8Array(samples.buffer)) }));
  };
  source.connect(capture);
}

function finishRecording(live) {
  if (!live.chunks.length) return;
  const link = $('live-recording');
  if (link.href.startsWith('blob:')) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(wavBlob(live.chunks, LIVE_RATE));
  link.hidden = false;
}

// Stop: the microphone off at once; the turn being spoken is committed and its transcript awaited.
function stopListening(now) {
  const live = state.live;
  if (!live) return;
  state.live = null;
  live.closing = true;
  $('listen').setAttribute('aria-pressed', 'false');
  text($('listen'), 'Listen');
  if (live.stream) for (const track of live.stream.getTracks()) track.stop();
  if (live.context) live.context.close();
  if (!live.socket) return;
  if (now || live.socket.readyState !== WebSocket.OPEN) {
    if (live.socket.readyState === WebSocket.OPEN) live.socket.close();
    return;
  }
  liveStatus('finishing the last turn…');
  live.socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
  setTimeout(() => live.socket.readyState === WebSocket.OPEN && live.socket.close(), 30000);
}

$('listen').addEventListener('click', () => (state.live ? stopListening(false) : startListening()));

loadModel();
