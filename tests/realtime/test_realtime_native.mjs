// A model that transcribes as it hears (NeMo's cache-aware streaming end-of-utterance model) behind
// transcribe-server's Realtime API, through OpenAI's own Node SDK over wss:. semantic_vad: the clip
// streamed once gives a turn per <EOU>, each turn's transcript NeMo's streaming text up to that <EOU>
// (streaming-tiny's golden), its deltas joining into it; a commit ends the last turn with the rest.
// server_vad still works, and 24 kHz audio (OpenAI's rate) is resampled.
// usage: node test_realtime_native.mjs SERVER MODEL.gguf VAD.gguf CLIP.wav STREAM_GOLDEN.json
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { dir, wavSamples, startServer, connect } from './realtime_client.mjs';

const [SERVER, MODEL, VAD, CLIP, GOLDEN] = process.argv.slice(2);
const pcm = wavSamples(CLIP);
const golden = JSON.parse(readFileSync(GOLDEN, 'utf8'));
// NeMo's text cut at each <EOU>; NeMo writes no space before , . ' (the tokenizer's text does).
const nemoTurns = golden.final_rnnt_text.split('<EOU>').map((t) => t.trim());
const nemoSpaces = (t) => t.replace(/ (?=[,.'])/g, '');
const { proc, port } = await startServer(SERVER, ['-m', MODEL, '--vad', VAD]);
let failed = false;

const is = (type) => (e) => e.type === type;
async function session(turnDetection, rate) {
  const c = await connect(port);
  await c.next(is('session.created'));
  c.rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: {
    format: { type: 'audio/pcm', rate }, turn_detection: turnDetection } } } });
  const updated = await c.next(is('session.updated'));
  return { ...c, updated };
}
function send(rt, audio) {
  for (let at = 0; at < audio.length; at += 3200) {
    rt.send({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + 3200).toString('base64') });
  }
}

try {
  // ---- semantic_vad: turns where the model says <EOU>
  {
    const { rt, events, next, updated } = await session({ type: 'semantic_vad' }, 16000);
    assert.equal(updated.session.audio.input.turn_detection.type, 'semantic_vad');
    send(rt, pcm);
    const completedCount = () => events.filter(is('conversation.item.input_audio_transcription.completed')).length;
    await next(() => completedCount() >= nemoTurns.length - 1, 60000); // every <EOU> heard
    rt.send({ type: 'input_audio_buffer.commit' }); // the audio after the last one
    await next(() => completedCount() >= nemoTurns.length, 60000);
    const completed = events.filter(is('conversation.item.input_audio_transcription.completed'));
    assert.deepEqual(completed.map((e) => nemoSpaces(e.transcript)), nemoTurns);
    for (const [i, c] of completed.entries()) {
      const mine = events.filter((e) => e.item_id === c.item_id);
      const deltas = mine.filter(is('conversation.item.input_audio_transcription.delta')).map((e) => e.delta).join('');
      assert.equal(deltas.trim(), c.transcript, `turn ${i}: its deltas`);
      assert.equal(mine[mine.length - 1], c, `turn ${i}: completed last`);
      assert.ok(mine.some(is('input_audio_buffer.committed')), `turn ${i}: committed`);
      if (i < nemoTurns.length - 1) { // ended by the model: started, stopped at its <EOU>, committed
        assert.deepEqual(mine.map((e) => e.type).filter((t) => t.startsWith('input_audio_buffer.')),
          ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed']);
        const stopped = mine.find(is('input_audio_buffer.speech_stopped'));
        assert.ok(stopped.audio_end_ms >= golden.eou_events[i].time_s * 1000, `turn ${i} stopped at ${stopped.audio_end_ms} ms`);
      }
    }
    assert.deepEqual(events.filter(is('error')).map((e) => e.error.message), []);
    rt.close();
  }

  // ---- server_vad and OpenAI's 24 kHz: the detector's turns, each streamed through the model
  {
    const { rt, events, next } = await session({ type: 'server_vad', silence_duration_ms: 500 }, 24000);
    const n = pcm.length / 2, n24 = Math.floor((n * 3) / 2);
    const up = Buffer.alloc(2 * n24 + 48000); // linear interpolation, then a second of silence
    for (let i = 0; i < n24; ++i) {
      const x = (i * 2) / 3, j = Math.floor(x), f = x - j;
      const a = pcm.readInt16LE(2 * j), b = pcm.readInt16LE(2 * Math.min(j + 1, n - 1));
      up.writeInt16LE(Math.round(a + f * (b - a)), 2 * i);
    }
    send(rt, up);
    const started = () => events.filter(is('input_audio_buffer.speech_started'));
    await next(() => started().length > 0 && events.some((e) =>
      e.type === 'conversation.item.input_audio_transcription.completed' && e.item_id === started()[started().length - 1].item_id), 60000);
    for (const s of started()) {
      const types = events.filter((e) => e.item_id === s.item_id).map((e) => e.type);
      assert.ok(types.indexOf('input_audio_buffer.speech_stopped') < types.indexOf('input_audio_buffer.committed'));
      assert.equal(types[types.length - 1], 'conversation.item.input_audio_transcription.completed');
    }
    assert.deepEqual(events.filter(is('error')).map((e) => e.error.message), []);
    rt.close();
  }
  console.log('realtime native: ok');
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  proc.removeAllListeners('exit');
  proc.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
