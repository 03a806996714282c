// Named sampling streams: evaluation draws from its own stream, so how often it runs never changes what the training
// ("default") stream samples.
import { afterAll, describe, expect, it } from "vitest";
import { tinyLM } from "./tiny-lm.js";
import { illTyped } from "../support/ill-typed.js";

const model = tinyLM(11);
afterAll(() => model.dispose());

const prompts = Int32Array.from([1, 2, 3, 4]);
const sample = (stream?: string) =>
  model.native.generate({ prompts, promptLengths: Int32Array.from([4]), maxNewTokens: 8, numReturnSequences: 4, doSample: true, eosTokenIds: new Int32Array(), padTokenId: 0, stream });

describe("sampling streams", () => {
  it("generating on \"eval\" between two default generations leaves the default sequence unchanged", async () => {
    model.native.setSeed(42);
    const plain = [await sample(), await sample()];
    model.native.setSeed(42);
    model.native.setSeed(7, "eval");
    const first = await sample();
    const evaluation = await sample("eval");
    const second = await sample("default");
    expect(first.tokens).toEqual(plain[0].tokens);
    expect(second.tokens).toEqual(plain[1].tokens);
    // The eval stream is a real, distinct stream: its own seed, its own draws.
    expect(evaluation.tokens).not.toEqual(plain[1].tokens);
    model.native.setSeed(7, "eval");
    expect((await sample("eval")).tokens).toEqual(evaluation.tokens);
  });

  it("saves and restores each stream's state on its own", async () => {
    model.native.setSeed(3, "eval");
    const state = model.native.getGeneratorState("eval");
    const a = await sample("eval");
    await sample(); // the default stream moving does not touch eval
    model.native.setGeneratorState(state, "eval");
    expect((await sample("eval")).tokens).toEqual(a.tokens);
    // Restoring a stream that does not exist yet creates it (a resumed run restores eval before first use).
    model.native.setGeneratorState(state, "restored");
    expect((await sample("restored")).tokens).toEqual(a.tokens);
  });

  it("a stream that was never seeded is an error naming it", () => {
    expect(() => sample("never")).toThrow(/sampling stream "never" was never seeded/);
    expect(() => model.native.getGeneratorState("never")).toThrow(/sampling stream "never" was never seeded/);
    expect(() => model.native.setSeed(1, illTyped(5))).toThrow(/stream must be a string/);
  });
});
