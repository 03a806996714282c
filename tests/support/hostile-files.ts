// Small hostile files built byte by byte, for the tests that show a reader refuses them quickly and by name.
import { writeStoredZip } from "../../src/io/zip.js";

/**
 * A < 1 KiB value_head.pt whose "weight" is a stride-0 view of a one-element storage with the given size (a
 * [20000, 20000] one would be 1.6 GB of float32 gathered element by element), and a one-element "bias".
 */
export function strideZeroHead(size: number[]): Uint8Array {
  const bytes: number[] = [0x80, 2];
  const text = (s: string) => bytes.push(...new TextEncoder().encode(s));
  const unicode = (s: string) => {
    bytes.push(0x58, s.length, 0, 0, 0);
    text(s);
  };
  const global = (module: string, name: string) => {
    bytes.push(0x63);
    text(`${module}\n${name}\n`);
  };
  const int = (v: number) => bytes.push(0x4a, v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >>> 24);
  const orderedDict = () => (global("collections", "OrderedDict"), bytes.push(0x29, 0x52));
  const tensor = (key: string, shape: number[], stride: number[]) => {
    unicode(key);
    global("torch._utils", "_rebuild_tensor_v2");
    bytes.push(0x28, 0x28);
    unicode("storage");
    global("torch", "FloatStorage");
    unicode(key === "weight" ? "0" : "1");
    unicode("cpu");
    int(1);
    bytes.push(0x74, 0x51); // TUPLE, BINPERSID
    int(0);
    bytes.push(0x28);
    shape.forEach(int);
    bytes.push(0x74, 0x28);
    stride.forEach(int);
    bytes.push(0x74, 0x89);
    orderedDict();
    bytes.push(0x74, 0x52, 0x73); // TUPLE, REDUCE, SETITEM
  };
  orderedDict();
  tensor("weight", size, size.map(() => 0));
  tensor("bias", [1], [1]);
  bytes.push(0x2e);
  const one = new Uint8Array(new Float32Array([0.5]).buffer);
  return writeStoredZip([
    { name: "archive/data.pkl", data: Uint8Array.from(bytes) },
    { name: "archive/data/0", data: one },
    { name: "archive/data/1", data: one },
  ]);
}

