// Runs an exported Parakeet encoder (bench/export_parakeet_onnx.py) with onnxruntime-node on one mel
// spectrogram, as a user of onnxruntime would: one session, the graph optimizer at its highest level,
// THREADS intra-op threads. Prints one JSON line: the session.run times (ms) after WARMUP runs, their
// median, the output's shape; with OUT.npy also the output (F32 [d_model, frames]) for a check.
//   NODE_PATH=ORT_NODE_MODULES node bench/onnx_encoder_run.cjs MODEL.onnx MEL.npy N_VALID THREADS RUNS [WARMUP] [OUT.npy]
// MEL.npy: F32 [n_mels, frames] (TRANSCRIBE_DUMP_DIR's mel.npy, or a fixture's golden mel.npy); N_VALID: the
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

async function main() {
  const [model, melPath, nValid, threads, runs, warmup = '1', outPath] = process.argv.slice(2);
  const mel = readNpyF32(melPath);
  const [nMels, frames] = mel.shape;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential',
  });
  const feeds = {
    [session.inputNames[0]]: new ort.Tensor('float32', mel.data, [1, nMels, frames]),
    [session.inputNames[1]]: new ort.Tensor('int64', BigInt64Array.from([BigInt(nValid)]), [1]),
  };
  let out;
  for (let i = 0; i < Number(warmup); ++i) out = await session.run(feeds);
  const ms = [];
  for (let i = 0; i < Number(runs); ++i) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const y = out[session.outputNames[0]];
  if (outPath) { // [1, d, T] -> [T, d], as our dumps and NeMo's goldens lay it out
    const [, d, T] = y.dims, t = new Float32Array(d * T);
    for (let c = 0; c < d; ++c) for (let f = 0; f < T; ++f) t[f * d + c] = y.data[c * T + f];
    writeNpyF32(outPath, [T, d], t);
  }
  const sorted = [...ms].sort((a, b) => a - b);
  console.log(JSON.stringify({ model, threads: Number(threads), ms: ms.map(v => +v.toFixed(1)),
                               median_ms: +sorted[Math.floor(sorted.length / 2)].toFixed(1), dims: y.dims }));
}

main().catch(e => { console.error(e); process.exit(1); });
