// Top-1 of an ONNX classifier on Fashion-MNIST test in ONNX Runtime (pixels / 255, NCHW), to check
// that what `qforge quantize` writes loads and scores the same in a real runtime.
//   scripts/install-ort.sh build/ort                  (the pinned onnxruntime-node, --ignore-scripts)
//   QFORGE_ORT_DIR=build/ort node tools/ort/top1.js OUT/model.qdq.onnx [N]
// ORT_OPT=disabled: no graph optimizations. Without QFORGE_ORT_DIR, onnxruntime-node is looked up
// from tools/ort (npm --prefix tools/ort install --ignore-scripts).
const path = require('path');
const ortDir = process.env.QFORGE_ORT_DIR;
const ort = require(ortDir ? path.resolve(ortDir, 'node_modules', 'onnxruntime-node') : 'onnxruntime-node');
const zlib = require('zlib'), fs = require('fs');
const dir = '/usr/share/datasets/fashion-mnist/';
const images = zlib.gunzipSync(fs.readFileSync(dir + 't10k-images-idx3-ubyte.gz')).subarray(16);
const labels = zlib.gunzipSync(fs.readFileSync(dir + 't10k-labels-idx1-ubyte.gz')).subarray(8);
(async () => {
  const session = await ort.InferenceSession.create(process.argv[2], {intraOpNumThreads: 2, graphOptimizationLevel: process.env.ORT_OPT || 'all'});
  const n = Number(process.argv[3] || 10000), batch = 500;
  let correct = 0;
  const dump = [];
  for (let s = 0; s < n; s += batch) {
    const b = Math.min(batch, n - s);
    const x = new Float32Array(b * 784);
    for (let i = 0; i < b * 784; ++i) x[i] = images[s * 784 + i] / 255;
    const out = await session.run({[session.inputNames[0]]: new ort.Tensor('float32', x, [b, 1, 28, 28])});
    const y = out[session.outputNames[0]].data;
    for (let i = 0; i < b; ++i) {
      let best = 0;
      for (let c = 1; c < 10; ++c) if (y[i * 10 + c] > y[i * 10 + best]) best = c;
      if (best === labels[s + i]) ++correct;
    }
    if (s === 0) dump.push(Array.from(y.slice(0, 20)));
  }
  console.log(JSON.stringify({top1: correct / n, correct, n, first_logits: dump[0]}));
})().catch(e => { console.error(String(e)); process.exit(1); });
