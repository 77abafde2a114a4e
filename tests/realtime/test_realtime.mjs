// transcribe-server's Realtime API against OpenAI's own Node SDK (openai v7, OpenAIRealtimeWS with
// intent 'transcription'), over wss: to a certificate made here: a recording streamed in 20 ms packets
// at real-time pace gives speech_started/stopped per turn, deltas, and completed transcripts equal to
// the REST route's for each turn's own samples; bad events get error events and the session goes on.
// usage: node test_realtime.mjs SERVER MODEL.gguf VAD.gguf CLIP.wav
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { KEY, ca, dir, wavSamples, wav, startServer, rest, connect, sleep } from './realtime_client.mjs';

const [SERVER, MODEL, VAD, CLIP] = process.argv.slice(2);
const pcm = wavSamples(CLIP);
const { proc, port } = await startServer(SERVER, ['-m', MODEL, '--vad', VAD]);
let failed = false;
try {
  // ---- server_vad, a recording at real-time pace
  {
    const { rt, events, next } = await connect(port);
    await next((e) => e.type === 'session.created');
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: {
      format: { type: 'audio/pcm', rate: 16000 },
      turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 } } } } });
    const updated = await next((e) => e.type === 'session.updated');
    assert.equal(updated.session.audio.input.format.rate, 16000);
    const audio = Buffer.concat([pcm, Buffer.alloc(32000)]); // one second of silence ends the last turn
    const t0 = Date.now();
    for (let at = 0, k = 0; at < audio.length; at += 640, ++k) {
      rt.send({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + 640).toString('base64') });
      const wait = t0 + (k + 1) * 20 - Date.now();
      if (wait > 0) await sleep(wait);
    }
    const started = () => events.filter((e) => e.type === 'input_audio_buffer.speech_started');
    await next((e) => e.type === 'conversation.item.input_audio_transcription.completed' &&
      e.item_id === started()[started().length - 1]?.item_id && started().length >= 3);
    const stopped = events.filter((e) => e.type === 'input_audio_buffer.speech_stopped');
    const completed = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    const deltas = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta');
    assert.ok(started().length >= 3 && started().length <= 4, `turns: ${started().length}`);
    assert.equal(stopped.length, started().length);
    assert.equal(completed.length, started().length);
    // (Whether a turn this short is heard twice while spoken depends on the machine's speed: the
    // cadence backs off to keep partials under half of real time. The section after this one asserts
    // deltas on a turn held open until they come.)
    let previous = null;
    for (const [i, s] of started().entries()) {
      const order = events.filter((e) => e.item_id === s.item_id).map((e) => e.type);
      assert.equal(order[0], 'input_audio_buffer.speech_started');
      assert.equal(order[order.length - 1], 'conversation.item.input_audio_transcription.completed');
      assert.ok(order.indexOf('input_audio_buffer.speech_stopped') < order.indexOf('input_audio_buffer.committed'));
      const committed = events.find((e) => e.type === 'input_audio_buffer.committed' && e.item_id === s.item_id);
      assert.equal(committed.previous_item_id, previous);
      previous = s.item_id;
      for (const d of deltas.filter((e) => e.item_id === s.item_id)) {
        assert.ok(events.indexOf(d) < events.indexOf(completed[i]), 'a delta after its turn completed');
      }
      // The turn's transcript is the REST route's for the turn's samples.
      const end = stopped[i].audio_end_ms;
      const turn = pcm.subarray(s.audio_start_ms * 32, Math.min(end * 32, pcm.length));
      const silence = Buffer.alloc(Math.max(0, end * 32 - pcm.length));
      assert.equal(completed[i].transcript, await rest(port, wav(Buffer.concat([turn, silence]))), `turn ${i}`);
    }

    // ---- bad events: an error each, and the session goes on
    const errorsBefore = events.filter((e) => e.type === 'error').length;
    rt.socket.send('this is not json');
    rt.socket.send(JSON.stringify({ type: 'input_audio_buffer.explode' }));
    rt.socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: '***not base64***' }));
    rt.socket.send('x'.repeat(2 << 20)); // over the 1 MiB message limit
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcmu' } } } } });
    // an offline model cannot say where an utterance ends
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { turn_detection: { type: 'semantic_vad' } } } } });
    rt.send({ type: 'input_audio_buffer.clear' });
    await next((e) => e.type === 'input_audio_buffer.cleared');
    const codes = events.filter((e) => e.type === 'error').slice(errorsBefore).map((e) => e.error.code);
    assert.deepEqual(codes, ['invalid_json', 'unknown_event', 'invalid_base64', 'message_too_large', 'invalid_value', 'invalid_value']);
    rt.close();
  }

  // ---- deltas while a turn is spoken: one turn held open (server_vad waiting out 5 s of silence, longer
  // than the clip's pauses) and fed the clip over and over at twice real time until two hearings agree,
  // however slowly this machine hears; then the commit completes it, after every delta.
  {
    const { rt, events, next } = await connect(port);
    await next((e) => e.type === 'session.created');
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: {
      format: { type: 'audio/pcm', rate: 16000 },
      turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 5000 } } } } });
    await next((e) => e.type === 'session.updated');
    const isDelta = (e) => e.type === 'conversation.item.input_audio_transcription.delta';
    const loops = 8, packet = 3200; // 100 ms packets
    const t0 = Date.now();
    let sent = 0;
    for (let k = 0; sent < loops * pcm.length && !events.some(isDelta); ++k) {
      const at = sent % pcm.length;
      rt.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(at, Math.min(at + packet, pcm.length)).toString('base64') });
      sent += Math.min(packet, pcm.length - at);
      const wait = t0 + (k + 1) * 50 - Date.now();
      if (wait > 0) await sleep(wait);
    }
    assert.ok(events.some(isDelta), `no delta while a turn was spoken (${(sent / 32000).toFixed(1)} s of audio)`);
    console.log(`realtime: a delta after ${(sent / 32000).toFixed(1)} s of one turn (${Date.now() - t0} ms)`);
    rt.send({ type: 'input_audio_buffer.commit' });
    const done = await next((e) => e.type === 'conversation.item.input_audio_transcription.completed', 120000);
    const deltas = events.filter(isDelta);
    assert.equal(events.filter((e) => e.type === 'input_audio_buffer.speech_started').length, 1);
    assert.ok(deltas.every((d) => d.item_id === done.item_id && events.indexOf(d) < events.indexOf(done)));
    rt.close();
  }

  // ---- turns by commit (turn_detection null): the committed audio's transcript is REST's
  {
    const { rt, events, next } = await connect(port);
    await next((e) => e.type === 'session.created');
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: {
      format: { type: 'audio/pcm', rate: 16000 }, turn_detection: null } } } });
    await next((e) => e.type === 'session.updated');
    rt.send({ type: 'input_audio_buffer.commit' }); // nothing yet: an error
    await next((e) => e.type === 'error');
    assert.equal(events.find((e) => e.type === 'error').error.code, 'input_audio_buffer_commit_empty');
    const part = pcm.subarray(0, 3 * 32000);
    for (let at = 0; at < part.length; at += 9600) {
      rt.send({ type: 'input_audio_buffer.append', audio: part.subarray(at, at + 9600).toString('base64') });
    }
    rt.send({ type: 'input_audio_buffer.commit' });
    const done = await next((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.equal(done.transcript, await rest(port, wav(part)));
    assert.equal(events.filter((e) => e.type === 'input_audio_buffer.speech_started').length, 0);
    rt.close();
  }

  // ---- OpenAI's own rate: audio/pcm at 24 kHz, the session's default; by commit
  {
    const { rt, events, next } = await connect(port);
    const created = await next((e) => e.type === 'session.created');
    assert.equal(created.session.audio.input.format.rate, 24000);
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { turn_detection: null } } } });
    const updated = await next((e) => e.type === 'session.updated');
    assert.equal(updated.session.audio.input.format.rate, 24000);
    // The clip's first 3 s at 24 kHz (linear interpolation: any signal will do, REST gets the same one).
    const n16 = 3 * 16000, n24 = 3 * 24000, up = Buffer.alloc(2 * n24);
    for (let i = 0; i < n24; ++i) {
      const x = (i * 2) / 3, j = Math.floor(x), f = x - j;
      const a = pcm.readInt16LE(2 * j), b = pcm.readInt16LE(2 * Math.min(j + 1, n16 - 1));
      up.writeInt16LE(Math.round(a + f * (b - a)), 2 * i);
    }
    for (let at = 0; at < up.length; at += 9600) {
      rt.send({ type: 'input_audio_buffer.append', audio: up.subarray(at, at + 9600).toString('base64') });
    }
    rt.send({ type: 'input_audio_buffer.commit' });
    const committed = await next((e) => e.type === 'input_audio_buffer.committed');
    const done = await next((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.equal(done.item_id, committed.item_id);
    assert.equal(done.usage.seconds, 3);
    assert.equal(done.transcript, await rest(port, wav(up, 24000)));
    rt.close();
  }

  // ---- the API key holds for the WebSocket too
  {
    const client = new OpenAI({ apiKey: 'wrong', baseURL: `https://127.0.0.1:${port}/v1` });
    const rt = await OpenAIRealtimeWS.create(client, { intent: 'transcription', options: { ca } });
    rt.on('error', () => {});
    const outcome = await new Promise((resolve) => {
      rt.socket.once('open', () => resolve('open'));
      rt.socket.once('unexpected-response', (_req, res) => resolve(res.statusCode));
      rt.socket.once('error', (e) => resolve(String(e.message)));
    });
    assert.ok(outcome === 401 || /401/.test(String(outcome)), `wrong key: ${outcome}`);
  }
  console.log('realtime: ok');
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  proc.removeAllListeners('exit');
  proc.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true }); // the certificate and its key
}
process.exitCode = failed ? 1 : 0;
