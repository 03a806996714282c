// One IAC update (and one MAAC round) against the real CoMLRL 1.4.3 (tests/golden/comlrl, scripts/reference/make_comlrl_goldens.py): its
// IACTrainer collected the rollouts with generate() replaced by given token ids and ran _update; we replay the same
// rows through trainer.update(): the critics' old values, the losses each agent and critic minimises, and the
// parameters (actor, critic, head) after CoMLRL's AdamW steps. The heads start from CoMLRL's initial weights, loaded
// through ValueHead.loadStateDict under CoMLRL's keys.
//
// Token accounting: with pad == eos CoMLRL's actor-critic counts a response up to its first pad, so EOS is neither
// scored in the log-prob nor read by the Q critic (its value is taken at the last token before EOS). Ours counts EOS.
// Replaying each completion without its EOS (`responseLens`) reproduces CoMLRL: the difference is exactly that token.
import { describe, expect, it } from "vitest";
import type { RolloutPolicy } from "../../src/rollout/tree.js";
import { headValues, type ActorCriticSample } from "../../src/trainers/actor-critic/samples.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { jointCriticText, MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { ValueHead } from "../../src/models/value-head.js";
import { COMLRL_MODEL, expectClose, golden, goldenStateDict, goldenTensors, harnessTransition, LOSS_RTOL, maxParamDiff, PARAM_ATOL, recordUpdates, scratch, taggedFormatters } from "./comlrl-golden.js";

// Old values are one fp32 forward of the same graph: 1e-5 absolute (values are ≈ 1e-2).
const VALUE_ATOL = 1e-5;

function headDiff(head: ValueHead, prefix: string): number {
  const ours = head.stateDict();
  let diff = 0;
  for (const [key, t] of goldenTensors) {
    if (!key.startsWith(`${prefix}.`)) continue;
    const mine = new Float32Array(Uint8Array.from(ours[key.slice(prefix.length + 1)].data).buffer);
    t.data.forEach((v, i) => (diff = Math.max(diff, Math.abs(v - mine[i]))));
  }
  return diff;
}

/** Both agents' heads, agent 0's actor and (separate critics) its critic against the golden's parameters after the update. */
function expectIacAfter(trainer: IACTrainer, heads: ValueHead[], name: string): void {
  heads.forEach((head, agent) => expect(headDiff(head, `${name}.head_after.${agent}`), `agent ${agent} head`).toBeLessThanOrEqual(PARAM_ATOL));
  const actor = trainer.agents[0].model.native;
  expect(maxParamDiff((p) => actor.getParameter(p), `${name}.actor_after.0`).diff).toBeLessThanOrEqual(PARAM_ATOL);
  if (trainer.config.useSeparateCritic) {
    const critic = trainer.critics[0].model.native;
    expect(maxParamDiff((p) => critic.getParameter(p), `${name}.critic_after.0`).diff).toBeLessThanOrEqual(PARAM_ATOL);
  }
}

