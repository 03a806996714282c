// What a GPU run needs checked before any kernel or file touches a device, shown on the CPU: pad ids outside the
// vocabulary (a device-side assert on CUDA ends the process's CUDA context), a sampling stream saved on one kind
// of device restored on another, "cuda" spelled as cuda:0, and the CUDA memory figures runtimeInfo reports.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { runtimeInfo } from "../../src/runtime.js";
import { causalLMModule } from "../../src/models/components.js";
import { TINY_SHAPE, tinyLM } from "./tiny-lm.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-device-guards-"));

describe("padTokenId", () => {
  const model = tinyLM(3);  // vocabulary of 64
  const prompts = [[1, 2, 3], [4]];

  for (const pad of [64, 1000, -1, 2.5]) {
    it(`${pad} is refused before generation starts, naming the value`, async () => {
      await expect(model.generate(prompts, { maxNewTokens: 2, padTokenId: pad })).rejects.toThrow(
        `padTokenId ${pad} is outside the vocabulary of 64 (ids 0..63)`,
      );
    });
  }

  it("the last id of the vocabulary is a valid pad, for prompts of different lengths", async () => {
    const out = await model.generate(prompts, { maxNewTokens: 2, padTokenId: 63 });
    expect(out.completions).toHaveLength(2);
  });
});

describe("token ids and positions of the public forward and causal-LM loss", () => {
  const model = tinyLM(4);  // vocabulary of 64
  const batch = (ids: number[]) => ({ ids: Int32Array.from(ids), batch: 1, length: ids.length });

  for (const id of [64, 1000, -1]) {
    it(`id ${id} is refused when the call is made, before any kernel runs, naming the vocabulary`, async () => {
      expect(() => model.native.forward(batch([1, id, 2]))).toThrow("ids holds a token id outside the vocabulary of 64");
      await expect(model.causalLMLossBackward(batch([1, id, 2]))).rejects.toThrow("ids holds a token id outside the vocabulary of 64");
      expect(model.native.parameterNames().flatMap(({ name }) => (model.native.getGradient(name) ? [name] : []))).toEqual([]);
    });
  }

  // A learned position table (GPT-2's) would read out of bounds; rotary tables would rotate by a negative angle.
  it("a negative position is refused, naming positionIds; positions must cover the batch", () => {
    expect(() => model.native.forward({ ...batch([1, 2, 3]), positionIds: Int32Array.from([0, -1, 1]) })).toThrow("positionIds holds a negative position");
    expect(() => model.native.forward({ ...batch([1, 2, 3]), positionIds: Int32Array.from([0, 1]) })).toThrow("positionIds must hold batch × length = 3 positions");
  });

  it("ids inside the vocabulary and positions from 0 run as before", async () => {
    const out = await model.native.forward({ ...batch([1, 63, 2]), positionIds: Int32Array.from([0, 1, 2]) });
    expect(out.shape).toEqual([1, 3, 64]);
    expect((await model.causalLMLossBackward(batch([1, 63, 2]), { backward: false })).loss).toBeGreaterThan(0);
  });
});

describe("the sampling stream in a checkpoint", () => {
  it("records its device type beside generator.bin and restores on the same one", async () => {
    const dir = path.join(scratch, "same");
    const saved = causalLMModule(tinyLM(4), null);
    await saved.saveState(dir);
    expect(JSON.parse(readFileSync(path.join(dir, "generator.json"), "utf8"))).toEqual({ device: "cpu" });
    await expect(causalLMModule(tinyLM(5), null).loadState(dir)).resolves.toBeUndefined();
  });

  it("refuses a state saved on another kind of device, naming both, before reading any weight", async () => {
    const dir = path.join(scratch, "cuda");
    await causalLMModule(tinyLM(4), null).saveState(dir);
    writeFileSync(path.join(dir, "generator.json"), JSON.stringify({ device: "cuda" }));
    const target = tinyLM(6);
    const before = [...target.native.getParameter("model.norm.weight")];
    await expect(causalLMModule(target, null).loadState(dir)).rejects.toThrow(
      /generator\.bin holds a cuda generator's state but this model is on cpu: a sampling stream cannot resume across device types/,
    );
    expect([...target.native.getParameter("model.norm.weight")]).toEqual(before);
  });
});

describe("devices", () => {
  it('"cuda" is named as device 0 wherever a model is placed', async () => {
    if (runtimeInfo().cudaAvailable) return;
    const config = buildConfigJson("qwen2", TINY_SHAPE, { bosTokenId: null, eosTokenId: TINY_SHAPE.vocabSize - 1 });
    expect(() => CausalLM.create(config, { device: "cuda" })).toThrow('device "cuda:0" requested but CUDA is not available');
  });

  it("runtimeInfo reports CUDA memory per device, and none without CUDA", () => {
    const info = runtimeInfo();
    expect(info.cudaMemory).toHaveLength(info.cudaAvailable ? info.cudaDeviceCount : 0);
    for (const device of info.cudaMemory) {
      expect(Object.keys(device).sort()).toEqual(["allocatedBytes", "device", "peakAllocatedBytes", "peakReservedBytes", "reservedBytes"]);
    }
  });
});
