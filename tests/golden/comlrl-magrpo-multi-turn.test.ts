// Multi-turn MAGRPO against the real CoMLRL 1.4.3 (tests/golden/comlrl, scripts/reference/make_comlrl_goldens.py):
// its own rollout (_train_step_returns) with K = 2 completions per node, the harness's external transition and tagged
// formatters, generate() replaced by given rows; a node's samples enter the agents' buffers in env-step order and an
// agent is updated, turn by turn, once its buffer is full. The cases: two items of two turns with a buffer of six
// (each agent's nodes: one update per turn after the second item), the formatters applied to the transition's
// prompts; the same with externalPromptPassthrough (CoMLRL's external_prompt_passthrough) using them as they are; the
// same with a buffer of two, which fills within an item; and one item of three turns with a buffer of two, where
// which nodes an update takes follows CoMLRL's depth-first numbering of env steps. We train one epoch on the same
// items with policies that return the same rows: every prompt, its ids, the completions, env steps, returns and
// advantages come from our rollout path, which samples each update takes from our buffers, and the losses, gradient
// norms and both agents' parameters after the epoch from our trainer.
//
// Token accounting: every row of a call has one width and ends in its EOS, so what CoMLRL scores (row[:-1]) is the
// completion without its EOS and no pad is scored or fed. Our policies return those tokens; the difference from our
// accounting (which scores EOS) is the one tests/golden/comlrl.test.ts shows.
import { describe, expect, it } from "vitest";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { advantages } from "../../src/rollout/advantages.js";
import type { RolloutPolicy } from "../../src/rollout/tree.js";
import type { NodeSample } from "../../src/rollout/types.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { COMLRL_MODEL, expectClose, golden, harnessTransition, LOSS_RTOL, maxParamDiff, PARAM_ATOL, recordUpdates, scratch, taggedFormatters } from "./comlrl-golden.js";

// The harness's magrpo_mt_reward: the joint texts' code points, summed modulo small numbers.
const code = (text: string) => Array.from(text).reduce((sum, ch) => sum + ch.codePointAt(0)!, 0);
const reward = ([first, second]: string[][]) => first.map((a, j) => (code(a) % 11) / 4 - (code(second[j]) % 7) / 8);

// CoMLRL computes the baseline advantages in fp32.
const ADVANTAGE_ATOL = 1e-6;

interface GenerateCall {
  prompt: string;
  promptIds: number[];
  rows: number[][];
  responseLens: number[];
  completions: string[];
}

/**
 * Each agent answers a prompt with the rows CoMLRL's agent was given for it. The prompts are looked up, not taken in
 * order: CoMLRL generates depth first, we generate a tree level by level (one call per level), so from three turns on
 * the orders differ. Every recorded call is answered once.
 */
function scriptPolicies(trainer: MAGRPOTrainer, calls: GenerateCall[][], tokenizer: ComlrlTokenizer): Array<Map<string, GenerateCall>> {
  const unanswered = calls.map((mine) => new Map(mine.map((call) => [call.prompt, call])));
  unanswered.forEach((byPrompt, agent) => expect(byPrompt.size, `agent ${agent}: one call per prompt`).toBe(calls[agent].length));
  trainer.agents.forEach((policy: RolloutPolicy, agent) => {
    policy.sample = async (prompts, k) => {
      const answered = prompts.map((prompt) => {
        const call = unanswered[agent].get(prompt);
        expect(call, `agent ${agent} prompted with ${JSON.stringify(prompt)}, which CoMLRL's agent was not (or not again)`).toBeDefined();
        unanswered[agent].delete(prompt);
        const completionIds = call!.rows.slice(0, k).map((row, g) => {
          expect(call!.responseLens[g], "the row ends in its EOS, unpadded").toBe(row.length - 1);
          return Int32Array.from(row.slice(0, -1));
        });
        const texts = completionIds.map((ids) => tokenizer.decode(ids, { skipSpecialTokens: true }));
        expect(texts).toEqual(call!.completions);
        return { promptIds: tokenizer.encode(prompt), completionIds, texts };
      });
      return { promptIds: answered.map((a) => a.promptIds), completionIds: answered.map((a) => a.completionIds), texts: answered.map((a) => a.texts) };
    };
  });
  return unanswered;
}

