// Centralized MAGRPO: one joint policy, the tagged adapter, role splitting, env steps, the full-sequence loss, and
// its constructor errors.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { addon } from "../../src/native/loader.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { CentralizedMAGRPOTrainer, CentralizedParseError, TaggedAdapter, type CentralizedMAGRPOTrainerOptions } from "../../src/trainers/reinforce/centralized.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-central-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;
beforeAll(async () => {
  tokenizer = await createTinyModel(base, { seed: 4 });
});

describe("tagged adapter", () => {
  const adapter = new TaggedAdapter();
  it("lists every role's prompt and asks for one tagged section per role", () => {
    const prompt = adapter.buildPrompt({}, ["write a haiku", "write a title", "write a moral"]);
    for (const i of [0, 1, 2]) {
      expect(prompt).toContain(`Agent ${i} original prompt:`);
      expect(prompt).toContain(`<agent_${i}>\n...\n</agent_${i}>`);
    }
    expect(prompt.indexOf("write a haiku")).toBeLessThan(prompt.indexOf("write a title"));
  });

  it("parses sections case-insensitively with loose whitespace; a missing section is empty; none at all is an error", () => {
    expect(adapter.parseCompletion("<AGENT_1> b </agent_1>\n< agent_0 >a</ Agent_0 >", {}, 3)).toEqual(["a", "b", ""]);
    expect(() => adapter.parseCompletion("no tags here", {}, 2)).toThrow(CentralizedParseError);
  });
});

describe("CentralizedMAGRPOTrainer", () => {
  const seen: string[][][] = [];
  const reward: RewardFunction = (completions) => {
    seen.push(completions);
    return completions[0].map((_, j) => completions[1][j].length - completions[0][j].length);
  };
  const options = (overrides: Partial<CentralizedMAGRPOTrainerOptions> = {}): CentralizedMAGRPOTrainerOptions => ({
    agentModel: base,
    rewardFunc: reward,
    formatters: [(item) => `short: ${item.prompt}`, (item) => `long: ${item.prompt}`],
    trainDataset: [{ prompt: "cats" }, { prompt: "dogs" }, { prompt: "birds" }],
    outputDir: path.join(scratch, `run-${Math.random().toString(36).slice(2)}`),
    quiet: true,
    ...overrides,
    config: { numAgents: 2, numTrainEpochs: 2, numGenerations: 3, maxNewTokens: 6, agentLearningRate: 1e-3, evalInterval: 0, ...(overrides.config ?? {}) },
  });

  it("trains one actor on joint prompts; env steps = items × generations × epochs; rewards see the roles", async () => {
    const trainer = await CentralizedMAGRPOTrainer.create(options());
    expect(trainer.agents.length).toBe(1);
    expect(trainer.numRoles).toBe(2);
    const prompt = trainer.promptFor(0, { prompt: "cats" });
    expect(prompt).toContain("Agent 0 original prompt:\nshort: cats");
    expect(prompt).toContain("Agent 1 original prompt:\nlong: cats");
    await trainer.train();
    expect(trainer.progress.envStep).toBe(3 * 3 * 2);
    // Random tiny models write no tags: every joint response parses to empty roles, one list per role.
    expect(seen.at(-1)!.length).toBe(2);
    expect(seen.at(-1)![0].length).toBe(3);
    await trainer.close();
  });

  it("the joint policy's weights move by its gradients alone: not at all under a constant reward, clearly under an earnable one", async () => {
    const halves = { buildPrompt: (_: unknown, prompts: string[]) => prompts.join("\n"), parseCompletion: (text: string) => [text.slice(0, 3), text.slice(3)] };
    const moved = async (rewardFunc: RewardFunction) => {
      const trainer = await CentralizedMAGRPOTrainer.create(options({ adapter: halves, rewardFunc, config: { weightDecay: 0, agentLearningRate: 1e-2 } }));
      const before = trainer.agents[0].model.native.getParameter("model.layers.0.mlp.up_proj.weight");
      await trainer.train();
      const after = trainer.agents[0].model.native.getParameter("model.layers.0.mlp.up_proj.weight");
      await trainer.close();
      return Math.max(...after.map((w, i) => Math.abs(w - before[i])));
    };
    // Equal rewards give zero advantages, zero gradients and (without weight decay) no AdamW change at all.
    expect(await moved((c) => c[0].map(() => 1))).toBe(0);
    // A reward random text earns unevenly: the letters "e" in the first role.
    expect(await moved((c) => c[0].map((role0) => role0.split("e").length - 1 + role0.length / 10))).toBeGreaterThan(1e-4);
  });

  it("scores the full joint sequence: one update equals the manual policy gradient and AdamW step", async () => {
    const trainer = await CentralizedMAGRPOTrainer.create(options({ config: { numAgents: 2, advantageNormalization: false, agentLearningRate: 1e-2 } }));
    const model = trainer.agents[0].model;
    const copy = await model.clone();
    const prompt = tokenizer.encode("joint prompt");
    const joint = [Int32Array.from(tokenizer.encode("<agent_0>a</agent_0><agent_1>bb</agent_1>")), Int32Array.from([...tokenizer.encode("x"), tokenizer.eosTokenIds[0]])];
    await trainer.update([{ agent: 0, turn: 0, promptIds: prompt, completionIds: joint, returns: [2, 0], referenceKl: [0, 0], nodeMeanReward: 1, nodeMeanReturn: 1, envStep: 2 }]);
    // A = [1, −1]; loss = (1/2)·Σ −A_k·S_k over every token of each joint response, EOS included.
    await copy.policyGradientBackward([prompt, prompt], joint, [0.5, -0.5]);
    const optimizer = new (addon().NativeOptimizer)(copy.native, { lr: 1e-2 });
    await optimizer.step();
    expect(Array.from(model.native.getParameter("model.layers.0.mlp.up_proj.weight"))).toEqual(Array.from(copy.native.getParameter("model.layers.0.mlp.up_proj.weight")));
    optimizer.dispose();
    copy.dispose();
    await trainer.close();
  });

  it("refuses several actors, a mismatched role count, tokenizer lists and multi-turn configs", async () => {
    await expect(CentralizedMAGRPOTrainer.create(options({ agentModel: null, agents: [base, base] }))).rejects.toThrow(/exactly one actor model/);
    await expect(CentralizedMAGRPOTrainer.create(options({ numAgents: 3 }))).rejects.toThrow(/must match config\.numAgents \(2\), the role count/);
    await expect(CentralizedMAGRPOTrainer.create(options({ tokenizer: [tokenizer, tokenizer] }))).rejects.toThrow(/one actor tokenizer/);
    await expect(CentralizedMAGRPOTrainer.create(options({ config: { numAgents: 2, numTurns: 2 } }))).rejects.toThrow(/numTurns/);
  });
});
