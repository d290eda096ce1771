// Golden outputs of ONNX Runtime's CPU QOperator kernels for qforge's integer emulation tests.
// Builds one-node models (scales, zero points, weights and biases as initializers, the way an
// exporter writes them), runs them in onnxruntime-node and writes the cases as C++ initializers:
//   npm --prefix tools/ort install --ignore-scripts
//   node tools/ort/qop_golden.js > tests/exec/ops/ort_golden_cases.inc
// Inputs are seeded pseudo-random values plus hand-picked ties and saturating values, so the
// file is the same on every run for a given ONNX Runtime version.
'use strict';

const ort = require('onnxruntime-node');
const {oneNodeModel} = require('./onnx_writer');

let seed = 12345;
function random() {  // LCG: reproducible without dependencies
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
const randInt = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
const numel = (shape) => shape.reduce((a, b) => a * b, 1);
const ints = (shape, lo, hi) => Array.from({length: numel(shape)}, () => randInt(lo, hi));
const f32 = (v) => Math.fround(v);

const u8 = (shape, values) => ({dtype: 'uint8', shape, values});
const i8 = (shape, values) => ({dtype: 'int8', shape, values});
const i32 = (shape, values) => ({dtype: 'int32', shape, values});
const f = (shape, values) => ({dtype: 'float32', shape, values: values.map(f32)});
const scalarF = (v) => f([], [v]);
const zpOf = (dtype, v) => ({dtype, shape: [], values: [v]});
const init = (t) => ({...t, initializer: true});
const randU8 = (shape) => u8(shape, ints(shape, 0, 255));
const randI8 = (shape) => i8(shape, ints(shape, -128, 127));

const cases = [];
// inputs: tensors (first `feeds` of them fed at run time, the rest initializers) or null.
function add(name, op, inputs, outDtype, {domain = '', attrs = {}, opset = 13, feeds = 1} = {}) {
  cases.push({name, op, domain, attrs, opset, outDtype,
              inputs: inputs.map((t, i) => (t === null ? null : {...t, initializer: i >= feeds}))});
}

// ------------------------------------------------------------------------------ QLinearConv
{
  // uint8 activations, int8 symmetric per-channel weights, bias: ORT's symmetric conv path.
  const x = randU8([2, 3, 6, 6]);
  const w = i8([4, 3, 3, 3], ints([4, 3, 3, 3], -127, 127));
  add('QLinearConv_u8x_s8w_per_channel_bias', 'QLinearConv',
      [x, scalarF(0.0235), zpOf('uint8', 131), w, f([4], [0.0031, 0.0047, 0.0013, 0.0102]),
       i8([4], [0, 0, 0, 0]), scalarF(0.0719), zpOf('uint8', 121), i32([4], [-1200, 3400, 0, 77])],
      'uint8', {attrs: {pads: [1, 1, 1, 1], strides: [1, 1]}});
  // Same with stride 2, asymmetric pads and output saturating at both ends.
  add('QLinearConv_u8x_s8w_stride2_asym_pads_saturating', 'QLinearConv',
      [x, scalarF(0.0235), zpOf('uint8', 131), w, f([4], [0.031, 0.047, 0.013, 0.102]),
       i8([4], [0, 0, 0, 0]), scalarF(0.0719), zpOf('uint8', 121), null],
      'uint8', {attrs: {pads: [0, 1, 2, 1], strides: [2, 2]}});
  // uint8 weights with a non-zero per-tensor zero point (ORT's general QGEMM path).
  add('QLinearConv_u8x_u8w_per_tensor', 'QLinearConv',
      [x, scalarF(0.0235), zpOf('uint8', 131), randU8([5, 3, 2, 2]), scalarF(0.0061),
       zpOf('uint8', 119), scalarF(0.0913), zpOf('uint8', 3), i32([5], [10, -20, 30, -40, 50])],
      'uint8');
  // int8 activations with a negative zero point, grouped, dilated.
  const xs = randI8([1, 4, 7, 7]);
  add('QLinearConv_s8x_s8w_group2_dilation', 'QLinearConv',
      [xs, scalarF(0.0412), zpOf('int8', -17), i8([6, 2, 3, 3], ints([6, 2, 3, 3], -127, 127)),
       f([6], [0.002, 0.003, 0.0041, 0.0052, 0.0011, 0.0077]), i8([6], [0, 0, 0, 0, 0, 0]),
       scalarF(0.0533), zpOf('int8', 5), i32([6], [0, 100, -100, 1000, -1000, 5])],
      'int8', {attrs: {group: 2, dilations: [2, 2], pads: [1, 1, 1, 1]}});
  // Depthwise (group = channels), int8 weights with a non-zero zero point.
  add('QLinearConv_u8x_s8w_depthwise_nonzero_wzp', 'QLinearConv',
      [randU8([1, 5, 5, 5]), scalarF(0.0183), zpOf('uint8', 100),
       i8([5, 1, 3, 3], ints([5, 1, 3, 3], -100, 100)), scalarF(0.0088), zpOf('int8', 3),
       scalarF(0.0301), zpOf('uint8', 128), i32([5], [500, -500, 0, 2000, -2000])],
      'uint8', {attrs: {group: 5, pads: [1, 1, 1, 1]}});
  // Depthwise with symmetric weights (ORT's symmetric depthwise kernel).
  add('QLinearConv_u8x_s8w_depthwise_symmetric', 'QLinearConv',
      [randU8([2, 8, 4, 4]), scalarF(0.0183), zpOf('uint8', 100),
       i8([8, 1, 3, 3], ints([8, 1, 3, 3], -127, 127)), f([8], [1, 2, 3, 4, 5, 6, 7, 8].map((k) => 0.001 * k)),
       i8([8], [0, 0, 0, 0, 0, 0, 0, 0]), scalarF(0.0301), zpOf('uint8', 128), null],
      'uint8', {attrs: {group: 8, pads: [1, 1, 1, 1], strides: [2, 2]}});
  // Accumulators beyond 2^24: the int32 -> float32 conversion rounds before the multiplier.
  const big = u8([1, 64, 3, 3], Array(64 * 9).fill(255));
  add('QLinearConv_large_accumulators', 'QLinearConv',
      [big, scalarF(0.5), zpOf('uint8', 0), i8([3, 64, 3, 3], ints([3, 64, 3, 3], 120, 127)),
       f([3], [1.3e-5, 1.7e-5, 2.1e-5]), i8([3], [0, 0, 0]), scalarF(0.25), zpOf('uint8', 0),
       i32([3], [1, 3, 7])],
      'uint8', {attrs: {pads: [1, 1, 1, 1]}});
}

// ---------------------------------------------------------------------------- QLinearMatMul
{
  add('QLinearMatMul_u8_u8', 'QLinearMatMul',
      [randU8([3, 16]), scalarF(0.0173), zpOf('uint8', 127), randU8([16, 5]), scalarF(0.0122),
       zpOf('uint8', 131), scalarF(0.0644), zpOf('uint8', 125)], 'uint8');
  add('QLinearMatMul_u8_s8_batched', 'QLinearMatMul',
      [randU8([2, 3, 20]), scalarF(0.0173), zpOf('uint8', 120), randI8([20, 6]), scalarF(0.0093),
       zpOf('int8', 0), scalarF(0.0411), zpOf('uint8', 130)], 'uint8');
  add('QLinearMatMul_s8_s8_per_column', 'QLinearMatMul',
      [randI8([4, 24]), scalarF(0.0251), zpOf('int8', -3), randI8([24, 5]),
       f([5], [0.004, 0.0061, 0.0022, 0.0093, 0.0107]), i8([5], [0, 0, 0, 0, 0]),
       scalarF(0.0733), zpOf('int8', 2)], 'int8');
}

// ------------------------------------------------------------ QuantizeLinear / DequantizeLinear
{
  const xq = f([24], [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1000, -1000, 127.5, 128.5, -128.5, 0,
                      ...Array.from({length: 12}, () => (random() - 0.5) * 8)]);
  add('QuantizeLinear_u8', 'QuantizeLinear', [xq, scalarF(0.0625), zpOf('uint8', 128)], 'uint8');
  add('QuantizeLinear_s8', 'QuantizeLinear', [xq, scalarF(0.0625), zpOf('int8', -1)], 'int8');
  add('QuantizeLinear_s8_scale_not_power_of_two', 'QuantizeLinear',
      [xq, scalarF(0.0371), zpOf('int8', 7)], 'int8');
  add('QuantizeLinear_u8_per_axis', 'QuantizeLinear',
      [f([2, 3, 4], Array.from({length: 24}, () => (random() - 0.5) * 6)),
       f([3], [0.01, 0.023, 0.05]), u8([3], [0, 128, 255])], 'uint8', {attrs: {axis: 1}});
  add('DequantizeLinear_s8_per_axis', 'DequantizeLinear',
      [randI8([2, 3, 4]), f([3], [0.01, 0.023, 0.05]), i8([3], [-128, 0, 127])], 'float32',
      {attrs: {axis: 1}});
  add('DequantizeLinear_u8', 'DequantizeLinear', [randU8([10]), scalarF(0.0371), zpOf('uint8', 131)],
      'float32');
}

// ------------------------------------------------------------------------------ QLinearAdd
{
  const ms = {domain: 'com.microsoft'};
  const a = randU8([2, 3, 4, 5]);
  add('QLinearAdd_u8_same_shape', 'QLinearAdd',
      [a, scalarF(0.0231), zpOf('uint8', 127), randU8([2, 3, 4, 5]), scalarF(0.0174),
       zpOf('uint8', 131), scalarF(0.0307), zpOf('uint8', 125)], 'uint8', {...ms, feeds: 4});
  add('QLinearAdd_s8_same_shape', 'QLinearAdd',
      [randI8([50]), scalarF(0.0231), zpOf('int8', -7), randI8([50]), scalarF(0.0174),
       zpOf('int8', 3), scalarF(0.0307), zpOf('int8', 1)], 'int8', {...ms, feeds: 4});
  add('QLinearAdd_u8_scalar_b', 'QLinearAdd',
      [a, scalarF(0.0231), zpOf('uint8', 127), u8([], [200]), scalarF(0.0174),
       zpOf('uint8', 131), scalarF(0.0307), zpOf('uint8', 125)], 'uint8', ms);
  add('QLinearAdd_u8_scalar_a', 'QLinearAdd',
      [u8([1], [17]), scalarF(0.0231), zpOf('uint8', 127), a, scalarF(0.0174),
       zpOf('uint8', 131), scalarF(0.0307), zpOf('uint8', 125)], 'uint8', {...ms, feeds: 4});
  add('QLinearAdd_u8_broadcast_channel', 'QLinearAdd',
      [a, scalarF(0.0231), zpOf('uint8', 127), randU8([1, 3, 1, 1]), scalarF(0.0174),
       zpOf('uint8', 131), scalarF(0.0307), zpOf('uint8', 125)], 'uint8', ms);
  add('QLinearAdd_u8_broadcast_last_dim', 'QLinearAdd',
      [randU8([1, 1, 1, 5]), scalarF(0.0231), zpOf('uint8', 127), a, scalarF(0.0174),
       zpOf('uint8', 131), scalarF(0.0307), zpOf('uint8', 125)], 'uint8', {...ms, feeds: 4});
  // Power-of-two scales: many exact ties.
  add('QLinearAdd_u8_ties', 'QLinearAdd',
      [randU8([64]), scalarF(0.25), zpOf('uint8', 128), randU8([64]), scalarF(0.125),
       zpOf('uint8', 64), scalarF(0.5), zpOf('uint8', 100)], 'uint8', {...ms, feeds: 4});
}

// ------------------------------------------------------------------------------ QLinearMul
{
  const ms = {domain: 'com.microsoft'};
  add('QLinearMul_u8_same_shape', 'QLinearMul',
      [randU8([2, 3, 7]), scalarF(0.0231), zpOf('uint8', 127), randU8([2, 3, 7]), scalarF(0.0174),
       zpOf('uint8', 131), scalarF(0.0307), zpOf('uint8', 125)], 'uint8', {...ms, feeds: 4});
  add('QLinearMul_s8_broadcast', 'QLinearMul',
      [randI8([2, 3, 7]), scalarF(0.0231), zpOf('int8', -5), randI8([3, 1]), scalarF(0.0174),
       zpOf('int8', 9), scalarF(0.0307), zpOf('int8', -2)], 'int8', ms);
}

// ------------------------------------------------------------------- QLinearGlobalAveragePool
{
  const ms = {domain: 'com.microsoft', attrs: {channels_last: 0}};
  add('QLinearGlobalAveragePool_u8', 'QLinearGlobalAveragePool',
      [randU8([2, 5, 7, 7]), scalarF(0.0231), zpOf('uint8', 127), scalarF(0.0107),
       zpOf('uint8', 119)], 'uint8', ms);
  add('QLinearGlobalAveragePool_s8', 'QLinearGlobalAveragePool',
      [randI8([2, 3, 4, 4]), scalarF(0.0231), zpOf('int8', -10), scalarF(0.0117),
       zpOf('int8', 4)], 'int8', ms);
  // Power-of-two scales and 4 pixels: averages land on exact halves.
  add('QLinearGlobalAveragePool_u8_ties', 'QLinearGlobalAveragePool',
      [randU8([1, 16, 2, 2]), scalarF(0.5), zpOf('uint8', 0), scalarF(0.5), zpOf('uint8', 0)],
      'uint8', ms);
}

// ----------------------------------------------------------------------------------- QGemm
{
  const ms = {domain: 'com.microsoft'};
  const a = randU8([3, 12]);
  add('QGemm_u8_s8_requant_transB_bias', 'QGemm',
      [a, scalarF(0.0173), zpOf('uint8', 127), randI8([4, 12]), f([4], [0.003, 0.004, 0.005, 0.0061]),
       i8([4], [0, 0, 0, 0]), i32([4], [100, -200, 300, -400]), scalarF(0.0297), zpOf('uint8', 128)],
      'uint8', {...ms, attrs: {transB: 1}});
  add('QGemm_u8_u8_float_out_alpha', 'QGemm',
      [a, scalarF(0.0173), zpOf('uint8', 127), randU8([12, 4]), scalarF(0.0049), zpOf('uint8', 133),
       i32([4], [100, -200, 300, -400])], 'float32', {...ms, attrs: {alpha: {float: 0.75}}});
  add('QGemm_s8_s8_requant_transA', 'QGemm',
      [randI8([12, 3]), scalarF(0.0173), zpOf('int8', -3), randI8([12, 4]), scalarF(0.0049),
       zpOf('int8', 0), null, scalarF(0.0411), zpOf('int8', -6)], 'int8', {...ms, attrs: {transA: 1}});
}

// ---------------------------------------------- Data movement on 8-bit tensors (plain ONNX ops)
{
  const x = randI8([1, 2, 5, 5]);
  add('MaxPool_s8', 'MaxPool', [x], 'int8', {opset: 13, attrs: {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}});
  add('MaxPool_u8', 'MaxPool', [randU8([1, 2, 4, 4])], 'uint8', {attrs: {kernel_shape: [2, 2], strides: [2, 2]}});
  add('Transpose_u8', 'Transpose', [randU8([2, 3, 4])], 'uint8', {attrs: {perm: [2, 0, 1]}});
  add('Reshape_s8', 'Reshape', [x, {dtype: 'int64', shape: [2], values: [5, -1]}], 'int8');
  add('Flatten_u8', 'Flatten', [randU8([2, 3, 2])], 'uint8', {attrs: {axis: 1}});
  add('Squeeze_s8', 'Squeeze', [randI8([1, 3, 1]), {dtype: 'int64', shape: [1], values: [0]}], 'int8');
  add('Unsqueeze_u8', 'Unsqueeze', [randU8([3]), {dtype: 'int64', shape: [1], values: [1]}], 'uint8');
  add('Concat_s8', 'Concat', [randI8([1, 2, 2]), randI8([1, 3, 2])], 'int8', {attrs: {axis: 1}, feeds: 2});
}

// ------------------------------------------------------------- QLinearConcat, QLinearAveragePool
{
  const ms = {domain: 'com.microsoft'};
  // Inputs: y_scale, y_zero_point, then (x, x_scale, x_zero_point) per input; the second input
  // shares the output's parameters (a plain copy in ORT).
  const x0 = randU8([1, 2, 3]), x1 = randU8([1, 1, 3]), x2 = randU8([1, 2, 3]);
  const concat = [scalarF(0.05), zpOf('uint8', 128), x0, scalarF(0.0371), zpOf('uint8', 120),
                  x1, scalarF(0.05), zpOf('uint8', 128), x2, scalarF(0.1), zpOf('uint8', 64)];
  cases.push({name: 'QLinearConcat_u8', op: 'QLinearConcat', domain: 'com.microsoft',
              attrs: {axis: 1}, opset: 13, outDtype: 'uint8',
              inputs: concat.map((t, i) => ({...t, initializer: !(i === 2 || i === 5 || i === 8)}))});
  add('QLinearAveragePool_u8_pads', 'QLinearAveragePool',
      [randU8([1, 2, 5, 5]), scalarF(0.0231), zpOf('uint8', 127), scalarF(0.0217), zpOf('uint8', 125)],
      'uint8', {...ms, attrs: {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}});
  add('QLinearAveragePool_s8_count_include_pad', 'QLinearAveragePool',
      [randI8([1, 2, 5, 5]), scalarF(0.0231), zpOf('int8', -3), scalarF(0.0117), zpOf('int8', 2)],
      'int8', {...ms, attrs: {kernel_shape: [2, 2], strides: [1, 1], pads: [1, 1, 0, 0], count_include_pad: 1}});
  add('QLinearAveragePool_u8_global_fallback', 'QLinearAveragePool',
      [randU8([1, 3, 4, 4]), scalarF(0.0231), zpOf('uint8', 127), scalarF(0.0117), zpOf('uint8', 125)],
      'uint8', {...ms, attrs: {kernel_shape: [4, 4]}});
}

// ------------------------------------------------------------------- Lookup-table activations
{
  const ms = {domain: 'com.microsoft'};
  const all = u8([256], Array.from({length: 256}, (_, i) => i));
  const allS = i8([256], Array.from({length: 256}, (_, i) => i - 128));
  add('QLinearLeakyRelu_u8', 'QLinearLeakyRelu',
      [all, scalarF(0.0311), zpOf('uint8', 140), scalarF(0.0233), zpOf('uint8', 90)], 'uint8',
      {...ms, attrs: {alpha: {float: 0.1}}});
  add('QLinearLeakyRelu_s8', 'QLinearLeakyRelu',
      [allS, scalarF(0.0311), zpOf('int8', 5), scalarF(0.0233), zpOf('int8', -40)], 'int8',
      {...ms, attrs: {alpha: {float: 0.2}}});
  add('QLinearSigmoid_u8', 'QLinearSigmoid',
      [all, scalarF(0.0611), zpOf('uint8', 128), scalarF(1 / 256), zpOf('uint8', 0)], 'uint8', ms);
  add('QLinearSigmoid_s8', 'QLinearSigmoid',
      [allS, scalarF(0.0611), zpOf('int8', 0), scalarF(1 / 256), zpOf('int8', -128)], 'int8', ms);
}

// -------------------------------------------------------------------------- QLinearSoftmax
{
  const ms = {domain: 'com.microsoft'};
  // The last axis, uint8, the usual 1/256 output: floor(1 / y_scale) = 256.
  add('QLinearSoftmax_u8_last_axis', 'QLinearSoftmax',
      [randU8([3, 10]), scalarF(0.0731), zpOf('uint8', 120), scalarF(1 / 256), zpOf('uint8', 0)],
      'uint8', {...ms, attrs: {axis: -1, opset: 13}});
  // A calibrated output scale (max 0.8 over 255 levels): ORT multiplies by floor(318.75) = 318.
  add('QLinearSoftmax_u8_calibrated_scale_long_rows', 'QLinearSoftmax',
      [randU8([2, 197]), scalarF(0.0412), zpOf('uint8', 3), scalarF(0.8 / 255), zpOf('uint8', 0)],
      'uint8', {...ms, attrs: {axis: -1, opset: 13}});
  // int8 over a middle axis (ORT transposes it last and back), the asymmetric [0, 1] grid.
  add('QLinearSoftmax_s8_middle_axis', 'QLinearSoftmax',
      [randI8([2, 5, 4]), scalarF(0.11), zpOf('int8', 0), scalarF(1 / 255), zpOf('int8', -128)],
      'int8', {...ms, attrs: {axis: 1, opset: 13}});
  // int8 whose levels would pass 127 (a range below 1 on the [0, 1] grid): saturated.
  add('QLinearSoftmax_s8_saturating', 'QLinearSoftmax',
      [randI8([4, 6]), scalarF(0.25), zpOf('int8', 0), scalarF(0.6 / 255), zpOf('int8', -128)],
      'int8', {...ms, attrs: {axis: -1, opset: 13}});
  // Opset 12's Softmax: everything from axis 1 is one row.
  add('QLinearSoftmax_u8_opset12_flattened', 'QLinearSoftmax',
      [randU8([2, 3, 4]), scalarF(0.05), zpOf('uint8', 128), scalarF(1 / 256), zpOf('uint8', 0)],
      'uint8', {...ms, attrs: {axis: 1, opset: 12}});
}

// ------------------------------------------------------------------------------ output
const CPP_TYPES = {float32: 'at::kFloat', uint8: 'at::kByte', int8: 'at::kChar', int32: 'at::kInt',
                   int64: 'at::kLong'};

function number(v, dtype) {
  if (dtype !== 'float32') return String(v);
  if (Number.isNaN(v)) return 'kNaN';
  if (!Number.isFinite(v)) return v > 0 ? 'kInf' : '-kInf';
  return Number(v.toPrecision(9)).toString();  // 9 digits: float32 round-trips
}

function tensorText(t, kind) {
  const shape = `{${t.shape.join(', ')}}`;
  const values = Array.from(t.values, (v) => number(v, t.dtype)).join(', ');
  return `${kind}(${CPP_TYPES[t.dtype]}, ${shape}, {${values}})`;
}

function attrText(name, v) {
  if (typeof v === 'object' && !Array.isArray(v)) return `Attribute::makeFloat("${name}", ${v.float})`;
  if (Array.isArray(v)) return `Attribute::makeInts("${name}", {${v.join(', ')}})`;
  return `Attribute::makeInt("${name}", ${v})`;
}

function feedTensor(t) {
  const make = {float32: Float32Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array,
                int64: BigInt64Array}[t.dtype];
  const data = t.dtype === 'int64' ? make.from(t.values, BigInt) : make.from(t.values);
  return new ort.Tensor(t.dtype, data, t.shape);
}

(async () => {
  const lines = [
    `// Generated by tools/ort/qop_golden.js from onnxruntime-node ${require('onnxruntime-node/package.json').version}`,
    '// (CPU execution provider, MLAS kernels, this machine). Do not edit by hand: rerun the script.'];
  for (const c of cases) {
    const inputs = c.inputs.map((t, i) => (t === null ? null : {...t, name: `in${i}`}));
    const model = oneNodeModel({op: c.op, domain: c.domain, attrs: c.attrs, inputs,
                                output: {name: 'out0', dtype: c.outDtype}}, c.opset);
    const session = await ort.InferenceSession.create(model, {intraOpNumThreads: 1});
    const feeds = {};
    for (const t of inputs) if (t && !t.initializer) feeds[t.name] = feedTensor(t);
    const y = (await session.run(feeds)).out0;
    const expected = {dtype: c.outDtype, shape: y.dims, values: Array.from(y.data)};
    const inputText = inputs.map((t) => (t === null ? 'omitted()' : tensorText(t, t.initializer ? 'initializer' : 'fed')));
    lines.push(`{"${c.name}", "${c.op}", "${c.domain}", ${c.opset},`,
               `  {${Object.entries(c.attrs).map(([n, v]) => attrText(n, v)).join(', ')}},`,
               `  {${inputText.join(',\n   ')}},`,
               `  ${tensorText(expected, 'fed')}},`);
  }
  process.stdout.write(lines.join('\n') + '\n');
})().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
