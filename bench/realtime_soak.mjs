// Realtime soak: SESSIONS sessions at once over wss:, each playing AUDIO (16-kHz mono PCM16 WAV) over and
// over in 20 ms packets at real-time pace for MINUTES, server_vad turns (or TURNS=semantic_vad). Checks,
// per session: no error event; every turn that started was committed and completed, in order, the turns'
// audio [audio_start_ms, audio_end_ms) increasing and inside what was sent, the audio after the last turn
// being the session's last buffer; while it runs, /health answers every second (its slowest answer
// kept) and the server's RSS is read every 10 s. Prints one JSON line.
// usage: node realtime_soak.mjs PORT CA.pem AUDIO.wav SESSIONS MINUTES SERVER_PID [TURNS]
import { readFileSync } from 'node:fs';
import https from 'node:https';
import WebSocket from 'ws';

const [port, caPath, path, sessions, minutes, pid, turns = 'server_vad'] = process.argv.slice(2);
const ca = readFileSync(caPath);
const wav = readFileSync(path);
const data = wav.indexOf('data');
const clip = wav.subarray(data + 8, data + 8 + wav.readUInt32LE(data + 4));
const packets = Math.floor((Number(minutes) * 60 * 1000) / 20);

function rssMb() {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return Number(m[1]) / 1024;
}

function health() {
  return new Promise((resolve) => {
    const t = performance.now();
    https.get({ host: '127.0.0.1', port, path: '/health', ca, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200 ? performance.now() - t : -1));
    }).on('error', () => resolve(-1)).on('timeout', function () { this.destroy(); });
  });
}

function session(index) {
  return new Promise((resolve) => {
    const ws = new WebSocket(`wss://127.0.0.1:${port}/v1/realtime?intent=transcription`, { ca });
    const problems = [];
    const items = new Map(); // item_id -> {start, end, committed, completed}
    let t0 = 0, sent = 0, k = 0, done = false;
    const finish = () => {
      if (done) return;
      done = true;
      let last = -1;
      const ids = [...items.keys()];
      for (const [id, t] of items) {
        const open = id === ids[ids.length - 1] && t.end === undefined; // still spoken: the last buffer
        if (!open && (!t.committed || !t.completed)) problems.push(`${id}: ${t.committed ? '' : 'not committed '}${t.completed ? '' : 'not completed'}`);
        if (t.start !== undefined && t.start < last) problems.push(`${id}: starts at ${t.start} before the last turn's end ${last}`);
        if (t.end !== undefined) {
          if (t.end > sent / 32 + 1) problems.push(`${id}: ends at ${t.end} ms, past the ${sent / 32} ms sent`);
          last = t.end;
        }
      }
      ws.close();
      resolve({ index, turns: items.size, sent_ms: sent / 32, last_turn_end_ms: last, problems });
    };
    ws.on('error', (e) => { problems.push(String(e.message)); finish(); });
    ws.on('message', (m) => {
      const e = JSON.parse(m.toString());
      const item = (id) => { if (!items.has(id)) items.set(id, {}); return items.get(id); };
      if (e.type === 'session.created') {
        ws.send(JSON.stringify({ type: 'session.update', session: { type: 'transcription', audio: { input: {
          format: { type: 'audio/pcm', rate: 16000 }, turn_detection: { type: turns } } } } }));
      } else if (e.type === 'session.updated') {
        t0 = performance.now();
        const tick = () => {
          for (; k < packets && t0 + (k + 1) * 20 <= performance.now(); ++k) {
            const at = (k * 640) % clip.length, chunk = clip.subarray(at, Math.min(at + 640, clip.length));
            ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: chunk.toString('base64') }));
            sent += chunk.length;
          }
          if (k < packets) setTimeout(tick, 5);
          else setTimeout(finish, 15000); // the turns still being transcribed
        };
        tick();
      } else if (e.type === 'input_audio_buffer.speech_started') {
        item(e.item_id).start = e.audio_start_ms;
      } else if (e.type === 'input_audio_buffer.speech_stopped') {
        item(e.item_id).end = e.audio_end_ms;
      } else if (e.type === 'input_audio_buffer.committed') {
        item(e.item_id).committed = true;
      } else if (e.type === 'conversation.item.input_audio_transcription.completed') {
        item(e.item_id).completed = true;
      } else if (e.type === 'error') {
        problems.push(`error event: ${JSON.stringify(e.error)}`);
      }
    });
  });
}

const rss = [];
const healthMs = [];
let healthFailures = 0;
const t0 = performance.now();
const sampler = setInterval(() => rss.push({ s: Math.round((performance.now() - t0) / 1000), mb: Math.round(rssMb()) }), 10000);
const poller = setInterval(async () => {
  const ms = await health();
  if (ms < 0) ++healthFailures; else healthMs.push(ms);
}, 1000);
const results = await Promise.all(Array.from({ length: Number(sessions) }, (_, i) => session(i)));
clearInterval(sampler);
clearInterval(poller);
const afterFirstMinute = rss.filter((r) => r.s > 60).map((r) => r.mb);
console.log(JSON.stringify({
  sessions: Number(sessions), minutes: Number(minutes), turn_detection: turns,
  turns: results.reduce((n, r) => n + r.turns, 0),
  sessions_with_problems: results.filter((r) => r.problems.length).map((r) => ({ index: r.index, problems: r.problems.slice(0, 5) })),
  health: { answered: healthMs.length, failed: healthFailures, slowest_ms: Math.round(Math.max(0, ...healthMs)) },
  rss_mb: { at_60s: rss.find((r) => r.s >= 60)?.mb, min_after_60s: Math.min(...afterFirstMinute), max_after_60s: Math.max(...afterFirstMinute), samples: rss },
}));
process.exit(results.some((r) => r.problems.length) || healthFailures ? 1 : 0);
