// State dicts in PyTorch's own file format (`torch.save` / `torch.load`), read and written without Python or libtorch.
//
// A `.pt` file is a zip (see zip.ts) holding `<archive>/data.pkl`, a protocol-2 pickle of an OrderedDict whose values
// are `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` calls, each storage a
// persistent id `("storage", torch.FloatStorage, key, location, numel)` whose bytes are the record `<archive>/data/<key>`.
// libtorch's C++ pickler writes globals that `torch.load(..., weights_only=True)` refuses, so the pickle is written here
// opcode for opcode as Python's pickler writes it. The reader is a small pickle machine that knows only those opcodes
// and globals: a file asking for anything else is refused rather than half-understood.
import { readFileSync } from "node:fs";
import { crc32 } from "node:zlib";
import { writeFileAtomic } from "../util/atomic.js";
import { readStoredZip, writeStoredZip, type ZipRecord } from "./zip.js";

/** Dtypes a torch.save state dict here may hold. */
export type StateDtype = "float32" | "bfloat16" | "float16";

/** One tensor of a state dict, as raw bytes. */
export interface StateTensor {
  /** Its element type. */
  dtype: StateDtype;
  /** Its dimensions. */
  shape: number[];
  /** Raw little-endian elements, row-major and contiguous. */
  data: Uint8Array;
}

const ELEMENT_SIZE: Record<StateDtype, number> = { float32: 4, bfloat16: 2, float16: 2 };
const STORAGE_CLASS: Record<StateDtype, string> = { float32: "FloatStorage", bfloat16: "BFloat16Storage", float16: "HalfStorage" };
const DTYPE_OF_STORAGE = new Map(Object.entries(STORAGE_CLASS).map(([dtype, name]) => [name, dtype as StateDtype]));

// torch.save's archive name when it writes to a stream; loaders take whatever directory the first entry is in.
const ARCHIVE = "archive";
// The zip format version torch.save writes; libtorch raises its minimum only for TorchScript features.
const FORMAT_VERSION = "3\n";
// Python's pickler writes dict items in SETITEMS batches of this many.
const PICKLE_BATCH = 1000;

const OP = {
  MARK: 0x28, // (
  STOP: 0x2e, // .
  BININT: 0x4a, // J
  BININT1: 0x4b, // K
  BININT2: 0x4d, // M
  NONE: 0x4e, // N
  BINPERSID: 0x51, // Q
  REDUCE: 0x52, // R
  BINUNICODE: 0x58, // X
  BUILD: 0x62, // b
  GLOBAL: 0x63, // c
  BINGET: 0x68, // h
  LONG_BINGET: 0x6a, // j
  BINPUT: 0x71, // q
  LONG_BINPUT: 0x72, // r
  SETITEM: 0x73, // s
  TUPLE: 0x74, // t
  SETITEMS: 0x75, // u
  EMPTY_DICT: 0x7d, // }
  EMPTY_TUPLE: 0x29, // )
  PROTO: 0x80,
  NEWTRUE: 0x88,
  NEWFALSE: 0x89,
  LONG1: 0x8a,
  TUPLE1: 0x85,
  TUPLE2: 0x86,
  TUPLE3: 0x87,
} as const;
const UTF8 = new TextEncoder();
const OP_NAMES = new Map<number, string>(Object.entries(OP).map(([name, code]) => [code, name]));

function elementCount(shape: readonly number[]): number {
  return shape.reduce((product, dim) => product * dim, 1);
}

// ---------------------------------------------------------------------------------------------------------------------
// Writing

/** Appends pickle opcodes with Python's memo numbering (every global, string, tuple and reduced object gets the next id). */
class PickleWriter {
  private bytes = new Uint8Array(1024);
  private length = 0;
  private nextMemo = 0;
  private readonly shared = new Map<string, number>();

  op(code: number, ...args: number[]): void {
    this.raw(Uint8Array.of(code, ...args));
  }

  /** A global, written once and fetched from the memo after, as Python pickles each class or function. */
  shareGlobal(module: string, name: string): void {
    this.sharedOr(`global ${module}.${name}`, () => {
      this.op(OP.GLOBAL);
      this.raw(UTF8.encode(`${module}\n${name}\n`));
      this.memoize();
    });
  }

