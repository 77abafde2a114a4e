// transcribe-server's page in Debian's headless Chromium (playwright-core over the DevTools protocol):
// a file uploaded → the page's transcript, words and every download equal the REST responses for the
// same file; a word click seeks the player and the played word is highlighted; speakers drawn from the
// diarizer's segments; Listen streams a fake microphone (a fixture WAV) over the Realtime WebSocket and
// each completed turn equals the REST transcript of the same samples; markup in a transcript or a file
// name stays text; the keyboard alone reaches every control; an API key asked for and used; --no-web.
// Screenshots of each state go to OUT_DIR.
// usage: node test_web.mjs SERVER PARAKEET.gguf VAD.gguf SORTFORMER.gguf CLIP.wav SPEAKERS.wav OUT_DIR
//                          CANARY_AED.gguf AED_CLIP.wav
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const [SERVER, MODEL, VAD, DIARIZER, CLIP, SPEAKERS_CLIP, OUT, AED_MODEL, AED_CLIP] = process.argv.slice(2);
mkdirSync(OUT, { recursive: true });
const KEY = 'web-test-key';
const watchdog = setTimeout(() => {
  console.error('test_web: timed out');
  process.exit(1);
}, 400000);

const servers = [];
function startServer(args, model = MODEL) {
  return new Promise((resolve, reject) => {
    const proc = spawn(SERVER, ['-m', model, '--port', '0', '--threads', '2', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    servers.push(proc);
    let out = '', err = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(`http://127.0.0.1:${m[1]}`);
    });
    proc.stderr.on('data', (d) => (err += d));
    proc.on('exit', (code) => reject(new Error(`server exited (${code}): ${out}${err}`)));
  });
}

// The REST response body for a file, as any client gets it.
async function rest(base, bytes, name, fields, headers = {}, route = '/v1/audio/transcriptions') {
  const form = new FormData();
  form.append('file', new Blob([bytes]), name);
  for (const [k, v] of fields) form.append(k, v);
  const r = await fetch(base + route, { method: 'POST', body: form, headers });
  const body = await r.text();
  assert.equal(r.status, 200, body);
  return body;
}

function wav(pcm, rate) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + pcm.length, 4); h.write('WAVE', 8); h.write('fmt ', 12);
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22); h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34); h.write('data', 36); h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

async function shot(page, name) {
  await page.screenshot({ path: join(OUT, name), fullPage: true });
}

// What the page shows of its transcript.
function shown(page) {
  return page.evaluate(() => ({
    segments: [...document.querySelectorAll('#transcript .segment')].map((row) => ({
      time: row.querySelector('.time').textContent,
      speaker: row.querySelector('.speaker').textContent,
      text: row.querySelector('.text').textContent,
    })),
    words: [...document.querySelectorAll('#transcript .word')].map((w) => ({
      word: w.textContent, start: Number(w.dataset.start), end: Number(w.dataset.end),
    })),
    meta: document.getElementById('result-meta').textContent,
    language: document.getElementById('result-meta').dataset.language,
  }));
}

// Each download link clicked, as a person would, and what the browser saved.
async function downloaded(page, link) {
  const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
  return { name: download.suggestedFilename(), body: readFileSync(await download.path()) };
}

async function downloads(page) {
  const out = {};
  for (const link of await page.locator('#downloads a').all()) {
    const file = await downloaded(page, link);
    out[await link.getAttribute('data-format')] = { name: file.name, body: file.body.toString('utf8') };
  }
  return out;
}

// Where the player seeks to when ACT (a click, a key) is done: the time at its 'seeking' event, before
// any playback moves it on. (Before the file's metadata has loaded a seek only sets where playback will
// start, with no event: wait for it first.)
async function seekOf(page, act) {
  await page.waitForFunction(() => document.getElementById('player').readyState >= 1);
  await page.evaluate(() => {
    window.__seeks = [];
    document.getElementById('player').addEventListener('seeking',
      () => window.__seeks.push(document.getElementById('player').currentTime), { once: true });
  });
  await act();
  await page.waitForFunction(() => window.__seeks.length > 0);
  return page.evaluate(() => window.__seeks[0]);
}

async function upload(page, path, name, buffer) {
  await page.evaluate(() => { document.getElementById('status').textContent = ''; });
  await page.setInputFiles('#file', buffer ? { name, mimeType: 'audio/wav', buffer } : path);
  await page.waitForFunction(() => /^done in|failed|refused|lost/.test(document.getElementById('status').textContent),
    null, { timeout: 60000 });
  const status = await page.evaluate(() => document.getElementById('status').textContent);
  assert.match(status, /^done in/, status);
}