describe.each(Object.entries<any>(golden.iac))("CoMLRL 1.4.3 parity: IAC %s", (mode, ref) => {
  const name = `iac_${mode}`;
  it("old values, losses and parameters after one update", async () => {
    const c = ref.config;
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const trainer = await IACTrainer.create({
      agents: [COMLRL_MODEL, COMLRL_MODEL], critics: c.useSeparateCritic ? [COMLRL_MODEL, COMLRL_MODEL] : null, tokenizer,
      rewardFunc: () => ref.rewards, trainDataset: [{ prompt: "the red fox" }], quiet: true, outputDir: scratch(),
      config: {
        numAgents: 2, numTurns: 1, numGenerations: 2, rolloutBufferSize: 2, useSeparateCritic: c.useSeparateCritic, criticType: c.criticType,
        valueHeadHiddenDim: c.valueHeadHiddenDim, criticValueHeadHiddenDim: c.criticValueHeadHiddenDim,
      },
    });
    try {
      const records = recordUpdates(trainer);
      const heads = trainer.agents.map((agent, i) => (c.useSeparateCritic ? trainer.critics[i].valueHead : agent.valueHead!));
      heads.forEach((head, i) => head.loadStateDict(goldenStateDict(`${name}.head_init.${i}`)));

      const samples: ActorCriticSample[] = [];
      for (const [agent, a] of (ref.agents as any[]).entries()) {
        const completions: Int32Array[] = a.rows.map((row: number[], g: number) => Int32Array.from(row.slice(0, a.responseLens[g])));
        const rows = completions.map((completion) => ({ prompt: a.promptIds, completion: c.criticType === "q" ? completion : new Int32Array(0) }));
        const oldValues = await headValues(heads[agent], rows, c.criticType);
        oldValues.forEach((v, g) => expect(Math.abs(v - a.oldValues[g]), `agent ${agent} old value ${g}`).toBeLessThanOrEqual(VALUE_ATOL));
        completions.forEach((completionIds, g) => {
          const reward = ref.rewards[g];
          samples.push({
            agent, turn: 0, itemIndex: 0, envStep: 2, promptIds: a.promptIds, completionIds, completion: "", critic: rows[g],
            environmentReward: reward, referenceKl: 0, reward, oldValue: oldValues[g], target: reward, return: reward,
          });
        });
      }
      await trainer.update(samples);

      for (const [agent, a] of (ref.agents as any[]).entries()) {
        const mine = records.filter(([component]) => component.startsWith(`agent_${agent}`));
        expect(mine.map(([component]) => component)).toEqual(c.useSeparateCritic ? [`agent_${agent}`, `agent_${agent}/critic`] : [`agent_${agent}`]);
        mine.forEach(([component, update], k) => expectClose(update.loss, a.backwardLosses[k], LOSS_RTOL, `${component} loss`));
        expectClose(mine[0][1].gradNorm, a.actorGradNorm, LOSS_RTOL, `agent ${agent} actor gradient norm`);
        if (c.useSeparateCritic) expectClose(mine[1][1].gradNorm, a.criticGradNorm, LOSS_RTOL, `agent ${agent} critic gradient norm`);
      }
      expectIacAfter(trainer, heads, name);
    } finally {
      await trainer.close();
    }
  });
});

/** The critic's head and body and agent 0's actor against the golden's parameters after the round. */
function expectMaacAfter(trainer: MAACTrainer, name: string): void {
  expect(headDiff(trainer.critics[0].valueHead, `${name}.head_after`)).toBeLessThanOrEqual(PARAM_ATOL);
  const actor = trainer.agents[0].model.native;
  expect(maxParamDiff((p) => actor.getParameter(p), `${name}.actor_after.0`).diff).toBeLessThanOrEqual(PARAM_ATOL);
  const critic = trainer.critics[0].model.native;
  expect(maxParamDiff((p) => critic.getParameter(p), `${name}.critic_after`).diff).toBeLessThanOrEqual(PARAM_ATOL);
}

// MAAC through our rollout path: the agents sample CoMLRL's rows, so the joint critic texts (a Q critic's with each
// generation's joint action) and their ids come from our MAAC, then one round of updates.
describe.each([
  ["V", "maac"],
  ["Q", "maac_q"],
])("CoMLRL 1.4.3 parity: MAAC (%s critic)", (_, name) => {
  const ref = golden[name];
  it("the joint critic texts and ids, old values, each agent's and the critic's losses, and parameters after the round", async () => {
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const trainer = await MAACTrainer.create({
      agents: [COMLRL_MODEL, COMLRL_MODEL], critics: [COMLRL_MODEL], tokenizer, rewardFunc: () => ref.rewards, trainDataset: [{ prompt: "the red fox" }],
      formatters: [(item) => String(item.prompt), (item) => `${item.prompt} again`],
      quiet: true, outputDir: scratch(), config: { numAgents: 2, numTurns: 1, numGenerations: 2, rolloutBufferSize: 2, criticType: ref.config.criticType },
    });
    try {
      const head = trainer.critics[0].valueHead;
      head.loadStateDict(goldenStateDict(`${name}.head_init`));
      trainer.agents.forEach((policy: RolloutPolicy, agent) => {
        const a = ref.agents[agent];
        policy.sample = async (prompts, k) => {
          expect(prompts).toEqual([ref.prompts[agent]]);
          const completions = a.rows.slice(0, k).map((row: number[], g: number) => Int32Array.from(row.slice(0, a.responseLens[g])));
          const texts = completions.map((c: Int32Array) => tokenizer.decode(c, { skipSpecialTokens: true }));
          expect(texts).toEqual(a.completions);
          return { promptIds: [tokenizer.encode(prompts[0])], completionIds: [completions], texts: [texts] };
        };
      });
      const samples = await trainer.collect([{ prompt: "the red fox" }]);
      expect(samples).toHaveLength(4);
      for (const s of samples) {
        const [g, a] = [s.agent === 0 ? samples.indexOf(s) : samples.indexOf(s) - 2, ref.agents[s.agent]];
        expect(s.promptIds).toEqual(a.promptIds);
        const text = jointCriticText(ref.prompts, ref.config.criticType === "q" ? ref.agents.map((b: any) => b.completions[g]) : null);
        expect(text).toBe(ref.criticTexts[g]);
        expect(s.critic.prompt, `agent ${s.agent} generation ${g} critic ids`).toEqual(a.criticIdsPerGeneration[g]);
        expect(Math.abs(s.oldValue - a.oldValues[g]), `agent ${s.agent} generation ${g} old value`).toBeLessThanOrEqual(VALUE_ATOL);
      }
      const records = recordUpdates(trainer);
      await trainer.update(samples);
      // Agent 0's actor step and the critic's step on agent 0's samples, then agent 1's two.
      expect(records.map(([component]) => component)).toEqual(["agent_0", "critic", "agent_1", "critic"]);
      (ref.agents as any[]).forEach((a, agent) => {
        const [[, actor], [, critic]] = records.slice(2 * agent, 2 * agent + 2);
        expectClose(actor.loss, a.backwardLosses[0], LOSS_RTOL, `agent ${agent} actor loss`);
        expectClose(critic.loss, a.backwardLosses[1], LOSS_RTOL, `critic loss in agent ${agent}'s update`);
        expectClose(actor.gradNorm, a.actorGradNorm, LOSS_RTOL, `agent ${agent} actor gradient norm`);
        expectClose(critic.gradNorm, a.criticGradNorm, LOSS_RTOL, `critic gradient norm in agent ${agent}'s update`);
      });
      expectMaacAfter(trainer, name);
    } finally {
      await trainer.close();
    }
  });
});