/** Our updates as CoMLRL makes them: per drain of the buffers, per agent, per turn (ascending). */
function turnUpdates(drains: NodeSample[][]): Array<{ agent: number; turn: number; samples: NodeSample[] }> {
  return drains.flatMap((drained) =>
    [0, 1].flatMap((agent) => {
      const mine = drained.filter((s) => s.agent === agent);
      return [...new Set(mine.map((s) => s.turn))].sort((a, b) => a - b).map((turn) => ({ agent, turn, samples: mine.filter((s) => s.turn === turn) }));
    }),
  );
}

describe.each(Object.entries<any>(golden.magrpo_multi_turn))("CoMLRL 1.4.3 parity: multi-turn MAGRPO (%s)", (_, ref) => {
  it("prompts, ids, completions, env steps, returns, advantages, the updates' samples, losses, gradient norms and parameters", async () => {
    const c = ref.config;
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const trainer = await MAGRPOTrainer.create({
      agents: [COMLRL_MODEL, COMLRL_MODEL], tokenizer, rewardFunc: reward, trainDataset: ref.items, quiet: true, outputDir: scratch(),
      externalTransition: harnessTransition, formatters: taggedFormatters,
      config: {
        numAgents: c.numAgents, numTurns: c.numTurns, numGenerations: c.numGenerations, rolloutBufferSize: c.rolloutBufferSize,
        trainBatchSize: c.trainBatchSize, earlyTerminationThreshold: c.earlyTerminationThreshold,
        externalPromptPassthrough: c.externalPromptPassthrough, numTrainEpochs: 1,
      },
    });
    try {
      const unanswered = scriptPolicies(trainer, ref.generateCalls, tokenizer);
      const drains: NodeSample[][] = [];
      // The drains are the learner's calls of its own update().
      const learner = trainer.learner;
      const update = learner.update.bind(learner);
      learner.update = (samples) => (drains.push([...samples]), update(samples));
      const records = recordUpdates(trainer);
      await trainer.train();
      unanswered.forEach((calls, agent) => expect([...calls.keys()], `agent ${agent}'s prompts never asked`).toEqual([]));

      // Which samples each update took: CoMLRL fills the buffers node by node and updates an agent once its buffer is full.
      const ours = turnUpdates(drains);
      const envSteps = (samples: { envStep: number }[]) => samples.map((s) => s.envStep).sort((a, b) => a - b);
      expect(ours.map((u) => ({ agent: u.agent, turn: u.turn, envSteps: envSteps(u.samples) }))).toEqual(
        (ref.updates as any[]).map((u) => ({ agent: u.agent, turn: u.turn, envSteps: envSteps(u.samples) })),
      );
      (ref.updates as any[]).forEach((u, n) => {
        for (const e of u.samples) {
          const where = `agent ${u.agent} env step ${e.envStep}`;
          const s = ours[n].samples.find((x) => x.envStep === e.envStep)!;
          expect(s.promptIds, `${where} prompt ids`).toEqual(e.promptIds);
          // CoMLRL's sample holds the generated rows; it scores each but its last token, the EOS.
          expect(s.completionIds.map((ids) => Array.from(ids)), `${where} completion ids`).toEqual(e.completionIds.map((row: number[]) => row.slice(0, -1)));
          s.returns.forEach((r, k) => expect(r, `${where} return ${k}`).toBeCloseTo(e.returns[k], 12));
          expect(s.nodeMeanReward, `${where} node mean reward`).toBeCloseTo(e.nodeMeanReward, 12);
          expect(s.nodeMeanReturn, `${where} node mean return`).toBeCloseTo(e.nodeMeanReturn, 12);
          advantages(s.returns, c.advantageMode, false).forEach((a, k) => expect(Math.abs(a - e.baselineAdvantages[k]), `${where} advantage ${k}`).toBeLessThanOrEqual(ADVANTAGE_ATOL));
        }
        const [component, step] = records[n];
        expect(component).toBe(`agent_${u.agent}`);
        expectClose(step.loss, u.loss, LOSS_RTOL, `agent ${u.agent} turn ${u.turn + 1} loss`);
        expectClose(step.gradNorm, u.gradNorm, LOSS_RTOL, `agent ${u.agent} turn ${u.turn + 1} gradient norm`);
      });
      expect(records).toHaveLength(ref.updates.length);
      trainer.agents.forEach((agent, a) => {
        const model = agent.model.native;
        expect(maxParamDiff((p) => model.getParameter(p), `${ref.tensorPrefix}.after.${a}`).diff, `agent ${a} parameters`).toBeLessThanOrEqual(PARAM_ATOL);
      });
    } finally {
      await trainer.close();
    }
  });
});
