// What the Realtime tests share: a self-signed certificate, the server over TLS, WAV helpers, the REST
// route, a connection through OpenAI's own Node SDK with its events collected in order.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import https from 'node:https';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';

export const KEY = 'realtime-test-key';

// A self-signed certificate for 127.0.0.1 (the client trusts it as its CA).
export const dir = mkdtempSync(join(tmpdir(), 'transcribe-rt-'));
const certPath = join(dir, 'cert.pem'), keyPath = join(dir, 'key.pem');
execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath,
  '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
export const ca = readFileSync(certPath);

// The clip's 16-bit samples (a 16 kHz mono PCM WAV).
export function wavSamples(path) {
  const b = readFileSync(path);
  let at = 12;
  while (at < b.length) {
    const id = b.toString('ascii', at, at + 4), size = b.readUInt32LE(at + 4);
    if (id === 'fmt ') {
      assert.equal(b.readUInt16LE(at + 8), 1); assert.equal(b.readUInt16LE(at + 10), 1);
      assert.equal(b.readUInt32LE(at + 12), 16000); assert.equal(b.readUInt16LE(at + 22), 16);
    }
    if (id === 'data') return b.subarray(at + 8, at + 8 + size);
    at += 8 + size + (size & 1);
  }
  throw new Error('no data chunk');
}
export function wav(pcm, rate = 16000) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + pcm.length, 4); h.write('WAVE', 8); h.write('fmt ', 12);
  h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22); h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28); h.writeUInt16LE(2, 32); h.writeUInt16LE(16, 34); h.write('data', 36); h.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([h, pcm]);
}

// SERVER with its arguments ARGS (a model, a VAD ...), over TLS with the key.
export function startServer(SERVER, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(SERVER, [...args, '--port', '0', '--threads', '2', '--api-key', KEY,
      '--tls-cert', certPath, '--tls-key', keyPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on https:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve({ proc, port: Number(m[1]) });
    });
    proc.stderr.on('data', () => {});
    proc.on('exit', (code) => reject(new Error(`server exited (${code}): ${out}`)));
  });
}

// The REST route's transcript of a WAV (multipart upload over HTTPS).
export function rest(port, wavBytes) {
  const boundary = 'rtboundary' + Math.random().toString(16).slice(2);
  const body = Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="t.wav"\r\n` +
    'Content-Type: audio/wav\r\n\r\n'), wavBytes, Buffer.from(`\r\n--${boundary}--\r\n`)]);
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: '/v1/audio/transcriptions', method: 'POST', ca,
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': body.length,
        Authorization: `Bearer ${KEY}` } }, (res) => {
      let data = '';
      res.on('data', (d) => (data += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(data).text) : reject(new Error(`${res.statusCode} ${data}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// A realtime connection through the SDK, its events collected in order.
export async function connect(port) {
  const client = new OpenAI({ apiKey: KEY, baseURL: `https://127.0.0.1:${port}/v1` });
  const rt = await OpenAIRealtimeWS.create(client, { intent: 'transcription', options: { ca } });
  const events = [];
  const waiters = [];
  rt.socket.on('message', (data) => {
    const e = JSON.parse(data.toString());
    events.push(e);
    for (const w of waiters.splice(0)) w();
  });
  rt.on('error', () => {}); // error events are checked in `events`
  const next = (pred, ms = 20000) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out waiting; events: ' + JSON.stringify(events.map((x) => x.type)))), ms);
    const check = () => {
      const e = events.find(pred);
      if (e) {
        clearTimeout(timer);
        return resolve(e);
      }
      waiters.push(check);
    };
    check();
  });
  await new Promise((resolve, reject) => { rt.socket.once('open', resolve); rt.socket.once('error', reject); });
  return { rt, events, next };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