// Multi-turn IAC and MAAC (one generation per turn): CoMLRL's own _run_batch with its external transition — two items
// of two turns, and (IAC) one item of three turns with formatters and two items of which the first ends early —
// generate() replaced by given rows per turn; each agent's buffer (the turns played) fills after the last item and is
// updated turn by turn. We roll the same items out
// through our rollout tree and transition with a policy that returns the same rows, so the prompts, old values (MAAC:
// the joint critic texts' ids), TD targets y_t = r_t + γ·V_old(h_{t+1}) and logged returns come from our sample path,
// then one update: losses, gradient norms and parameters after every turn's steps.
function multiTurnOptions(ref: any, tokenizer: ComlrlTokenizer) {
  const c = ref.config;
  const rewards: number[][] = ref.rewards.flat();
  return {
    agents: [COMLRL_MODEL, COMLRL_MODEL], tokenizer, rewardFunc: () => rewards.shift()!, trainDataset: ref.items, quiet: true, outputDir: scratch(),
    externalTransition: harnessTransition,
    formatters: c.formatters === "tagged" ? taggedFormatters : null,
    config: { numAgents: 2, numTurns: c.numTurns, numGenerations: 1, rolloutBufferSize: c.rolloutBufferSize, criticType: c.criticType, discount: c.discount, advantageNormalization: c.advantageNormalization },
  };
}

/** The update the golden recorded for agent's turn. */
const turnUpdate = (ref: any, agent: number, turn: number) => (ref.updates as any[]).find((u) => u.agent === agent && u.turn === turn);

/**
 * Rolls the golden's items out through our tree, each agent sampling its rows in rollout order (item, then turn)
 * without EOS (CoMLRL's response ends before its first pad), and checks every sample against CoMLRL's.
 */
async function collectTurns(trainer: IACTrainer | MAACTrainer, ref: any, tokenizer: ComlrlTokenizer): Promise<ActorCriticSample[]> {
  const c = ref.config;
  expect(trainer.config.earlyTerminationThreshold).toBe(c.earlyTerminationThreshold);
  // The agents are the rollout's policies.
  trainer.agents.forEach((policy: RolloutPolicy, agent) => {
    // The turns each item played (an episode may end early): its rewards' turns.
    const queue = ref.items.flatMap((_: unknown, item: number) => ref.rewards[item].map((_: unknown, turn: number) => ({ item, turn })));
    policy.sample = async (prompts, k) => {
      expect(k).toBe(1);
      const { item, turn } = queue.shift()!;
      const u = turnUpdate(ref, agent, turn);
      const at = u.itemIndices.indexOf(item);
      expect(prompts, `agent ${agent} item ${item} turn ${turn + 1} prompt`).toEqual([u.prompts[at]]);
      const completion = Int32Array.from(u.rows[at].slice(0, u.responseLens[at]));
      const text = tokenizer.decode(completion, { skipSpecialTokens: true });
      expect(text).toBe(u.completions[at]);
      return { promptIds: [tokenizer.encode(prompts[0])], completionIds: [[completion]], texts: [[text]] };
    };
  });
  const samples = await trainer.collect(ref.items);
  expect(samples).toHaveLength(2 * ref.rewards.flat().length);
  for (const s of samples) {
    const u = turnUpdate(ref, s.agent, s.turn);
    const at = u.itemIndices.indexOf(s.itemIndex);
    const where = `agent ${s.agent} item ${s.itemIndex} turn ${s.turn + 1}`;
    expect(s.promptIds, `${where} prompt ids`).toEqual(u.promptIds[at]);
    if (u.criticIds) expect(s.critic.prompt, `${where} joint critic ids`).toEqual(u.criticIds[at]);
    expect(Math.abs(s.oldValue - u.oldValues[at]), `${where} old value`).toBeLessThanOrEqual(VALUE_ATOL);
    expect(Math.abs(s.target - u.targets[at]), `${where} target`).toBeLessThanOrEqual(VALUE_ATOL);
    expect(s.return, `${where} logged return`).toBeCloseTo(u.returns[at], 12);
  }
  return samples;
}

