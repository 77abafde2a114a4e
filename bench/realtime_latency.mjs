// Realtime API latency and capacity: STREAMS sessions at once, each playing AUDIO (16-kHz mono PCM16
// WAV, then a second of silence) in 20 ms packets at real-time pace (each once its 20 ms have passed,
// as a microphone gives them) to a running transcribe-server;
// for each turn, the time from its end (audio_end_ms, when that audio had been sent) to its
// `completed` event. Prints one JSON line: streams, turns, p50_ms, p95_ms, max_ms.
// usage: node realtime_latency.mjs PORT AUDIO.wav STREAMS [ROUNDS] [STAGGER_MS]
// STAGGER_MS: session i starts i x STAGGER_MS later (0: all at once, every turn ending together).
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

const [port, path, streams, rounds = '1', stagger = '0'] = process.argv.slice(2);
const wav = readFileSync(path);
const data = wav.indexOf('data');
const pcm = Buffer.concat(Array.from({ length: Number(rounds) }, () =>
  Buffer.concat([wav.subarray(data + 8, data + 8 + wav.readUInt32LE(data + 4)), Buffer.alloc(32000)])));

function session(delay) {
  return new Promise((resolve, reject) => setTimeout(() => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/realtime?intent=transcription`);
    const latencies = [];
    let t0 = 0, expected = -1, started = 0;
    ws.on('error', reject);
    ws.on('message', (m) => {
      const e = JSON.parse(m.toString());
      if (e.type === 'session.created') {
        ws.send(JSON.stringify({ type: 'session.update', session: { type: 'transcription', audio: { input: {
          format: { type: 'audio/pcm', rate: 16000 }, turn_detection: { type: 'server_vad' } } } } }));
      } else if (e.type === 'session.updated') {
        t0 = performance.now();
        let k = 0;
        const tick = () => {
          for (; k * 640 < pcm.length && t0 + (k + 1) * 20 <= performance.now(); ++k) { // once "recorded"
            ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm.subarray(k * 640, (k + 1) * 640).toString('base64') }));
          }
          if (k * 640 < pcm.length) setTimeout(tick, 5);
          else expected = started;
          if (expected >= 0 && latencies.length === expected) { ws.close(); resolve(latencies); }
        };
        tick();
      } else if (e.type === 'input_audio_buffer.speech_started') {
        ++started;
      } else if (e.type === 'input_audio_buffer.speech_stopped') {
        ws.stopped = ws.stopped || {};
        ws.stopped[e.item_id] = e.audio_end_ms;
      } else if (e.type === 'conversation.item.input_audio_transcription.completed') {
        latencies.push(performance.now() - (t0 + ws.stopped[e.item_id]));
        if (expected >= 0 && latencies.length === expected) { ws.close(); resolve(latencies); }
      } else if (e.type === 'error') {
        reject(new Error(JSON.stringify(e.error)));
      }
    });
  }, delay));
}

const all = (await Promise.all(Array.from({ length: Number(streams) }, (_, i) => session(i * Number(stagger))))).flat().sort((a, b) => a - b);
const q = (p) => all[Math.min(all.length - 1, Math.floor(p * all.length))];
console.log(JSON.stringify({ streams: Number(streams), stagger_ms: Number(stagger), turns: all.length, p50_ms: Math.round(q(0.5)),
  p95_ms: Math.round(q(0.95)), max_ms: Math.round(all[all.length - 1]) }));