  /** A string that torch.save passes as one shared object ("storage", "cpu"): written once, fetched after. */
  shareString(text: string): void {
    this.sharedOr(`string ${text}`, () => this.string(text));
  }

  /** A string object of its own (dict keys, storage keys): always written and memoized anew. */
  string(text: string): void {
    const utf8 = UTF8.encode(text);
    this.op(OP.BINUNICODE);
    this.u32(utf8.length);
    this.raw(utf8);
    this.memoize();
  }

  int(value: number): void {
    if (value >= 0 && value <= 0xff) this.op(OP.BININT1, value);
    else if (value >= 0 && value <= 0xffff) this.op(OP.BININT2, value & 0xff, value >> 8);
    else if (value >= -0x80000000 && value <= 0x7fffffff) {
      this.op(OP.BININT);
      this.u32(value >>> 0);
    } else {
      // Python's encode_long: little-endian two's complement, (bit_length >> 3) + 1 bytes for a positive value.
      let rest = BigInt(value);
      const digits: number[] = [];
      do {
        digits.push(Number(rest & 0xffn));
        rest >>= 8n;
      } while (rest > 0n || (digits[digits.length - 1]! & 0x80) !== 0);
      this.op(OP.LONG1, digits.length, ...digits);
    }
  }

  /** A tuple of what `items` writes: TUPLE1..3 after the items, MARK … TUPLE for longer ones, memoized either way. */
  tuple(count: number, items: () => void): void {
    if (count === 0) {
      this.op(OP.EMPTY_TUPLE); // the empty tuple is a singleton Python never memoizes
      return;
    }
    if (count > 3) this.op(OP.MARK);
    items();
    this.op(count === 1 ? OP.TUPLE1 : count === 2 ? OP.TUPLE2 : count === 3 ? OP.TUPLE3 : OP.TUPLE);
    this.memoize();
  }

  /** `OrderedDict()`: the class called with no arguments. */
  emptyOrderedDict(): void {
    this.shareGlobal("collections", "OrderedDict");
    this.op(OP.EMPTY_TUPLE);
    this.op(OP.REDUCE);
    this.memoize();
  }

  memoize(): void {
    const id = this.nextMemo++;
    if (id < 256) this.op(OP.BINPUT, id);
    else {
      this.op(OP.LONG_BINPUT);
      this.u32(id);
    }
  }

  finish(): Uint8Array {
    this.op(OP.STOP);
    return this.bytes.slice(0, this.length);
  }

  private sharedOr(key: string, writeAndMemoize: () => void): void {
    const id = this.shared.get(key);
    if (id === undefined) {
      writeAndMemoize();
      this.shared.set(key, this.nextMemo - 1);
    } else if (id < 256) {
      this.op(OP.BINGET, id);
    } else {
      this.op(OP.LONG_BINGET);
      this.u32(id);
    }
  }

  private u32(value: number): void {
    this.raw(Uint8Array.of(value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, value >>> 24));
  }

  private raw(data: Uint8Array): void {
    if (this.length + data.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + data.length));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
    }
    this.bytes.set(data, this.length);
    this.length += data.length;
  }
}

function checkTensor(key: string, tensor: StateTensor): void {
  const where = `tensor ${JSON.stringify(key)}`;
  if (!(tensor.dtype in ELEMENT_SIZE)) {
    throw new Error(`${where}: dtype ${JSON.stringify(tensor.dtype)} is not one of float32, bfloat16, float16`);
  }
  if (!Array.isArray(tensor.shape) || !tensor.shape.every((dim) => Number.isSafeInteger(dim) && dim >= 0)) {
    throw new Error(`${where}: shape must be a list of non-negative integers, got ${JSON.stringify(tensor.shape)}`);
  }
  const expected = elementCount(tensor.shape) * ELEMENT_SIZE[tensor.dtype];
  if (!(tensor.data instanceof Uint8Array) || tensor.data.length !== expected) {
    throw new Error(`${where}: ${tensor.dtype} of shape [${tensor.shape}] needs ${expected} bytes of data, got ${tensor.data?.length}`);
  }
}

function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d]!;
  }
  return strides;
}

