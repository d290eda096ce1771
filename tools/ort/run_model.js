// Runs an ONNX model in ONNX Runtime (onnxruntime-node) on inputs read from .npy files and writes
// the outputs as .npy files. qforge embeds this script in its binary and runs it for `qforge
// verify` (src/verify/ort_runner.cpp); it also works by hand:
//
//   node tools/ort/run_model.js --model M.onnx --input NAME FILE.npy [--input ...] --out-dir DIR
//        [--output NAME ...] [--batch N] [--optimization disabled|basic|extended|all]
//        [--threads N] [--ort-dir DIR] [--manifest FILE.json] [--time-runs N [--warmup N]]
//   node tools/ort/run_model.js --model M.onnx --save-optimized OUT.onnx [--optimization LEVEL]
//
// Output i (in --output order, or the model's when none is named) goes to DIR/output_<i>.npy; the
// manifest lists each output's name, file, type and dims. --batch N runs N rows of every input at
// a time and concatenates the outputs along the first axis. --ort-dir is the npm prefix holding
// node_modules/onnxruntime-node (default: resolved from this script's directory). Errors are one
// line on stderr with exit code 1 (2 for bad arguments). --time-runs N times N more runs of the
// first batch after --warmup untimed ones (default 2) and lists their wall times in the manifest
// as times_ms: the peer of `qforge run` in bench/executor_speed_table.py. --save-optimized writes
// the graph ONNX Runtime runs after its optimizations at --optimization (fusions, layout changes)
// and, without --input, stops there: that file, run with optimization disabled, computes what the
// model does, and exposing its tensors as outputs no longer changes which fusions fire.
'use strict';
const fs = require('fs');
const path = require('path');

class UsageError extends Error {}

function oneLine(message) {
  return String(message).replace(/\s+/g, ' ').trim();
}

// ---- .npy files (little-endian, C order) ----

// [npy type code, ONNX Runtime tensor type, typed array holding it]
const NPY_TYPES = [
  ['f4', 'float32', Float32Array], ['f8', 'float64', Float64Array],
  ['i1', 'int8', Int8Array],       ['u1', 'uint8', Uint8Array],
  ['i2', 'int16', Int16Array],     ['u2', 'uint16', Uint16Array],
  ['i4', 'int32', Int32Array],     ['u4', 'uint32', Uint32Array],
  ['i8', 'int64', BigInt64Array],  ['u8', 'uint64', BigUint64Array],
  ['b1', 'bool', Uint8Array],      ['f2', 'float16', Uint16Array],
];

function elementCount(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

function readNpy(file) {
  let bytes;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new Error(`cannot read '${file}': ${e.message}`);
  }
  if (bytes.length < 10 || bytes.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`'${file}' is not a .npy file`);
  }
  const major = bytes[6];
  const headerStart = major === 1 ? 10 : 12;
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const header = bytes.toString('latin1', headerStart, headerStart + headerLength);
  const descr = /'descr'\s*:\s*'([<>|=])([a-z]\d+)'/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape) throw new Error(`'${file}': malformed .npy header`);
  if (/'fortran_order'\s*:\s*True/.test(header)) {
    throw new Error(`'${file}': Fortran-ordered .npy arrays are not supported`);
  }
  const entry = NPY_TYPES.find(t => t[0] === descr[2]);
  if (!entry) throw new Error(`'${file}': .npy dtype '${descr[1]}${descr[2]}' is not supported`);
  const [, type, ArrayType] = entry;
  if (descr[1] === '>' && ArrayType.BYTES_PER_ELEMENT > 1) {
    throw new Error(`'${file}': big-endian .npy data is not supported`);
  }
  const dims = shape[1].split(',').map(s => s.trim()).filter(s => s.length > 0).map(Number);
  const byteLength = elementCount(dims) * ArrayType.BYTES_PER_ELEMENT;
  const start = headerStart + headerLength;
  if (bytes.length < start + byteLength) {
    throw new Error(`'${file}': truncated (${bytes.length} bytes, shape needs ${start + byteLength})`);
  }
  // A fresh buffer: typed arrays need an aligned offset, which the header does not promise.
  const buffer = new ArrayBuffer(byteLength);
  new Uint8Array(buffer).set(bytes.subarray(start, start + byteLength));
  return {type, dims, data: new ArrayType(buffer)};
}

