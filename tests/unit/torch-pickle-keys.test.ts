// A state dict's keys are data, whatever they spell: one named "__proto__" (or "constructor", "toString") that real
// torch.save wrote is read back as a tensor of that name, not dropped into (or through) the result's prototype.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeTorchStateDict, decodeTorchStateDict, loadTorchStateDict, type StateTensor } from "../../src/io/torch-pickle.js";
import { runPython } from "../support/python.js";

const scratch = mkdtempSync(path.join(tmpdir(), "torch-pickle-keys-"));
const file = path.join(scratch, "proto.pt");
const values = (data: Uint8Array) => Array.from(new Float32Array(Uint8Array.from(data).buffer));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const WRITE = `import json, sys, torch
torch.save({"__proto__": torch.tensor([1.0, 2.0]), "constructor": torch.tensor([3.0]), "weight": torch.tensor([4.0])}, sys.argv[1])
print(json.dumps("ok"))`;

describe("torch state dict keys", () => {
  beforeAll(() => runPython(WRITE, [file]));

  it('a "__proto__" key torch.save wrote is kept as a tensor of that name', () => {
    const tensors = loadTorchStateDict(file);
    expect(Object.keys(tensors)).toEqual(["__proto__", "constructor", "weight"]);
    const own = (name: string) => Object.getOwnPropertyDescriptor(tensors, name)?.value as StateTensor;
    expect(own("__proto__")).toMatchObject({ dtype: "float32", shape: [2] });
    expect(values(own("__proto__").data)).toEqual([1, 2]);
    expect(values(own("constructor").data)).toEqual([3]);
  });

  it("written back, the key survives the round trip", () => {
    const again = decodeTorchStateDict(encodeTorchStateDict(loadTorchStateDict(file)));
    expect(Object.keys(again)).toEqual(["__proto__", "constructor", "weight"]);
  });
});