const clip = readFileSync(CLIP), speakersClip = readFileSync(SPEAKERS_CLIP);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${CLIP}`, '--autoplay-policy=no-user-gesture-required'],
});
let failed = false;
try {
  const base = await startServer(['--vad', VAD, '--diarize', DIARIZER]);
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const problems = [];
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => m.type() === 'error' && problems.push('console: ' + m.text()));
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
  });

  // ---- the page, its headers, first paint
  const response = await page.goto(base + '/');
  const csp = response.headers()['content-security-policy'];
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  await page.waitForFunction(() => /\(parakeet/.test(document.getElementById('model').textContent));
  const paint = await page.evaluate(() => performance.getEntriesByType('paint').map((p) => [p.name, p.startTime]));
  console.log('test_web: first paint', JSON.stringify(paint));
  await shot(page, '1-loaded.png');

  // ---- a file: the transcript and every download equal REST's for the same file
  await page.uncheck('#speakers');
  await upload(page, CLIP);
  await shot(page, '2-transcript.png');
  const page1 = await shown(page);
  const verbose = JSON.parse(await rest(base, clip, 'jfk.wav', [['response_format', 'verbose_json'],
    ['timestamp_granularities[]', 'segment'], ['timestamp_granularities[]', 'word']]));
  assert.ok(verbose.words.length > 3, 'the fixture model gives words');
  assert.deepEqual(page1.words, verbose.words.map((w) => ({ word: w.word, start: w.start, end: w.end })));
  assert.deepEqual(page1.segments.map((s) => s.text), verbose.segments.map((s) => s.text));
  assert.equal(page1.language, verbose.language);
  const files = await downloads(page);
  assert.deepEqual(Object.keys(files).sort(), ['json', 'srt', 'text', 'verbose_json', 'vtt']);
  for (const format of ['json', 'text', 'srt', 'vtt']) {
    assert.equal(files[format].body, await rest(base, clip, 'jfk.wav', [['response_format', format]]), format);
  }
  assert.deepEqual(JSON.parse(files.verbose_json.body), verbose);
  assert.equal(files.srt.name, 'jfk.srt');

  // ---- a word click seeks the player; the word at the player's time is the highlighted one
  const second = page1.words[1], last = page1.words[page1.words.length - 1];
  assert.ok(Math.abs(await seekOf(page, () => page.click('#transcript .word >> nth=1')) - second.start) < 0.01);
  const mid = (last.start + last.end) / 2;
  const highlighted = await page.evaluate(async (t) => {
    const player = document.getElementById('player');
    player.pause();
    await new Promise((resolve) => { player.addEventListener('seeked', resolve, { once: true }); player.currentTime = t; });
    return [...document.querySelectorAll('.word.now')].map((w) => w.textContent);
  }, mid);
  assert.deepEqual(highlighted, [last.word]);
  await shot(page, '3-word-highlighted.png');

  // ---- markup in a transcript and in a file name stays text
  const evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  await page.route('**/v1/audio/transcriptions', (route) => {
    const verboseBody = JSON.stringify({ task: 'transcribe', language: '<b>en</b>', duration: 2, text: evil,
      segments: [{ id: 0, start: 0, end: 2, text: evil, tokens: [], truncated: false }],
      words: [{ word: '<script>window.__pwned=3</script>', start: 0, end: 1 }, { word: '<img src=x onerror=window.__pwned=4>', start: 1, end: 2 }] });
    const formats = { text: evil, json: JSON.stringify({ text: evil }), srt: evil, vtt: evil, verbose_json: verboseBody };
    const sse = (e) => `data: ${JSON.stringify(e)}\n\n`;
    route.fulfill({ status: 200, contentType: 'text/event-stream',
      body: sse({ type: 'transcript.text.delta', delta: evil }) + sse({ type: 'transcript.formats', formats }) +
        sse({ type: 'transcript.text.done', text: evil }) });
  });
  const evilName = '<img src=x onerror=window.__pwned=5>.wav';
  await upload(page, null, evilName, clip);
  const markup = await page.evaluate(() => ({
    pwned: window.__pwned,
    elements: document.querySelectorAll('main img, main script, #transcript b, .meta b').length,
    name: document.getElementById('file-name').textContent,
    streamed: document.getElementById('streaming-text').textContent,
    words: [...document.querySelectorAll('#transcript .word')].map((w) => w.textContent),
  }));
  assert.equal(markup.pwned, undefined);
  assert.equal(markup.elements, 0);
  assert.equal(markup.name, evilName);
  assert.equal(markup.streamed, evil);
  assert.deepEqual(markup.words, ['<script>window.__pwned=3</script>', '<img src=x onerror=window.__pwned=4>']);
  await shot(page, '4-markup-as-text.png');
  await page.unroute('**/v1/audio/transcriptions');

  // ---- a file dropped on the page (the drop zone's own handler, with a DataTransfer as a drag brings)
  const dropped = await page.evaluateHandle((bytes) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([new Uint8Array(bytes)], 'dropped.wav', { type: 'audio/wav' }));
    return transfer;
  }, [...clip]);
  await page.evaluate(() => { document.getElementById('status').textContent = ''; });
  await page.dispatchEvent('#drop', 'drop', { dataTransfer: dropped });
  await page.waitForFunction(() => /^done in/.test(document.getElementById('status').textContent), null, { timeout: 60000 });
  assert.equal(await page.evaluate(() => document.getElementById('file-name').textContent), 'dropped.wav');
  assert.deepEqual((await shown(page)).words, page1.words);

  // ---- speakers: the timeline is the diarizer's segments, diarized_json equal to REST's
  await page.check('#speakers');
  await upload(page, SPEAKERS_CLIP);
  await shot(page, '5-speakers.png');
  const diarized = JSON.parse(await rest(base, speakersClip, basename(SPEAKERS_CLIP), [['response_format', 'diarized_json']]));
  const speakerFiles = await downloads(page);
  assert.deepEqual(JSON.parse(speakerFiles.diarized_json.body), diarized);
  const bars = await page.evaluate(() => [...document.querySelectorAll('#timeline rect.turn')].map((r) => r.querySelector('title').textContent));
  assert.equal(bars.length, diarized.segments.length);
  const clock = (s) => `${String(Math.floor(s / 60)).padStart(2, '0')}:${(s % 60).toFixed(2).padStart(5, '0')}`;
  assert.deepEqual(bars, diarized.segments.map((s) => `${s.speaker}: ${clock(s.start)} → ${clock(s.end)}`));
  const lanes = await page.evaluate(() => [...document.querySelectorAll('#timeline .lane-label')].map((t) => t.textContent));
  assert.deepEqual(lanes, [...new Set(diarized.segments.map((s) => s.speaker))]);
  const labelled = (await shown(page)).segments.filter((s) => s.speaker !== '');
  assert.ok(labelled.length > 0, 'speaker labels in the transcript');

  // ---- live: the fake microphone over the Realtime WebSocket
  await page.click('#listen');
  // The microphone loops the clip: listen until turns were completed and one was heard while spoken
  // (a delta needs two hearings of a turn to agree).
  await page.waitForFunction(() => {
    const types = state.lastLive ? state.lastLive.events.map((e) => e.type) : [];
    return types.filter((t) => t === 'conversation.item.input_audio_transcription.completed').length >= 2 &&
      types.includes('conversation.item.input_audio_transcription.delta');
  }, null, { timeout: 120000 });
  await shot(page, '6-live.png');
  await page.click('#listen'); // Stop
  await page.waitForFunction(() => /^stopped/.test(document.getElementById('live-status').textContent), null, { timeout: 60000 });
  const live = await page.evaluate(() => ({
    events: state.lastLive.events,
    turns: [...document.querySelectorAll('#live-turns li')].map((li) => li.textContent),
  }));
  await shot(page, '7-live-stopped.png');
  const saved = await downloaded(page, page.locator('#live-recording'));
  assert.equal(saved.name, 'recording.wav');
  assert.equal(saved.body.readUInt32LE(24), 24000);
  const events = live.events, recording = saved.body.subarray(44);
  const completed = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed');
  const deltas = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta');
  assert.ok(deltas.length >= 1, 'no delta while turns were spoken');
  assert.deepEqual(live.turns, completed.map((c) => c.transcript || '(nothing heard)'));
  let compared = 0;
  for (const c of completed) {
    const started = events.find((e) => e.type === 'input_audio_buffer.speech_started' && e.item_id === c.item_id);
    const stopped = events.find((e) => e.type === 'input_audio_buffer.speech_stopped' && e.item_id === c.item_id);
    if (!started || !stopped) continue; // the turn Stop committed
    const turn = recording.subarray(started.audio_start_ms * 48, Math.min(stopped.audio_end_ms * 48, recording.length));
    const silence = Buffer.alloc(Math.max(0, stopped.audio_end_ms * 48 - recording.length));
    const body = await rest(base, wav(Buffer.concat([turn, silence]), 24000), 'turn.wav', [['response_format', 'json']]);
    assert.equal(c.transcript, JSON.parse(body).text, `turn ${c.item_id}`);
    ++compared;
  }
  assert.ok(compared >= 2, `turns compared with REST: ${compared}`);

  // ---- the keyboard alone: every control reached by Tab, the file chooser and a time button by keys
  const reached = new Set();
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  for (let i = 0; i < 80; ++i) {
    await page.keyboard.press('Tab');
    const id = await page.evaluate(() => {
      const a = document.activeElement;
      return a === document.body ? '' : a.id || (a.dataset && a.dataset.format) || a.className || a.tagName;
    });
    reached.add(id);
  }
  for (const id of ['speakers', 'times-word', 'file', 'listen', 'player', 'time', 'json', 'srt', 'vtt', 'text',
    'verbose_json', 'diarized_json', 'live-recording']) {
    assert.ok(reached.has(id), `Tab never reaches ${id}: ${[...reached].join(', ')}`);
  }
  await page.focus('#file');
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.keyboard.press('Space')]);
  await page.uncheck('#speakers');
  await page.evaluate(() => { document.getElementById('status').textContent = ''; });
  await chooser.setFiles(CLIP);
  await page.waitForFunction(() => /^done in/.test(document.getElementById('status').textContent), null, { timeout: 60000 });
  assert.equal(await page.evaluate(() => document.getElementById('timeline-box').hidden), true);
  await page.focus('#transcript .segment .time');
  assert.ok(Math.abs(await seekOf(page, () => page.keyboard.press('Enter')) - verbose.segments[0].start) < 0.01);
  await shot(page, '8-keyboard.png');
  assert.deepEqual(await page.evaluate(() => window.__violations), []);
  assert.deepEqual(problems, []);

  // ---- a server with an API key: the page asks for it and uses it
  const keyed = await startServer(['--api-key', KEY, '--vad', VAD]);
  const page2 = await browser.newPage();
  await page2.goto(keyed + '/');
  await page2.waitForSelector('#api-key', { state: 'visible' });
  await shot(page2, '9-api-key.png');
  await page2.fill('#api-key', 'wrong');
  await page2.press('#api-key', 'Enter');
  await page2.waitForFunction(() => /refused/.test(document.getElementById('key-status').textContent));
  await page2.fill('#api-key', KEY);
  await page2.press('#api-key', 'Enter');
  await page2.waitForFunction(() => /\(parakeet/.test(document.getElementById('model').textContent));
  await upload(page2, CLIP);
  const keyedWords = (await shown(page2)).words;
  assert.deepEqual(keyedWords, page1.words);
  assert.equal((await fetch(keyed + '/v1/models')).status, 401);
  assert.equal((await fetch(keyed + '/')).status, 200);

  // ---- controls from the model's capabilities: Canary AED's languages, translation and beam search
  const aed = await startServer([], AED_MODEL);
  const page3 = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  await page3.goto(aed + '/');
  await page3.waitForFunction(() => /\(canary/.test(document.getElementById('model').textContent));
  const rows = ['language-row', 'translate-row', 'beam-row', 'hotwords-row', 'prompt-row', 'speakers-row'];
  const visible = await page3.evaluate((ids) => ids.filter((id) => !document.getElementById(id).hidden), rows);
  assert.deepEqual(visible, ['language-row', 'translate-row', 'beam-row']);
  const caps = (await (await fetch(aed + '/v1/models')).json()).data[0].capabilities;
  const offered = await page3.evaluate(() => [...document.querySelectorAll('#translate-to option')].map((o) => o.value));
  assert.deepEqual(offered, ['', ...caps.languages]);
  await page3.selectOption('#language', 'en');
  await page3.selectOption('#translate-to', 'de');
  await page3.fill('#beam', '2');
  await page3.check('#times-segment');
  await upload(page3, AED_CLIP);
  await shot(page3, '10-canary-aed-controls.png');
  const translated = (await downloads(page3)).json.body;
  assert.equal(translated, await rest(aed, readFileSync(AED_CLIP), basename(AED_CLIP), [['response_format', 'json'],
    ['language', 'en'], ['target_language', 'de'], ['beam_size', '2']], {}, '/v1/audio/translations'));
  assert.notEqual(translated, await rest(aed, readFileSync(AED_CLIP), basename(AED_CLIP), [['response_format', 'json']]));

  // ---- --no-web: no page, the API as before; the page's routes take GET and HEAD only
  const plain = await startServer(['--no-web']);
  assert.equal((await fetch(plain + '/')).status, 404);
  assert.equal((await fetch(plain + '/web/app.js')).status, 404);
  assert.equal((await fetch(plain + '/v1/models')).status, 200);
  const post = await fetch(base + '/', { method: 'POST', body: 'x' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
  assert.equal((await fetch(base + '/web/nothing.js')).status, 404);
  console.log('test_web: 1 passed, 0 failed');
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await browser.close();
  for (const proc of servers) proc.kill('SIGTERM');
  clearTimeout(watchdog);
}
process.exit(failed ? 1 : 0);