function writeNpy(file, tensor) {
  const entry = NPY_TYPES.find(t => t[1] === tensor.type);
  if (!entry) throw new Error(`output of type ${tensor.type} cannot be written to .npy`);
  const order = entry[2].BYTES_PER_ELEMENT === 1 ? '|' : '<';
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let dict = `{'descr': '${order}${entry[0]}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Magic, version and length take 10 bytes; the header ends in '\n' on a 64-byte boundary.
  dict += ' '.repeat((64 - ((10 + dict.length + 1) % 64)) % 64) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(dict.length, 8);
  const data = tensor.data;
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(dict, 'latin1'),
                                        Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

// ---- arguments ----

function parseArgs(argv) {
  const args = {inputs: [], outputs: [], batch: 0, optimization: 'all', threads: 0, timeRuns: 0,
                warmup: 2};
  const value = (i, flag) => {
    if (i >= argv.length) throw new UsageError(`${flag} needs a value`);
    return argv[i];
  };
  const count = (text, flag) => {
    if (!/^\d+$/.test(text)) throw new UsageError(`${flag} takes a count >= 0, not '${text}'`);
    return Number(text);
  };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    if (flag === '--model') args.model = value(++i, flag);
    else if (flag === '--input') args.inputs.push({name: value(++i, flag), file: value(++i, flag)});
    else if (flag === '--output') args.outputs.push(value(++i, flag));
    else if (flag === '--out-dir') args.outDir = value(++i, flag);
    else if (flag === '--manifest') args.manifest = value(++i, flag);
    else if (flag === '--ort-dir') args.ortDir = value(++i, flag);
    else if (flag === '--batch') args.batch = count(value(++i, flag), flag);
    else if (flag === '--threads') args.threads = count(value(++i, flag), flag);
    else if (flag === '--optimization') args.optimization = value(++i, flag);
    else if (flag === '--time-runs') args.timeRuns = count(value(++i, flag), flag);
    else if (flag === '--warmup') args.warmup = count(value(++i, flag), flag);
    else if (flag === '--save-optimized') args.saveOptimized = value(++i, flag);
    else throw new UsageError(`unknown argument '${flag}'`);
  }
  if (!args.model) throw new UsageError('--model is required');
  if (!args.outDir && !(args.saveOptimized && args.inputs.length === 0)) {
    throw new UsageError('--out-dir is required');
  }
  if (!['disabled', 'basic', 'extended', 'all'].includes(args.optimization)) {
    throw new UsageError(`--optimization is disabled, basic, extended or all, not '${args.optimization}'`);
  }
  return args;
}

function loadOnnxRuntime(ortDir) {
  const where = ortDir ? path.join(path.resolve(ortDir), 'node_modules', 'onnxruntime-node')
                       : 'onnxruntime-node';
  try {
    return require(where);
  } catch (e) {
    throw new Error(`cannot load onnxruntime-node from ${ortDir || __dirname}: ${oneLine(e.message)}`);
  }
}

// ---- batching ----

function sliceRows(tensor, begin, end) {
  const rowSize = elementCount(tensor.dims.slice(1));
  return {type: tensor.type, dims: [end - begin, ...tensor.dims.slice(1)],
          data: tensor.data.slice(begin * rowSize, end * rowSize)};
}

function concatRows(name, parts) {
  if (parts.length === 1) return parts[0];
  // A scalar the batch does not change (a traced value computed from a rank-0 input) is the
  // same in every run: one copy stands for all. Scalars that differ are one per run (a model
  // without batch axis, run once per sample): they become a row each.
  if (parts.every(p => p.dims.length === 0)) {
    const same = parts.every(p => p.data.length === parts[0].data.length &&
                                  p.data.every((v, i) => v === parts[0].data[i]));
    if (same) return parts[0];
    parts = parts.map(p => ({type: p.type, dims: [1], data: p.data}));
  }
  const rest = parts[0].dims.slice(1);
  for (const p of parts) {
    if (p.dims.length === 0 || p.dims.slice(1).join() !== rest.join()) {
      throw new Error(`output '${name}' cannot be concatenated across batches: dims ` +
                      `[${parts[0].dims}] and [${p.dims}]`);
    }
  }
  const rows = parts.reduce((n, p) => n + p.dims[0], 0);
  const data = new parts[0].data.constructor(rows * elementCount(rest));
  let offset = 0;
  for (const p of parts) {
    data.set(p.data, offset);
    offset += p.data.length;
  }
  return {type: parts[0].type, dims: [rows, ...rest], data};
}

// The number of rows every input with a batch axis shares, which batching splits (rank-0
// inputs, a sample rate say, go whole to every run).
function sharedRows(inputs) {
  const rows = inputs.filter(i => i.tensor.dims.length > 0).map(i => i.tensor.dims[0]);
  if (rows.length === 0) return 0;
  if (rows.some(r => r !== rows[0])) {
    const shapes = inputs.map(i => `${i.name} [${i.tensor.dims}]`).join(', ');
    throw new Error(`--batch needs every input to have the same first dimension; got ${shapes}`);
  }
  return rows[0];
}

// ---- timing ----

// Wall time of each of args.timeRuns runs on `feeds`, after args.warmup untimed ones.
async function timeRuns(session, feeds, outputNames, args) {
  for (let i = 0; i < args.warmup; ++i) await session.run(feeds, outputNames);
  const times = [];
  for (let i = 0; i < args.timeRuns; ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds, outputNames);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return times;
}

// ---- main ----

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOnnxRuntime(args.ortDir);
  const inputs = args.inputs.map(i => ({name: i.name, tensor: readNpy(i.file)}));

  const options = {graphOptimizationLevel: args.optimization, logSeverityLevel: 3};
  if (args.threads > 0) options.intraOpNumThreads = args.threads;
  if (args.saveOptimized) options.optimizedModelFilePath = args.saveOptimized;
  let session;
  try {
    session = await ort.InferenceSession.create(args.model, options);
  } catch (e) {
    throw new Error(`'${args.model}': ONNX Runtime cannot load it: ${oneLine(e.message)}`);
  }
  if (args.saveOptimized && inputs.length === 0) return;
  for (const i of inputs) {
    if (!session.inputNames.includes(i.name)) {
      throw new Error(`'${args.model}' has no input '${i.name}' (inputs: ${session.inputNames.join(', ')})`);
    }
  }
  const outputNames = args.outputs.length > 0 ? args.outputs : session.outputNames;
  for (const name of outputNames) {
    if (!session.outputNames.includes(name)) {
      throw new Error(`'${args.model}' has no output '${name}' (outputs: ${session.outputNames.join(', ')})`);
    }
  }

  const rows = args.batch > 0 && inputs.length > 0 ? sharedRows(inputs) : 0;
  const step = args.batch > 0 && rows > 0 ? args.batch : Math.max(rows, 1);
  const parts = outputNames.map(() => []);
  let runs = 0;
  let firstFeeds = null;
  for (let begin = 0; begin < Math.max(rows, 1); begin += step) {
    const end = Math.min(begin + step, rows);
    const feeds = {};
    for (const i of inputs) {
      const batched = args.batch > 0 && rows > 0 && i.tensor.dims.length > 0;
      const t = batched ? sliceRows(i.tensor, begin, end) : i.tensor;
      feeds[i.name] = new ort.Tensor(t.type, t.data, t.dims);
    }
    if (firstFeeds === null) firstFeeds = feeds;
    let results;
    try {
      results = await session.run(feeds, outputNames);
    } catch (e) {
      throw new Error(`'${args.model}': ONNX Runtime failed to run it: ${oneLine(e.message)}`);
    }
    outputNames.forEach((name, k) => {
      const r = results[name];
      parts[k].push({type: r.type, dims: r.dims.slice(), data: r.data});
    });
    ++runs;
  }

  fs.mkdirSync(args.outDir, {recursive: true});
  const manifest = {runs, outputs: []};
  if (args.timeRuns > 0) {
    manifest.times_ms = await timeRuns(session, firstFeeds, outputNames, args);
    manifest.peak_rss_bytes = process.resourceUsage().maxRSS * 1024;
  }
  outputNames.forEach((name, k) => {
    const tensor = concatRows(name, parts[k]);
    const file = path.join(args.outDir, `output_${k}.npy`);
    writeNpy(file, tensor);
    manifest.outputs.push({name, file, type: tensor.type, dims: tensor.dims});
  });
  const text = JSON.stringify(manifest) + '\n';
  if (args.manifest) fs.writeFileSync(args.manifest, text);
  else process.stdout.write(text);
}

main().catch(e => {
  process.stderr.write(`error: ${oneLine(e.message)}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
