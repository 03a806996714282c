// Defaults and semantics of CoMLRL 1.4.3 that live in configs and building blocks (issue 24, part 3): each checked
// against what the library does (its dataclass defaults, the tagged adapter's text in tests/golden/comlrl, how
// transformers' generate() reads generation_config.json when top_k is None).
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { iacConfig, maacConfig, madpoConfig, magrpoConfig, marlhfConfig } from "../../src/config/index.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import type { RolloutNode } from "../../src/rollout/tree.js";
import { RewardProcessors } from "../../src/rollout/rewards.js";
import { actorCriticSamples } from "../../src/trainers/actor-critic/samples.js";
import { TaggedAdapter } from "../../src/trainers/reinforce/centralized.js";

const GOLDEN = path.resolve(__dirname, "comlrl");
const golden = JSON.parse(readFileSync(path.join(GOLDEN, "goldens.json"), "utf8"));

describe("CoMLRL 1.4.3 defaults", () => {
  it("IAC and MAAC: discount 1.0 and top_k None (the model decides); MAGRPO and MADPO pin top_k 50", () => {
    for (const config of [iacConfig(), maacConfig()]) {
      expect(config.discount).toBe(1.0);
      expect(config.topK).toBeNull();
    }
    expect(golden.iac.separate_v.config.discount).toBe(1.0);
    // What CoMLRL's IAC passed to generate(): no top_k key at all.
    expect(golden.iac.separate_v.generateKwargs).not.toHaveProperty("top_k");
    expect(magrpoConfig().topK).toBe(50);
    expect(madpoConfig().topK).toBe(50);
  });

  it("MARLHF trains the reward model on every pair unless rewardHeldOutFraction is set", () => {
    expect(marlhfConfig().rewardHeldOutFraction).toBe(0);
    expect(marlhfConfig({ rewardHeldOutFraction: 0.25 }).rewardHeldOutFraction).toBe(0.25);
  });

  it("RewardProcessors.shift adds its value (default 0), as CoMLRL's", () => {
    expect(RewardProcessors.shift(0.5)(1)).toBe(1.5);
    expect(RewardProcessors.shift()(2)).toBe(2);
  });

  it("the tagged centralized adapter is 0-based and words its prompt as CoMLRL's TaggedCentralizedComparatorAdapter", () => {
    const { agentPrompts, prompt } = golden.centralized.taggedPrompt;
    const adapter = new TaggedAdapter();
    expect(adapter.buildPrompt({}, agentPrompts)).toBe(prompt);
    expect(adapter.parseCompletion("<agent_0>\nhaiku\n</agent_0>\n<agent_1>\ntitle\n</agent_1>", {}, 2)).toEqual(["haiku", "title"]);
  });

  it("the logged actor-critic return is the undiscounted suffix sum; only the TD target is discounted", async () => {
    const node = (turn: number, reward: number, child: RolloutNode | null): RolloutNode => ({
      turn, prompts: ["p"], historyPrompts: ["p"], promptIds: [[1]], completionIds: [[Int32Array.from([2])]], texts: [["x"]],
      referenceKl: [[0]], jointActions: [[0]], rewards: [reward], agentRewards: null, returns: [reward], children: [child], envStep: turn + 1,
      promptHistory: [["p"]], responseHistory: [["x"]],
    });
    const root = node(0, 1, node(1, 2, node(2, 4, null)));
    const critics = { shared: false, row: () => ({ prompt: [1], completion: Int32Array.from([2]) }), values: async () => [0.5, 0.5, 0.5] };
    const samples = await actorCriticSamples(root, 0, critics, { numAgents: 1, discount: 0.5, referenceKlCoef: 0, gaeLambda: 0 });
    expect(samples.map((s) => s.return)).toEqual([7, 6, 4]);
    expect(samples.map((s) => s.target)).toEqual([1 + 0.5 * 0.5, 2 + 0.5 * 0.5, 4]);
  });
});

describe("topK null: generation_config.json decides, as under Hugging Face generate()", () => {
  const prompt = [[14, 120, 33, 201]];
  const sample = async (dir: string, topK: number | null) => {
    const model = await CausalLM.fromDirectory(dir);
    try {
      model.native.setSeed(11);
      const g = await model.generate(prompt, { maxNewTokens: 12, doSample: true, numReturnSequences: 4, temperature: 1, topP: 1, topK, eosTokenIds: [] });
      return g.completions.map((c) => Array.from(c));
    } finally {
      model.dispose();
    }
  };

  it("without a top_k in the file: 50, transformers' default", async () => {
    const dir = path.join(GOLDEN, "model");
    expect(JSON.parse(readFileSync(path.join(dir, "generation_config.json"), "utf8"))).not.toHaveProperty("top_k");
    const fromFile = await sample(dir, null);
    expect(fromFile).toEqual(await sample(dir, 50));
    expect(fromFile).not.toEqual(await sample(dir, 0));
  });

  it("with top_k in the file: that value; an explicit topK overrides it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "comlrl-topk-"));
    cpSync(path.join(GOLDEN, "model"), dir, { recursive: true });
    const file = path.join(dir, "generation_config.json");
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), top_k: 1 }));
    const greedy = (await sample(dir, null))[0];
    expect(await sample(dir, null)).toEqual([greedy, greedy, greedy, greedy]);
    expect(new Set((await sample(dir, 0)).map((c) => c.join())).size).toBeGreaterThan(1);
  });

  it("a top_k in the file that is not a non-negative integer is an error naming the file", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "comlrl-topk-"));
    cpSync(path.join(GOLDEN, "model"), dir, { recursive: true });
    writeFileSync(path.join(dir, "generation_config.json"), JSON.stringify({ eos_token_id: 0, top_k: "many" }));
    await expect(sample(dir, null)).rejects.toThrow(/generation_config\.json top_k must be a non-negative integer, got "many"/);
  });
});
