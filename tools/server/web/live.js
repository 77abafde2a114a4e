// Listen: the microphone streamed to the Realtime API (/v1/realtime?intent=transcription, pcm16 at
// 24 kHz), its deltas and completed turns shown as they come, the recording kept as a WAV.
'use strict';

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
    const el = element('li', 'turn pending', '…');
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