/** The pickle of an OrderedDict of tensors, each on its own storage `data/<index>`, as torch.save writes it. */
function pickleStateDict(entries: [string, StateTensor][]): Uint8Array {
  const w = new PickleWriter();
  w.op(OP.PROTO, 2);
  w.emptyOrderedDict();
  for (let start = 0; start < entries.length; start += PICKLE_BATCH) {
    const batch = entries.slice(start, start + PICKLE_BATCH);
    if (batch.length > 1) w.op(OP.MARK);
    batch.forEach(([key, tensor], i) => {
      w.string(key);
      w.shareGlobal("torch._utils", "_rebuild_tensor_v2");
      w.tuple(6, () => {
        w.tuple(5, () => {
          w.shareString("storage");
          w.shareGlobal("torch", STORAGE_CLASS[tensor.dtype]);
          w.string(String(start + i));
          w.shareString("cpu");
          w.int(elementCount(tensor.shape));
        });
        w.op(OP.BINPERSID);
        w.int(0); // storage offset
        w.tuple(tensor.shape.length, () => tensor.shape.forEach((dim) => w.int(dim)));
        w.tuple(tensor.shape.length, () => contiguousStrides(tensor.shape).forEach((step) => w.int(step)));
        w.op(OP.NEWFALSE); // requires_grad
        w.emptyOrderedDict(); // backward hooks
      });
      w.op(OP.REDUCE);
      w.memoize();
    });
    w.op(batch.length > 1 ? OP.SETITEMS : OP.SETITEM);
  }
  return w.finish();
}

/**
 * libtorch ends each archive with `.data/serialization_id`: 20 digits from the record names, 20 from their contents.
 * Its name hash is C++'s std::hash, which differs between standard libraries, so CRC-32 stands in for it here; equal
 * state dicts still give equal bytes.
 */
function serializationId(records: readonly ZipRecord[]): string {
  let nameCrc = 0;
  let contentCrc = 0;
  for (const record of records) {
    nameCrc = crc32(record.name, nameCrc);
    contentCrc = crc32(record.data, contentCrc);
  }
  return String(nameCrc).padStart(20, "0") + String(contentCrc).padStart(20, "0");
}

/** The bytes `torch.save(state_dict, buffer)` writes for these tensors (in key order, each on its own storage). */
export function encodeTorchStateDict(tensors: Record<string, StateTensor>): Uint8Array {
  const entries = Object.entries(tensors);
  for (const [key, tensor] of entries) checkTensor(key, tensor);
  const records: ZipRecord[] = [
    { name: `${ARCHIVE}/data.pkl`, data: pickleStateDict(entries) },
    { name: `${ARCHIVE}/byteorder`, data: UTF8.encode("little") },
  ];
  // torch.save writes the storages sorted by their key as a string: 0, 1, 10, 11, 2, …
  const storageKeys = entries.map((_, index) => String(index)).sort();
  for (const key of storageKeys) records.push({ name: `${ARCHIVE}/data/${key}`, data: entries[Number(key)]![1].data });
  records.push({ name: `${ARCHIVE}/version`, data: UTF8.encode(FORMAT_VERSION) });
  records.push({ name: `${ARCHIVE}/.data/serialization_id`, data: UTF8.encode(serializationId(records)) });
  return writeStoredZip(records);
}