/** Updates on the samples and checks each agent's turn steps (components perStep(agent)) in CoMLRL's order of updates. */
async function expectTurnSteps(trainer: IACTrainer | MAACTrainer, samples: ActorCriticSample[], ref: any, perStep: (agent: number) => string[]): Promise<void> {
  const records = recordUpdates(trainer);
  await trainer.update(samples);
  expect(records.map(([component]) => component)).toEqual((ref.updates as any[]).flatMap(({ agent }) => perStep(agent)));
  (ref.updates as any[]).forEach((u, n) => {
    const { agent, turn } = u;
    const steps = records.slice(n * perStep(agent).length, (n + 1) * perStep(agent).length);
    steps.forEach(([component, update], k) => expectClose(update.loss, u.backwardLosses[k], LOSS_RTOL, `turn ${turn + 1} ${component} loss`));
    expectClose(steps[0][1].gradNorm, u.actorGradNorm, LOSS_RTOL, `agent ${agent} turn ${turn + 1} actor gradient norm`);
    if (u.criticGradNorm !== null) expectClose(steps[1][1].gradNorm, u.criticGradNorm, LOSS_RTOL, `agent ${agent} turn ${turn + 1} critic gradient norm`);
  });
}

describe.each(Object.entries<any>(golden.iac_multi_turn))("CoMLRL 1.4.3 parity: multi-turn IAC %s", (_, ref) => {
  it("turn prompts, old values, targets, returns, losses and parameters after the update", async () => {
    const c = ref.config;
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const options = multiTurnOptions(ref, tokenizer);
    const trainer = await IACTrainer.create({
      ...options,
      critics: c.useSeparateCritic ? [COMLRL_MODEL, COMLRL_MODEL] : null,
      config: { ...options.config, useSeparateCritic: c.useSeparateCritic, valueHeadHiddenDim: c.valueHeadHiddenDim, criticValueHeadHiddenDim: c.criticValueHeadHiddenDim },
    });
    try {
      const heads = trainer.agents.map((agent, i) => (c.useSeparateCritic ? trainer.critics[i].valueHead : agent.valueHead!));
      heads.forEach((head, i) => head.loadStateDict(goldenStateDict(`${ref.tensorPrefix}.head_init.${i}`)));
      const samples = await collectTurns(trainer, ref, tokenizer);
      await expectTurnSteps(trainer, samples, ref, (agent) => (c.useSeparateCritic ? [`agent_${agent}`, `agent_${agent}/critic`] : [`agent_${agent}`]));
      expectIacAfter(trainer, heads, ref.tensorPrefix);
    } finally {
      await trainer.close();
    }
  });
});

describe.each(Object.entries<any>(golden.maac_multi_turn))("CoMLRL 1.4.3 parity: multi-turn MAAC (%s critic)", (_, ref) => {
  it("turn prompts, joint critic ids, old values, targets, returns, losses and parameters after the update", async () => {
    const name = ref.tensorPrefix;
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const trainer = await MAACTrainer.create({ ...multiTurnOptions(ref, tokenizer), critics: [COMLRL_MODEL] });
    try {
      const head = trainer.critics[0].valueHead;
      head.loadStateDict(goldenStateDict(`${name}.head_init`));
      const samples = await collectTurns(trainer, ref, tokenizer);
      await expectTurnSteps(trainer, samples, ref, (agent) => [`agent_${agent}`, "critic"]);
      expectMaacAfter(trainer, name);
    } finally {
      await trainer.close();
    }
  });
});
