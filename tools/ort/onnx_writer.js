// A minimal ONNX ModelProto writer: just the fields a one-node test model needs (protobuf wire
// format by hand, so the golden generator needs nothing beyond onnxruntime-node).
'use strict';

const DTYPES = {float32: 1, uint8: 2, int8: 3, int32: 6, int64: 7};

function varint(value) {
  let v = BigInt.asUintN(64, BigInt(value));
  const bytes = [];
  while (v >= 0x80n) {
    bytes.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  bytes.push(Number(v));
  return Buffer.from(bytes);
}

const key = (field, wire) => varint((field << 3) | wire);
const intField = (field, value) => Buffer.concat([key(field, 0), varint(value)]);
const bytesField = (field, bytes) => Buffer.concat([key(field, 2), varint(bytes.length), bytes]);
const stringField = (field, s) => bytesField(field, Buffer.from(s, 'utf8'));
const floatField = (field, f) => {
  const b = Buffer.alloc(4);
  b.writeFloatLE(f);
  return Buffer.concat([key(field, 5), b]);
};

function rawBytes(dtype, values) {
  const Array_ = {float32: Float32Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array,
                  int64: BigInt64Array}[dtype];
  const typed = dtype === 'int64' ? Array_.from(values, BigInt) : Array_.from(values);
  return Buffer.from(typed.buffer);
}

function tensorProto(name, dtype, shape, values) {
  return Buffer.concat([
    ...shape.map((d) => intField(1, d)), intField(2, DTYPES[dtype]), stringField(8, name),
    bytesField(9, rawBytes(dtype, values))]);
}

function valueInfo(name, dtype, shape) {
  const dims = shape === undefined ? [] : shape.map((d) => bytesField(1, intField(1, d)));
  const tensorType = Buffer.concat([
    intField(1, DTYPES[dtype]), ...(shape === undefined ? [] : [bytesField(2, Buffer.concat(dims))])]);
  return Buffer.concat([stringField(1, name), bytesField(2, bytesField(1, tensorType))]);
}

// attrs: {name: number | number[] | {float: x} | {floats: [...]}}; integers become INT(S).
function attributeProto(name, value) {
  const parts = [stringField(1, name)];
  if (typeof value === 'object' && !Array.isArray(value) && 'float' in value) {
    parts.push(floatField(2, value.float), intField(20, 1));
  } else if (typeof value === 'object' && !Array.isArray(value) && 'floats' in value) {
    parts.push(...value.floats.map((f) => floatField(7, f)), intField(20, 6));
  } else if (Array.isArray(value)) {
    parts.push(...value.map((i) => intField(8, i)), intField(20, 7));
  } else if (typeof value === 'string') {
    parts.push(stringField(4, value), intField(20, 3));
  } else {
    parts.push(intField(3, value), intField(20, 2));
  }
  return Buffer.concat(parts);
}

// node: {op, domain, attrs, inputs: [{name, dtype, shape, values, initializer} | null],
// output: {name, dtype}}. Omitted optional inputs are written as "".
function oneNodeModel(node, opsetVersion) {
  const graphParts = [];
  const inputNames = node.inputs.map((t) => (t ? t.name : ''));
  const nodeParts = [
    ...inputNames.map((n) => stringField(1, n)), stringField(2, node.output.name),
    stringField(3, 'op'), stringField(4, node.op),
    ...Object.entries(node.attrs || {}).map(([n, v]) => bytesField(5, attributeProto(n, v))),
    ...(node.domain ? [stringField(7, node.domain)] : [])];
  graphParts.push(bytesField(1, Buffer.concat(nodeParts)), stringField(2, 'golden'));
  for (const t of node.inputs) {
    if (t && t.initializer) graphParts.push(bytesField(5, tensorProto(t.name, t.dtype, t.shape, t.values)));
  }
  for (const t of node.inputs) {
    if (t && !t.initializer) graphParts.push(bytesField(11, valueInfo(t.name, t.dtype, t.shape)));
  }
  graphParts.push(bytesField(12, valueInfo(node.output.name, node.output.dtype)));
  const opsets = [bytesField(8, Buffer.concat([stringField(1, ''), intField(2, opsetVersion)]))];
  if (node.domain) {
    opsets.push(bytesField(8, Buffer.concat([stringField(1, node.domain), intField(2, 1)])));
  }
  return Buffer.concat([intField(1, 8), stringField(2, 'qforge-golden'),
                        bytesField(7, Buffer.concat(graphParts)), ...opsets]);
}

module.exports = {oneNodeModel};
