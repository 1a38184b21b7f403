#!/usr/bin/env node
// Interop of ndstore's zarr v3 format with clients we did not write:
//   1. zarrita (npm zarrita@0.7.5 + @zarrita/storage, in node) reads arrays ndstore wrote: plain
//      (bytes, transpose, zstd, blosc, gzip, crc32c, big-endian, v2 keys, every integer and float
//      type) and sharded (index at the end, as zarrita requires), partly written ones included;
//   2. ndstore reads arrays zarrita wrote (plain v3: bytes, zstd, blosc, gzip via numcodecs);
//   3. ndstore reads every array of tests/fixtures/zarr3_zarrita/data.zarr (written by
//      zarrita's Python ancestor, sharded ones included) equal to expected/<array>.npy;
//   4. `ndstore cp` of a zarr v2 array into a sharded zarr v3 array that zarrita then reads;
//   5. zarrita reads string arrays ndstore wrote (data_type "string", vlen-utf8, and zarr v2 "|O"
//      object arrays with the vlen-utf8 filter; zarrita cannot
//      encode vlen-utf8, so the other direction rests on registry-layout vectors in
//      tests/unit/test_strings_vlen.c).
// Usage: node tests/interop/zarr3_interop.mjs path/to/ndstore [path/to/fixtures]
// (the fixtures folder defaults to the repository's tests/fixtures)
// Installs its node packages (npm ci) when they are missing. Prints "N passed, N failed" last and
// exits non-zero when anything failed.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [ndstoreArg, fixturesArg] = process.argv.slice(2);
if (!ndstoreArg) {
  console.error("usage: node zarr3_interop.mjs NDSTORE [FIXTURES_DIR]");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const ndstore = path.resolve(ndstoreArg);
const fixtures = path.resolve(fixturesArg || path.join(here, "..", "fixtures"));
if (!fs.existsSync(path.join(here, "node_modules", "zarrita"))) {
  execFileSync("npm", ["ci", "--prefix", here, "--no-audit", "--no-fund"], { stdio: "inherit" });
}
const zarr = await import("zarrita");
const { default: FileSystemStore } = await import("@zarrita/storage/fs");
// zarrita decodes gzip itself but cannot encode it; numcodecs' GZip can do both.
zarr.registry.set("gzip", () => import("numcodecs/gzip").then((m) => m.default));

const work = fs.mkdtempSync(path.join(os.tmpdir(), "nds-zarr3-interop-"));
let passed = 0;
let failed = 0;

async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

function run(...args) {
  try {
    return execFileSync(ndstore, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    throw new Error(`ndstore ${args.join(" ")} failed: ${e.stderr || e.message}`);
  }
}

// ---- .npy files (little-endian and big-endian numeric types, C order) ----

const TYPES = {
  bool: ["|b1", Uint8Array],
  int8: ["|i1", Int8Array],
  uint8: ["|u1", Uint8Array],
  int16: ["<i2", Int16Array],
  uint16: ["<u2", Uint16Array],
  int32: ["<i4", Int32Array],
  uint32: ["<u4", Uint32Array],
  int64: ["<i8", BigInt64Array],
  uint64: ["<u8", BigUint64Array],
  float32: ["<f4", Float32Array],
  float64: ["<f8", Float64Array],
};

function npyWrite(file, dtype, shape, typed) {
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
  let header = `{'descr': '${TYPES[dtype][0]}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const total = 10 + header.length + 1;
  header += " ".repeat((64 - (total % 64)) % 64) + "\n";
  const head = Buffer.alloc(10);
  head.write("\x93NUMPY", 0, "latin1");
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, "latin1"), data]));
}

// {descr, shape, values}: values as numbers (BigInt for 8-byte integers).
function npyRead(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString("latin1", start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/
    .exec(header)[1]
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s)
    .map(Number);
  const kind = descr.slice(1);
  const size = Number(kind.slice(1));
  const little = descr[0] !== ">";
  const body = buf.subarray(start + hlen);
  const count = shape.reduce((a, b) => a * b, 1);
  const values = [];
  for (let i = 0; i < count; i++) {
    const o = i * size;
    values.push(readScalar(body, o, kind, little));
  }
  return { descr, shape, values };
}

function readScalar(b, o, kind, little) {
  switch (kind) {
    case "b1": return b[o] ? 1 : 0;
    case "u1": return b[o];
    case "i1": return b.readInt8(o);
    case "i2": return little ? b.readInt16LE(o) : b.readInt16BE(o);
    case "u2": return little ? b.readUInt16LE(o) : b.readUInt16BE(o);
    case "i4": return little ? b.readInt32LE(o) : b.readInt32BE(o);
    case "u4": return little ? b.readUInt32LE(o) : b.readUInt32BE(o);
    case "i8": return little ? b.readBigInt64LE(o) : b.readBigInt64BE(o);
    case "u8": return little ? b.readBigUInt64LE(o) : b.readBigUInt64BE(o);
    case "f4": return little ? b.readFloatLE(o) : b.readFloatBE(o);
    case "f8": return little ? b.readDoubleLE(o) : b.readDoubleBE(o);
    default: throw new Error(`unsupported npy type ${kind}`);
  }
}

function same(a, b) {
  return a === b || (typeof a === "number" && typeof b === "number" && isNaN(a) && isNaN(b));
}

function expectEqual(got, want, what) {
  if (got.length !== want.length) throw new Error(`${what}: ${got.length} values, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (!same(got[i], want[i])) throw new Error(`${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

function expectShape(got, want, what) {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`${what}: shape ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  }
}

// Deterministic values of dtype for n elements, as a typed array.
function makeData(dtype, n, seed = 1) {
  const T = TYPES[dtype][1];
  const out = new T(n);
  for (let i = 0; i < n; i++) {
    const v = ((i + seed) * 2654435761) % 1000003;
    if (dtype === "bool") out[i] = v % 3 === 0 ? 1 : 0;
    else if (dtype.startsWith("float")) out[i] = (v % 2001) / 8 - 125;
    else if (dtype === "int64") out[i] = BigInt(v) * 1000000007n - 5000000000000n;
    else if (dtype === "uint64") out[i] = BigInt(v) * 18446744073709n;
    else if (dtype.startsWith("int")) out[i] = (v % 200) - 100;
    else out[i] = v % 250;
  }
  return out;
}

function toValues(data) {
  return Array.from(data, (v) => (typeof v === "boolean" ? (v ? 1 : 0) : v));
}

// The values of a zarrita result in C order: with a transpose codec zarrita hands back the data
// in the stored order and says so through its strides.
function cOrder(got) {
  const flat = toValues(got.data);
  const n = got.shape.reduce((a, b) => a * b, 1);
  const out = new Array(n);
  const idx = new Array(got.shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let off = 0;
    for (let d = 0; d < idx.length; d++) off += idx[d] * got.stride[d];
    out[i] = flat[off];
    for (let d = idx.length - 1; d >= 0; d--) {
      if (++idx[d] < got.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// ---- 1. ndstore writes, zarrita reads ----

const BYTES_LE = { name: "bytes", configuration: { endian: "little" } };
const ZSTD = { name: "zstd", configuration: { level: 3, checksum: false } };
const sharded = (inner, codecs) => [{
  name: "sharding_indexed",
  configuration: {
    chunk_shape: inner,
    codecs,
    index_codecs: [BYTES_LE, { name: "crc32c" }],
    index_location: "end",
  },
}];

const writeCases = [
  { name: "int16 2-d, zstd, ragged chunks", dtype: "int16", shape: [13, 7], chunks: [4, 3], codecs: [BYTES_LE, ZSTD] },
  { name: "float32 blosc lz4 shuffle", dtype: "float32", shape: [50], chunks: [16],
    codecs: [BYTES_LE, { name: "blosc", configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle", typesize: 4, blocksize: 0 } }] },
  { name: "float64 big-endian gzip", dtype: "float64", shape: [6, 5], chunks: [4, 4],
    codecs: [{ name: "bytes", configuration: { endian: "big" } }, { name: "gzip", configuration: { level: 5 } }] },
  { name: "uint8 3-d transpose", dtype: "uint8", shape: [4, 5, 6], chunks: [2, 5, 3],
    codecs: [{ name: "transpose", configuration: { order: [2, 0, 1] } }, BYTES_LE] },
  { name: "int64 crc32c", dtype: "int64", shape: [9], chunks: [4], codecs: [BYTES_LE, { name: "crc32c" }] },
  { name: "uint64 zstd", dtype: "uint64", shape: [5, 3], chunks: [2, 2], codecs: [BYTES_LE, ZSTD] },
  { name: "uint32 v2 chunk keys", dtype: "uint32", shape: [6, 6], chunks: [4, 4], codecs: [BYTES_LE],
    keys: { name: "v2", configuration: { separator: "." } } },
  { name: "int8 dot separator", dtype: "int8", shape: [7, 3], chunks: [3, 3], codecs: [BYTES_LE],
    keys: { name: "default", configuration: { separator: "." } } },
  { name: "bool", dtype: "bool", shape: [11], chunks: [4], codecs: [BYTES_LE] },
  { name: "sharded uint16 zstd", dtype: "uint16", shape: [20, 30], chunks: [10, 15],
    codecs: sharded([5, 5], [BYTES_LE, ZSTD]) },
  { name: "sharded int32 ragged, partly written, fill 42", dtype: "int32", shape: [17, 9], chunks: [8, 8],
    codecs: sharded([4, 4], [BYTES_LE, { name: "gzip", configuration: { level: 1 } }]), fill: 42,
    region: [[2, 11], [1, 6]] },
  // Written whole, then a region rewritten: the shards' untouched inner chunks keep their stored
  // bytes (copied into the new shard), the touched ones are encoded again.
  { name: "sharded uint16 zstd, rewritten in part", dtype: "uint16", shape: [20, 30], chunks: [10, 15],
    codecs: sharded([5, 5], [BYTES_LE, ZSTD]), then: [[3, 12], [4, 9]] },
  { name: "sharded float64 crc32c inner", dtype: "float64", shape: [40], chunks: [16],
    codecs: sharded([4], [{ name: "bytes", configuration: { endian: "big" } }, { name: "crc32c" }]) },
  { name: "sharded uint8 3-d blosc", dtype: "uint8", shape: [6, 6, 6], chunks: [6, 6, 6],
    codecs: sharded([3, 2, 6], [BYTES_LE, { name: "blosc", configuration: { cname: "zstd", clevel: 3, shuffle: "bitshuffle", typesize: 1, blocksize: 0 } }]) },
  // Codecs of zarr-extensions (issue 20) that zarrita decodes: numcodecs.delta, numcodecs.shuffle,
  // bitround (lossy: zarrita must read what ndstore reads back).
  { name: "int32 numcodecs.delta + numcodecs.shuffle", dtype: "int32", shape: [9, 7], chunks: [4, 4],
    codecs: [{ name: "numcodecs.delta", configuration: { dtype: "<i4" } }, BYTES_LE,
             { name: "numcodecs.shuffle", configuration: { elementsize: 4 } }] },
  { name: "uint16 numcodecs.delta + zstd", dtype: "uint16", shape: [30], chunks: [8],
    codecs: [{ name: "numcodecs.delta", configuration: { dtype: "<u2" } }, BYTES_LE, ZSTD] },
  { name: "sharded int32, inner numcodecs.delta + crc32c", dtype: "int32", shape: [20, 18], chunks: [10, 9],
    codecs: sharded([5, 3], [{ name: "numcodecs.delta", configuration: { dtype: "<i4" } }, BYTES_LE, { name: "crc32c" }]),
    then: [[2, 7], [1, 12]] },
  { name: "float32 bitround keepbits 6", dtype: "float32", shape: [5, 6], chunks: [3, 4], lossy: true,
    codecs: [{ name: "bitround", configuration: { keepbits: 6 } }, BYTES_LE] },
  { name: "float64 numcodecs.bitround keepbits 2, big-endian", dtype: "float64", shape: [12], chunks: [5],
    lossy: true, codecs: [{ name: "numcodecs.bitround", configuration: { keepbits: 2 } },
                          { name: "bytes", configuration: { endian: "big" } }] },
];

// The values an array holds after writing data into region (or everything) over fill (or over
// the values before, an array).
function expectedAfterWrite(shape, data, fill, region) {
  const n = shape.reduce((a, b) => a * b, 1);
  if (!region) return toValues(data);
  const out = Array.isArray(fill) ? fill.slice() : new Array(n).fill(fill);
  const [[r0, r1], [c0, c1]] = region;
  let k = 0;
  for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) out[r * shape[1] + c] = toValues([data[k++]])[0];
  return out;
}

for (const c of writeCases) {
  await check(`zarrita reads ndstore: ${c.name}`, async () => {
    const dir = path.join(work, "w", c.name.replace(/[^a-z0-9]+/gi, "_"));
    const meta = {
      shape: c.shape,
      data_type: c.dtype,
      chunk_grid: { name: "regular", configuration: { chunk_shape: c.chunks } },
      codecs: c.codecs,
      fill_value: c.fill ?? (c.dtype === "bool" ? false : 0),
    };
    if (c.keys) meta.chunk_key_encoding = c.keys;
    run("create", JSON.stringify({ driver: "zarr3", kvstore: `file://${dir}`, metadata: meta }));
    const url = `file://${dir}|zarr3:`;
    const wshape = c.region ? c.region.map(([a, b]) => b - a) : c.shape;
    const data = makeData(c.dtype, wshape.reduce((a, b) => a * b, 1));
    const npy = `${dir}.in.npy`;
    npyWrite(npy, c.dtype, wshape, data);
    const region = c.region ? `[${c.region.map(([a, b]) => `${a}:${b}`).join(", ")}]` : null;
    run("write", url, ...(region ? ["--region", region] : []), "-i", npy);
    let want = expectedAfterWrite(c.shape, data, c.fill ?? 0, c.region);
    if (c.then) {
      const tshape = c.then.map(([a, b]) => b - a);
      const more = makeData(c.dtype, tshape.reduce((a, b) => a * b, 1), 2);
      npyWrite(`${dir}.then.npy`, c.dtype, tshape, more);
      run("write", url, "--region", `[${c.then.map(([a, b]) => `${a}:${b}`).join(", ")}]`, "-i",
          `${dir}.then.npy`);
      want = expectedAfterWrite(c.shape, more, want, c.then);
    }
    if (c.lossy) { // what ndstore reads back, which must differ from what was written
      run("read", url, "-o", `${dir}.back.npy`);
      const back = npyRead(`${dir}.back.npy`).values;
      if (back.every((v, i) => same(v, want[i]))) throw new Error("the lossy codec changed nothing");
      want = back;
    }
    const arr = await zarr.open(new FileSystemStore(dir), { kind: "array" });
    const got = await zarr.get(arr, null);
    expectShape(got.shape, c.shape, c.name);
    expectEqual(cOrder(got), want, c.name);
  });
}

// ---- 2. zarrita writes, ndstore reads ----

const readCases = [
  { name: "bytes only", dtype: "int16", shape: [10, 7], chunks: [4, 4], codecs: [BYTES_LE] },
  { name: "zstd", dtype: "float32", shape: [33], chunks: [10], codecs: [BYTES_LE, { name: "zstd", configuration: { level: 5, checksum: false } }] },
  { name: "blosc", dtype: "uint16", shape: [9, 9], chunks: [5, 5],
    codecs: [BYTES_LE, { name: "blosc", configuration: { cname: "lz4", clevel: 5, shuffle: "shuffle", typesize: 2, blocksize: 0 } }] },
  { name: "gzip", dtype: "int32", shape: [4, 5, 6], chunks: [2, 5, 4], codecs: [BYTES_LE, { name: "gzip", configuration: { level: 6 } }] },
  { name: "gzip uint8 fill 3", dtype: "uint8", shape: [20], chunks: [7], codecs: [BYTES_LE, { name: "gzip", configuration: { level: 1 } }], fill: 3, partial: true },
  { name: "bytes big-endian float64", dtype: "float64", shape: [8], chunks: [3], codecs: [{ name: "bytes", configuration: { endian: "big" } }] },
  { name: "numcodecs.delta + numcodecs.shuffle int16", dtype: "int16", shape: [6, 9], chunks: [4, 4],
    codecs: [{ name: "numcodecs.delta", configuration: { dtype: "<i2" } }, BYTES_LE,
             { name: "numcodecs.shuffle", configuration: { elementsize: 2 } }] },
  { name: "numcodecs.delta float64", dtype: "float64", shape: [25], chunks: [10],
    codecs: [{ name: "numcodecs.delta", configuration: { dtype: "<f8" } }, BYTES_LE, ZSTD] },
];

function cStrides(shape) {
  const s = new Array(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

for (const c of readCases) {
  await check(`ndstore reads zarrita: ${c.name}`, async () => {
    const dir = path.join(work, "r", c.name.replace(/[^a-z0-9]+/gi, "_"));
    fs.mkdirSync(dir, { recursive: true });
    const arr = await zarr.create(new FileSystemStore(dir), {
      shape: c.shape, chunkShape: c.chunks, dtype: c.dtype, codecs: c.codecs, fillValue: c.fill ?? 0,
    });
    const n = c.shape.reduce((a, b) => a * b, 1);
    const data = makeData(c.dtype, n, 7);
    if (c.partial) {
      // Only the first 10 elements: the rest stay fill (their chunks are never written).
      await zarr.set(arr, [zarr.slice(0, 10)], { data: data.subarray(0, 10), shape: [10], stride: [1] });
    } else {
      await zarr.set(arr, null, { data, shape: c.shape, stride: cStrides(c.shape) });
    }
    const out = `${dir}.out.npy`;
    run("read", `file://${dir}|zarr3:`, "-o", out);
    const got = npyRead(out);
    expectShape(got.shape, c.shape, c.name);
    const want = toValues(data).map((v, i) => (c.partial && i >= 10 ? c.fill : v));
    expectEqual(got.values, want, c.name);
    const verify = run("verify", `file://${dir}|zarr3:`);
    if (!/0 bad/.test(verify)) throw new Error(`verify: ${verify}`);
  });
}

// "dimension_names": null, as zarrita writes it when asked for no names (issue 20: it was refused).
await check("ndstore reads zarrita: dimension_names null", async () => {
  const dir = path.join(work, "r", "dimension_names_null");
  fs.mkdirSync(dir, { recursive: true });
  const arr = await zarr.create(new FileSystemStore(dir), {
    shape: [6], chunkShape: [4], dtype: "int32", fillValue: 3, dimensionNames: null,
  });
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "zarr.json"), "utf8"));
  if (meta.dimension_names !== null) throw new Error(`zarrita wrote ${JSON.stringify(meta.dimension_names)}`);
  const data = new Int32Array([1, -2, 3, -4, 5, -6]);
  await zarr.set(arr, null, { data, shape: [6], stride: [1] });
  const out = `${dir}.out.npy`;
  run("read", `file://${dir}|zarr3:`, "-o", out);
  expectEqual(npyRead(out).values, Array.from(data), "dimension_names null");
});

// zarrita 0.7.5 has none of the zarr v3 extension data types (float8, int4, numpy.datetime64,
// complex): ndstore's unit tests cover them with the registry's bit layouts instead.

// ---- 3. the fixture written by zarrita's Python ancestor ----

const fixtureRoot = path.join(fixtures, "zarr3_zarrita");
const fixtureNames = fs
  .readdirSync(path.join(fixtureRoot, "data.zarr"))
  .filter((n) => fs.statSync(path.join(fixtureRoot, "data.zarr", n)).isDirectory())
  .sort();
if (fixtureNames.length === 0) {
  failed++;
  console.log(`FAIL no arrays in ${fixtureRoot}/data.zarr`);
}
for (const name of fixtureNames) {
  await check(`ndstore reads fixture ${name}`, async () => {
    const out = path.join(work, `fixture.${name}.npy`);
    run("read", `file://${path.join(fixtureRoot, "data.zarr", name)}|zarr3:`, "-o", out);
    const got = npyRead(out);
    const want = npyRead(path.join(fixtureRoot, "expected", `${name}.npy`));
    expectShape(got.shape, want.shape, name);
    expectEqual(got.values, want.values, name);
  });
}

// ---- 4. zarr v2 to sharded zarr v3 with `ndstore cp`, read by zarrita ----

await check("cp zarr v2 -> sharded zarr v3 (schema chunk layout), read by zarrita", async () => {
  const src = path.join(work, "cp", "src.zarr");
  const dst = path.join(work, "cp", "dst_schema");
  run("create", src, "--shape", "37,50", "--chunks", "16,16", "--dtype", "uint16", "--codec", "blosc");
  const data = makeData("uint16", 37 * 50, 3);
  npyWrite(`${src}.npy`, "uint16", [37, 50], data);
  run("write", src, "-i", `${src}.npy`);
  const spec = {
    driver: "zarr3",
    kvstore: `file://${dst}`,
    schema: { chunk_layout: { write_chunk: { shape: [32, 32] }, read_chunk: { shape: [16, 16] } } },
  };
  run("cp", src, JSON.stringify(spec));
  const meta = JSON.parse(fs.readFileSync(path.join(dst, "zarr.json"), "utf8"));
  if (meta.codecs[0].name !== "sharding_indexed") throw new Error(`not sharded: ${JSON.stringify(meta.codecs)}`);
  const arr = await zarr.open(new FileSystemStore(dst), { kind: "array" });
  const got = await zarr.get(arr, null);
  expectShape(got.shape, [37, 50], "cp");
  expectEqual(cOrder(got), toValues(data), "cp");
  const part = await zarr.get(arr, [zarr.slice(10, 20), zarr.slice(30, 35)]);
  const want = [];
  for (let r = 10; r < 20; r++) for (let c = 30; c < 35; c++) want.push(data[r * 50 + c]);
  expectEqual(cOrder(part), want, "cp region");
});

await check("cp zarr v2 -> sharded zarr v3 (a whole zarr.json as metadata), read by zarrita", async () => {
  const src = path.join(work, "cp", "src.zarr");
  const dst = path.join(work, "cp", "dst_meta");
  const meta = {
    zarr_format: 3,
    node_type: "array",
    shape: [37, 50],
    data_type: "uint16",
    chunk_grid: { name: "regular", configuration: { chunk_shape: [20, 25] } },
    chunk_key_encoding: { name: "default", configuration: { separator: "/" } },
    fill_value: 0,
    codecs: sharded([10, 5], [BYTES_LE, { name: "gzip", configuration: { level: 4 } }]),
    attributes: { origin: "zarr v2" },
    dimension_names: ["y", "x"],
  };
  run("cp", src, JSON.stringify({ driver: "zarr3", kvstore: `file://${dst}`, metadata: meta }));
  const arr = await zarr.open(new FileSystemStore(dst), { kind: "array" });
  const got = await zarr.get(arr, null);
  const want = npyRead(`${src}.npy`).values;
  expectEqual(cOrder(got), want, "cp metadata");
  if (arr.attrs.origin !== "zarr v2") throw new Error(`attributes: ${JSON.stringify(arr.attrs)}`);
});

// ---- 5. string arrays (issue 20): ndstore writes data_type "string" with vlen-utf8, zarrita reads ----

const STRINGS = ["", "a", "h\u00e9llo", "\u4e2d\u6587", "emoji \u{1F600}", "x".repeat(300), "q\"\\/"];

for (const [name, codec] of [["vlen-utf8 + zstd", "zstd:3"], ["vlen-utf8 alone", "none"]]) {
  await check(`string ${name}: ndstore writes (one chunk missing), zarrita reads`, async () => {
    const dir = path.join(work, "strings", codec.replace(":", ""));
    run("create", `file://${dir}|zarr3:`, "--shape", "3,4", "--chunks", "2,3", "--dtype", "string",
        "--codec", codec, "--fill", "\"-\"");
    const lines = [];
    for (let i = 0; i < 8; i++) lines.push(JSON.stringify(STRINGS[i % STRINGS.length]));
    fs.writeFileSync(`${dir}.jsonl`, lines.join("\n") + "\n");
    run("write", `file://${dir}|zarr3:`, "--region", "[0:2, 0:4]", "-i", `${dir}.jsonl`);
    const meta = JSON.parse(fs.readFileSync(path.join(dir, "zarr.json"), "utf8"));
    if (meta.data_type !== "string" || meta.codecs[0].name !== "vlen-utf8" || meta.fill_value !== "-")
      throw new Error(`zarr.json: ${JSON.stringify(meta)}`);
    const arr = await zarr.open(new FileSystemStore(dir), { kind: "array" });
    const got = await zarr.get(arr, null);
    expectShape(got.shape, [3, 4], name);
    const want = [];
    for (let i = 0; i < 8; i++) want.push(STRINGS[i % STRINGS.length]);
    for (let i = 0; i < 4; i++) want.push("-"); /* row 2: chunks never written */
    expectEqual(cOrder(got), want, name);
  });
}

await check("zarr v2 object array (|O, vlen-utf8, zstd): ndstore writes, zarrita reads", async () => {
  const dir = path.join(work, "strings", "v2");
  run("create", dir, "--shape", "5", "--chunks", "3", "--dtype", "string", "--codec", "zstd:1");
  const values = STRINGS.slice(0, 4);
  fs.writeFileSync(`${dir}.jsonl`, values.map((v) => JSON.stringify(v)).join("\n") + "\n");
  run("write", dir, "--region", "[0:4]", "-i", `${dir}.jsonl`);
  const arr = await zarr.open.v2(new FileSystemStore(dir), { kind: "array" });
  if (arr.dtype !== "v2:object") throw new Error(`dtype ${arr.dtype}`);
  const got = await zarr.get(arr, null);
  expectEqual(Array.from(got.data), [...values, ""], "v2 object array");
});

fs.rmSync(work, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
