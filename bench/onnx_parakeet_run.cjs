// Runs a Parakeet exported by bench/export_parakeet_onnx.py with onnxruntime-node on one mel spectrogram,
// as a user of onnxruntime would: one session per graph, the graph optimizer at its highest level,
// THREADS intra-op threads. The encoder alone, or with --decoder-joint the greedy transducer decoding
// over its output too (TDT with durations, else RNNT; max_symbols per frame), one decoder+joint call per
// step as NeMo's exported graph is made to be called. Prints one JSON line: the median encoder and decode
// times (ms) of RUNS after WARMUP runs, the output's shape, the tokens; with --out also the encoder's
// output (F32 [frames, d_model], for a check against ours or NeMo's).
//   NODE_PATH=ORT_NODE_MODULES node bench/onnx_parakeet_run.cjs --encoder E.onnx --mel MEL.npy --n-valid N
//       [--threads 2] [--runs 5] [--warmup 1] [--decoder-joint DJ.onnx --config decoder_joint.json] [--out Y.npy]
// MEL.npy: F32 [n_mels, frames] (TRANSCRIBE_DUMP_DIR's mel.npy, or a fixture's golden mel.npy); N: the
// valid frames (NeMo's length).
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readNpyF32(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  if (!/'descr': '<f4'/.test(header) || /'fortran_order': True/.test(header)) throw new Error(`${path}: not C-order <f4`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + 10 + headerLen, buf.byteOffset + buf.length));
  return { shape, data };
}

function writeNpyF32(path, shape, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1'); head[6] = 1; head[7] = 0; head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

function options(argv) {
  const o = { threads: '2', runs: '5', warmup: '1' };
  for (let i = 0; i < argv.length; i += 2) o[argv[i].replace(/^--/, '').replace(/-/g, '_')] = argv[i + 1];
  for (const k of ['encoder', 'mel', 'n_valid']) if (!o[k]) throw new Error(`--${k.replace(/_/g, '-')} is required`);
  return o;
}

function argmax(a, from, to) {
  let best = from;
  for (let i = from + 1; i < to; ++i) if (a[i] > a[best]) best = i;
  return best;
}

// Greedy transducer decoding over ENC [1, d, T]: NeMo's rules (a blank or a zero duration after
// max_symbols tokens on a frame moves on; TDT: the predicted duration, at least 1 after a blank).
async function decode(session, cfg, enc) {
  const [, d, T] = enc.dims;
  const frame = new Float32Array(d);
  const names = session.inputNames, outs = session.outputNames;
  const zeros = () => new ort.Tensor('float32', new Float32Array(cfg.pred_layers * cfg.pred_hidden), [cfg.pred_layers, 1, cfg.pred_hidden]);
  let s1 = zeros(), s2 = zeros(), last = cfg.blank, tokens = [], onFrame = 0;
  for (let t = 0; t < T;) {
    for (let c = 0; c < d; ++c) frame[c] = enc.data[c * T + t];
    const feeds = {
      [names[0]]: new ort.Tensor('float32', frame, [1, d, 1]),
      [names[1]]: new ort.Tensor('int32', Int32Array.from([last]), [1, 1]),
      [names[2]]: new ort.Tensor('int32', Int32Array.from([1]), [1]),
    };
    feeds[names[3]] = s1; feeds[names[4]] = s2;
    const r = await session.run(feeds);
    const logits = r[outs[0]].data;
    const k = argmax(logits, 0, cfg.blank + 1);
    const first = cfg.blank + 1; // the durations' logits follow the tokens' and the blank's
    let step = cfg.durations.length ? cfg.durations[argmax(logits, first, first + cfg.durations.length) - first] : (k === cfg.blank ? 1 : 0);
    if (k !== cfg.blank) {
      tokens.push(k); last = k; s1 = r[outs[2]]; s2 = r[outs[3]]; ++onFrame;
    } else if (step === 0) {
      step = 1;
    }
    if (step === 0 && onFrame >= cfg.max_symbols) step = 1;
    if (step > 0) { t += step; onFrame = 0; }
  }
  return tokens;
}

async function main() {
  const o = options(process.argv.slice(2));
  const mel = readNpyF32(o.mel);
  const [nMels, frames] = mel.shape;
  const so = { intraOpNumThreads: Number(o.threads), interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential' };
  const encoder = await ort.InferenceSession.create(o.encoder, so);
  const decoderJoint = o.decoder_joint ? await ort.InferenceSession.create(o.decoder_joint, so) : null;
  const cfg = o.config ? JSON.parse(fs.readFileSync(o.config, 'utf8')) : null;
  const feeds = {
    [encoder.inputNames[0]]: new ort.Tensor('float32', mel.data, [1, nMels, frames]),
    [encoder.inputNames[1]]: new ort.Tensor('int64', BigInt64Array.from([BigInt(o.n_valid)]), [1]),
  };
  const encMs = [], decMs = [];
  let y, tokens = [];
  for (let i = 0; i < Number(o.warmup) + Number(o.runs); ++i) {
    const t0 = process.hrtime.bigint();
    y = (await encoder.run(feeds))[encoder.outputNames[0]];
    const t1 = process.hrtime.bigint();
    if (decoderJoint) tokens = await decode(decoderJoint, cfg, y);
    const t2 = process.hrtime.bigint();
    if (i >= Number(o.warmup)) { encMs.push(Number(t1 - t0) / 1e6); decMs.push(Number(t2 - t1) / 1e6); }
  }
  if (o.out) { // [1, d, T] -> [T, d], as our dumps and NeMo's goldens lay it out
    const [, d, T] = y.dims, t = new Float32Array(d * T);
    for (let c = 0; c < d; ++c) for (let f = 0; f < T; ++f) t[f * d + c] = y.data[c * T + f];
    writeNpyF32(o.out, [T, d], t);
  }
  const median = a => +[...a].sort((x, z) => x - z)[Math.floor(a.length / 2)].toFixed(1);
  console.log(JSON.stringify({ encoder: o.encoder, threads: Number(o.threads), encoder_ms: median(encMs),
                               decode_ms: decoderJoint ? median(decMs) : null, dims: y.dims, tokens }));
}

main().catch(e => { console.error(e); process.exit(1); });
