// Hugging Face's repetition_penalty in the native sampler, checked against a hand computation from the raw logits of
// the same run: at every step the logit of each token the row has seen (its prompt and its completion so far) is
// divided by the penalty when positive and multiplied by it when negative, before any sampling warper; the rows of a
// batch are penalised as if generated alone; generation_config.json's repetition_penalty applies unless one is given.
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CausalLM, type GenerationOptions } from "../../src/models/causal-lm.js";
import { createTinyModel } from "../../src/models/tiny-model.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-repetition-"));
const dir = path.join(scratch, "tiny");
let model: CausalLM;
const STEPS = 10;
const promptA = [14, 120, 33, 201, 14];
const promptB = [90, 91];
const promptLong = Array.from({ length: 60 }, (_, i) => 3 + ((i * 37) % 250));

beforeAll(async () => {
  await createTinyModel(dir, { seed: 5, numLayers: 2, hiddenSize: 64 });
  model = await CausalLM.fromDirectory(dir);
});
afterAll(() => model?.dispose());

const greedy = (penalty: number | undefined, prompts: number[][] = [promptA], extra: Partial<GenerationOptions> = {}) =>
  model.generate(prompts, { maxNewTokens: STEPS, eosTokenIds: [], returnScores: true, repetitionPenalty: penalty, ...extra });

/** The tokens greedy decoding picks from the raw logits of each step once the penalty is applied by hand. */
function handPicks(prompt: readonly number[], tokens: ArrayLike<number>, scores: Float32Array, row: number, steps: number, penalty: number): { picks: number[]; changed: number } {
  const vocab = model.config.vocabSize;
  const seen = new Set(prompt);
  const picks: number[] = [];
  let changed = 0;
  for (let t = 0; t < steps; t++) {
    const logits = scores.subarray((row * steps + t) * vocab, (row * steps + t + 1) * vocab);
    let best = 0;
    let bestValue = -Infinity;
    let rawBest = 0;
    for (let v = 0; v < vocab; v++) {
      const x = logits[v];
      const penalized = seen.has(v) ? (x < 0 ? x * penalty : x / penalty) : x;
      if (penalized > bestValue) [best, bestValue] = [v, penalized];
      if (x > logits[rawBest]) rawBest = v;
    }
    if (best !== rawBest) changed++;
    picks.push(best);
    seen.add(tokens[t]);
  }
  return { picks, changed };
}

describe("repetition penalty", () => {
  // The tiny model's favourite is the prompt's last token and then its own last one, always a seen token: a penalty
  // above 1 moves greedy decoding off it at once, one below 1 changes nothing it would pick.
  for (const [penalty, prompt] of [[1.8, promptA], [3, promptLong]] as const) {
    it(`${penalty}: every greedy step picks what the penalised raw logits pick`, async () => {
      const g = await greedy(penalty, [prompt]);
      const tokens = Array.from(g.completions[0]);
      expect(tokens).toHaveLength(STEPS);
      const { picks, changed } = handPicks(prompt, tokens, g.scores!, 0, g.width, penalty);
      expect(tokens).toEqual(picks);
      // The penalty decided at least one step, so the comparison is not the unpenalised argmax twice.
      expect(changed).toBeGreaterThan(0);
    });
  }

  it("1 changes nothing; rows of a left-padded batch are penalised as if generated alone", async () => {
    expect((await greedy(1)).tokens).toEqual((await greedy(undefined)).tokens);
    const batch = await greedy(1.8, [promptA, promptB]);
    expect(Array.from(batch.completions[0])).toEqual(Array.from((await greedy(1.8, [promptA])).completions[0]));
    expect(Array.from(batch.completions[1])).toEqual(Array.from((await greedy(1.8, [promptB])).completions[0]));
  });

  it("applies before the warpers and to every returned sequence: top-k 1 sampling equals penalised greedy", async () => {
    const expected = Array.from((await greedy(1.8)).completions[0]);
    const sampled = await greedy(1.8, [promptA], { doSample: true, topK: 1, numReturnSequences: 3 });
    expect(sampled.completions.map((c) => Array.from(c))).toEqual([expected, expected, expected]);
  });

  it("a penalty that is not positive is an error naming it", async () => {
    await expect(greedy(0)).rejects.toThrow(/repetitionPenalty must be a positive number/);
    await expect(greedy(-1.2)).rejects.toThrow(/repetitionPenalty must be a positive number/);
  });

  it("generation_config.json's repetition_penalty applies when none is given; a given one overrides it", async () => {
    const withFile = path.join(scratch, "with-penalty");
    cpSync(dir, withFile, { recursive: true });
    const file = path.join(withFile, "generation_config.json");
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), repetition_penalty: 1.8 }));
    const penalised = await CausalLM.fromDirectory(withFile);
    try {
      const run = (penalty?: number) => penalised.generate([promptA], { maxNewTokens: STEPS, eosTokenIds: [], repetitionPenalty: penalty });
      expect((await run()).tokens).toEqual((await greedy(1.8)).tokens);
      expect((await run(1)).tokens).toEqual((await greedy(undefined)).tokens);
      expect((await run()).tokens).not.toEqual((await run(1)).tokens);
    } finally {
      penalised.dispose();
    }
  });

  it("sampling fields of generation_config.json that the sampler does not apply are named in a warning", async () => {
    const odd = path.join(scratch, "odd-sampling");
    cpSync(dir, odd, { recursive: true });
    const file = path.join(odd, "generation_config.json");
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), no_repeat_ngram_size: 3, typical_p: 1, min_p: 0.05 }));
    const warnings: string[] = [];
    const listen = (w: Error) => warnings.push(w.message);
    process.on("warning", listen);
    try {
      (await CausalLM.fromDirectory(odd)).dispose();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", listen);
    }
    expect(warnings.join("\n")).toMatch(/generation_config\.json: min_p=0\.05, no_repeat_ngram_size=3 not applied/);
  });
});