/** Writes `tensors` to `file` as torch.save would, atomically; any failure is an Error naming the file. */
export async function saveTorchStateDict(file: string, tensors: Record<string, StateTensor>): Promise<void> {
  let bytes: Uint8Array;
  try {
    bytes = encodeTorchStateDict(tensors);
  } catch (err) {
    throw new Error(`Cannot save ${file}: ${(err as Error).message}`);
  }
  try {
    await writeFileAtomic(file, bytes);
  } catch (err) {
    throw new Error(`Cannot write ${file}: ${(err as Error).message}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Reading

class PyGlobal {
  constructor(readonly module: string, readonly name: string) {}
  get qualified(): string {
    return `${this.module}.${this.name}`;
  }
}

class PyTuple {
  constructor(readonly items: PyValue[]) {}
}

class PyDict {
  readonly entries = new Map<string | number, PyValue>();
}

class StorageRef {
  constructor(readonly key: string, readonly dtype: StateDtype, readonly numel: number) {}
}

class TensorRef {
  constructor(readonly storage: StorageRef, readonly offset: number, readonly shape: number[], readonly stride: number[]) {}
}

type PyValue = null | boolean | number | string | PyGlobal | PyTuple | PyDict | StorageRef | TensorRef;

const ALLOWED_GLOBALS = new Set(["collections.OrderedDict", "torch._utils._rebuild_tensor_v2", ...[...DTYPE_OF_STORAGE.keys()].map((name) => `torch.${name}`)]);

/** Runs data.pkl; the result is the unpickled top-level object, tensors standing for their rebuild calls. */
function unpickle(pickle: Uint8Array, where: string): PyValue {
  const view = new DataView(pickle.buffer, pickle.byteOffset, pickle.byteLength);
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const stack: PyValue[] = [];
  const marks: number[] = [];
  const memo = new Map<number, PyValue>();
  const storages = new Map<string, StorageRef>();
  let at = 0;
  let opcodeAt = 0;
  let opcodeName = "";

  const fail = (message: string): never => {
    throw new Error(`${where}: data.pkl, ${opcodeName || "opcode"} at byte ${opcodeAt}: ${message}`);
  };
  const take = (count: number): number => {
    if (at + count > pickle.length) fail("the pickle is truncated");
    const start = at;
    at += count;
    return start;
  };
  const pop = (): PyValue => (stack.length > (marks[marks.length - 1] ?? 0) ? stack.pop()! : fail("stack underflow"));
  const popMark = (): PyValue[] => {
    const mark = marks.pop();
    if (mark === undefined) fail("no MARK to match");
    return stack.splice(mark!);
  };
  const top = (): PyValue => (stack.length > 0 ? stack[stack.length - 1]! : fail("stack underflow"));
  const integer = (value: PyValue, what: string): number =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : fail(`${what} must be a non-negative integer, got ${describe(value)}`);
  const intTuple = (value: PyValue, what: string): number[] =>
    value instanceof PyTuple ? value.items.map((item, i) => integer(item, `${what}[${i}]`)) : fail(`${what} must be a tuple, got ${describe(value)}`);
  const setItem = (dict: PyValue, key: PyValue, value: PyValue) => {
    if (!(dict instanceof PyDict)) fail(`items set on ${describe(dict)}, not a dict`);
    if (typeof key !== "string" && typeof key !== "number") fail(`dict key ${describe(key)} is not a string or an integer`);
    (dict as PyDict).entries.set(key as string | number, value);
  };

  const persistentLoad = (pid: PyValue): StorageRef => {
    if (!(pid instanceof PyTuple) || pid.items.length !== 5 || pid.items[0] !== "storage") {
      return fail(`persistent id ${describe(pid)} is not ("storage", type, key, location, numel)`);
    }
    const [, type, key, location, numel] = pid.items;
    const dtype = type instanceof PyGlobal && type.module === "torch" ? DTYPE_OF_STORAGE.get(type.name) : undefined;
    if (dtype === undefined) fail(`storage type ${describe(type)} is not one of torch.FloatStorage, torch.BFloat16Storage, torch.HalfStorage`);
    if (typeof key !== "string" || typeof location !== "string") fail(`storage key and location must be strings`);
    const storage = new StorageRef(key as string, dtype!, integer(numel!, "storage numel"));
    const known = storages.get(storage.key);
    if (known && (known.dtype !== storage.dtype || known.numel !== storage.numel)) {
      fail(`storage ${storage.key} is named twice with different types or sizes`);
    }
    if (!known) storages.set(storage.key, storage);
    return known ?? storage;
  };

  const reduce = (callable: PyValue, args: PyValue): PyValue => {
    if (!(callable instanceof PyGlobal) || !(args instanceof PyTuple)) return fail(`cannot call ${describe(callable)}`);
    if (callable.qualified === "collections.OrderedDict") {
      if (args.items.length !== 0) fail("OrderedDict called with arguments");
      return new PyDict();
    }
    if (callable.qualified === "torch._utils._rebuild_tensor_v2") {
      const [storage, offset, size, stride, requiresGrad, hooks, metadata] = args.items;
      if (args.items.length !== 6 && args.items.length !== 7) fail(`_rebuild_tensor_v2 takes 6 or 7 arguments, got ${args.items.length}`);
      if (!(storage instanceof StorageRef)) return fail(`_rebuild_tensor_v2: first argument ${describe(storage ?? null)} is not a storage`);
      if (typeof requiresGrad !== "boolean") fail("_rebuild_tensor_v2: requires_grad is not a bool");
      if (!(hooks instanceof PyDict) || hooks.entries.size !== 0) fail("_rebuild_tensor_v2: tensors with backward hooks are not supported");
      if (metadata !== undefined && !(metadata instanceof PyDict && metadata.entries.size === 0)) {
        fail("_rebuild_tensor_v2: tensor metadata (e.g. conjugate or negative bits) is not supported");
      }
      const shape = intTuple(size!, "size");
      const strides = intTuple(stride!, "stride");
      if (shape.length !== strides.length) fail(`size [${shape}] and stride [${strides}] differ in length`);
      return new TensorRef(storage, integer(offset!, "storage offset"), shape, strides);
    }
    return fail(`calling ${callable.qualified} is not allowed`);
  };

  for (;;) {
    opcodeAt = at;
    const code = pickle[take(1)]!;
    opcodeName = OP_NAMES.get(code) ?? "";
    switch (code) {
      case OP.PROTO: {
        const protocol = pickle[take(1)]!;
        if (protocol > 2) fail(`pickle protocol ${protocol}; torch.save writes protocol 2`);
        break;
      }
      case OP.MARK:
        marks.push(stack.length);
        break;
      case OP.STOP:
        if (stack.length !== 1 || marks.length !== 0) fail(`the pickle ends with ${stack.length} values on the stack`);
        return stack[0]!;
      case OP.NONE:
        stack.push(null);
        break;
      case OP.NEWTRUE:
      case OP.NEWFALSE:
        stack.push(code === OP.NEWTRUE);
        break;
      case OP.BININT1:
        stack.push(pickle[take(1)]!);
        break;
      case OP.BININT2:
        stack.push(view.getUint16(take(2), true));
        break;
      case OP.BININT:
        stack.push(view.getInt32(take(4), true));
        break;
      case OP.LONG1: {
        const count = pickle[take(1)]!;
        const start = take(count);
        let value = 0n;
        for (let i = count - 1; i >= 0; i--) value = (value << 8n) | BigInt(pickle[start + i]!);
        if (count > 0 && pickle[start + count - 1]! & 0x80) value -= 1n << BigInt(8 * count);
        if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < -BigInt(Number.MAX_SAFE_INTEGER)) fail(`integer ${value} is out of range`);
        stack.push(Number(value));
        break;
      }
      case OP.BINUNICODE: {
        const length = view.getUint32(take(4), true);
        const start = take(length);
        try {
          stack.push(decoder.decode(pickle.subarray(start, start + length)));
        } catch {
          fail("string is not valid UTF-8");
        }
        break;
      }
      case OP.GLOBAL: {
        const readLine = (): string => {
          const end = pickle.indexOf(0x0a, at);
          if (end < 0) fail("the pickle is truncated");
          const line = new TextDecoder().decode(pickle.subarray(at, end));
          at = end + 1;
          return line;
        };
        const global = new PyGlobal(readLine(), readLine());
        if (!ALLOWED_GLOBALS.has(global.qualified)) {
          fail(
            `global ${global.qualified} is not allowed (a state dict of float32/bfloat16/float16 tensors needs only ` +
              `${[...ALLOWED_GLOBALS].join(", ")})`,
          );
        }
        stack.push(global);
        break;
      }
      case OP.EMPTY_TUPLE:
        stack.push(new PyTuple([]));
        break;
      case OP.TUPLE1:
      case OP.TUPLE2:
      case OP.TUPLE3: {
        const count = code - OP.TUPLE1 + 1;
        const items: PyValue[] = [];
        for (let i = 0; i < count; i++) items.unshift(pop());
        stack.push(new PyTuple(items));
        break;
      }
      case OP.TUPLE:
        stack.push(new PyTuple(popMark()));
        break;
      case OP.EMPTY_DICT:
        stack.push(new PyDict());
        break;
      case OP.SETITEM: {
        const value = pop();
        const key = pop();
        setItem(top(), key, value);
        break;
      }
      case OP.SETITEMS: {
        const items = popMark();
        if (items.length % 2 !== 0) fail("odd number of items");
        for (let i = 0; i < items.length; i += 2) setItem(top(), items[i]!, items[i + 1]!);
        break;
      }
      case OP.BUILD: {
        // Module.state_dict() hangs its per-module versions on the OrderedDict as `_metadata`: an attribute, not data.
        const state = pop();
        if (!(top() instanceof PyDict) || !(state instanceof PyDict)) fail(`BUILD of ${describe(top())} with ${describe(state)}`);
        break;
      }
      case OP.BINPERSID:
        stack.push(persistentLoad(pop()));
        break;
      case OP.REDUCE: {
        const args = pop();
        stack.push(reduce(pop(), args));
        break;
      }
      case OP.BINPUT:
        memo.set(pickle[take(1)]!, top());
        break;
      case OP.LONG_BINPUT:
        memo.set(view.getUint32(take(4), true), top());
        break;
      case OP.BINGET:
      case OP.LONG_BINGET: {
        const id = code === OP.BINGET ? pickle[take(1)]! : view.getUint32(take(4), true);
        if (!memo.has(id)) fail(`memo entry ${id} was never stored`);
        stack.push(memo.get(id)!);
        break;
      }
      default:
        fail(
          `opcode 0x${code.toString(16).padStart(2, "0")}${code >= 0x20 && code < 0x7f ? ` ('${String.fromCharCode(code)}')` : ""} ` +
            `is not one torch.save writes for a state dict`,
        );
    }
  }
}

function describe(value: PyValue): string {
  if (value instanceof PyGlobal) return value.qualified;
  if (value instanceof PyTuple) return `a tuple of ${value.items.length}`;
  if (value instanceof PyDict) return "a dict";
  if (value instanceof TensorRef) return "a tensor";
  if (value instanceof StorageRef) return `storage ${value.key}`;
  return JSON.stringify(value);
}

/** Throws unless every element of the view (offset, size, strides) lies inside its storage. */
function checkView(tensor: TensorRef, fail: (message: string) => never): void {
  if (elementCount(tensor.shape) === 0) return;
  const last = tensor.shape.reduce((sum, dim, d) => sum + (dim - 1) * tensor.stride[d]!, tensor.offset);
  if (last >= tensor.storage.numel) {
    fail(`view (offset ${tensor.offset}, size [${tensor.shape}], stride [${tensor.stride}]) reaches past its storage of ${tensor.storage.numel} elements`);
  }
}

/** The tensor's elements (a view checkView passed), gathered through its offset and strides into a fresh contiguous buffer. */
function materialize(tensor: TensorRef, storage: Uint8Array): Uint8Array {
  const size = ELEMENT_SIZE[tensor.storage.dtype];
  const count = elementCount(tensor.shape);
  if (count === 0) return new Uint8Array(0);
  const contiguous = contiguousStrides(tensor.shape);
  if (tensor.shape.every((dim, d) => dim === 1 || tensor.stride[d] === contiguous[d])) {
    return storage.slice(tensor.offset * size, (tensor.offset + count) * size);
  }
  const out = new Uint8Array(count * size);
  const index = new Array<number>(tensor.shape.length).fill(0);
  let source = tensor.offset;
  for (let i = 0; i < count; i++) {
    out.set(storage.subarray(source * size, (source + 1) * size), i * size);
    // Advance the row-major index like an odometer, moving the source position by the strides.
    for (let d = tensor.shape.length - 1; d >= 0; d--) {
      if (++index[d]! < tensor.shape[d]!) {
        source += tensor.stride[d]!;
        break;
      }
      source -= (tensor.shape[d]! - 1) * tensor.stride[d]!;
      index[d] = 0;
    }
  }
  return out;
}

/** What a file declares of one tensor, for a caller to check before anything is materialised. */
export interface DeclaredTensor {
  /** The tensor's key in the state dict. */
  name: string;
  /** Its declared element type. */
  dtype: StateDtype;
  /** Its declared dimensions. */
  shape: number[];
}

// A state dict's tensors are its storages, views into them and tied copies (two names, one storage): together they
// take a small multiple of the file's bytes. Only overlapping (stride-0, expanded) views take more, and a few MiB
// of those are let through, since torch.save writes expand() that way.
const MATERIALISE_FACTOR = 4;
const MATERIALISE_ALLOWANCE = 16 * 2 ** 20;

/**
 * The state dict in torch.save's bytes; `file` names the source in errors. Every tensor's name, shape, storage and
 * view bounds are checked first, then `inspect` sees the declared tensors (a caller's names and shapes, e.g. a value
 * head's), and only then is any storage gathered into tensors.
 */
export function decodeTorchStateDict(bytes: Uint8Array, file?: string, inspect?: (tensors: DeclaredTensor[]) => void): Record<string, StateTensor> {
  const where = file ?? "torch state dict";
  if (bytes[0] === OP.PROTO) {
    throw new Error(`${where}: legacy (pre-zip, torch < 1.6 or _use_new_zipfile_serialization=False) torch.save files are not supported`);
  }
  const records = readStoredZip(bytes, where);
  const first = records.keys().next().value as string | undefined;
  const archive = first?.includes("/") ? first.slice(0, first.indexOf("/")) : undefined;
  const record = (name: string) => (archive === undefined ? undefined : records.get(`${archive}/${name}`));
  const pickle = record("data.pkl");
  if (pickle === undefined) throw new Error(`${where}: no ${archive ?? "<archive>"}/data.pkl: not a file written by torch.save`);
  const byteorder = record("byteorder");
  if (byteorder !== undefined && new TextDecoder().decode(byteorder) !== "little") {
    throw new Error(`${where}: big-endian tensor data (byteorder "${new TextDecoder().decode(byteorder)}") is not supported`);
  }

  const root = unpickle(pickle, where);
  if (!(root instanceof PyDict)) throw new Error(`${where}: data.pkl holds ${describe(root)}, not a dict of tensors`);
  const tensors: Array<{ name: string; view: TensorRef; storage: Uint8Array }> = [];
  let total = 0;
  for (const [key, value] of root.entries) {
    const fail = (message: string): never => {
      throw new Error(`${where}: tensor ${JSON.stringify(key)}: ${message}`);
    };
    if (typeof key !== "string") fail("the key is not a string");
    if (!(value instanceof TensorRef)) return fail(`the value is ${describe(value)}, not a tensor`);
    const storage = record(`data/${value.storage.key}`) ?? fail(`its storage record ${archive}/data/${value.storage.key} is missing`);
    const expected = value.storage.numel * ELEMENT_SIZE[value.storage.dtype];
    if (storage.length !== expected) {
      fail(`storage ${value.storage.key} holds ${storage.length} bytes, but ${value.storage.numel} ${value.storage.dtype} elements take ${expected}`);
    }
    checkView(value, fail);
    total += elementCount(value.shape) * ELEMENT_SIZE[value.storage.dtype];
    tensors.push({ name: key as string, view: value, storage });
  }
  inspect?.(tensors.map(({ name, view }) => ({ name, dtype: view.storage.dtype, shape: view.shape })));
  if (total > MATERIALISE_FACTOR * bytes.length + MATERIALISE_ALLOWANCE) {
    throw new Error(
      `${where}: its tensors would take ${total} bytes from a file of ${bytes.length} bytes: overlapping (stride-0, expanded) views ` +
        `are read up to ${MATERIALISE_ALLOWANCE} bytes beyond ${MATERIALISE_FACTOR}× the file`,
    );
  }
  // Keys are data: on a plain object a tensor named "__proto__" would set the prototype instead of a property.
  const out: Record<string, StateTensor> = Object.create(null);
  for (const { name, view, storage } of tensors) out[name] = { dtype: view.storage.dtype, shape: view.shape, data: materialize(view, storage) };
  return out;
}

/** Reads a file written by torch.save (a state dict of float32/bfloat16/float16 tensors); see decodeTorchStateDict for inspect. */
export function loadTorchStateDict(file: string, inspect?: (tensors: DeclaredTensor[]) => void): Record<string, StateTensor> {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new Error(`Cannot read ${file}: ${(err as Error).message}`);
  }
  return decodeTorchStateDict(bytes, file, inspect);
}
