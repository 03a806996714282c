// The CoMLRL 1.4.3 goldens (tests/golden/comlrl, made by scripts/reference/make_comlrl_goldens.py) and the
// comparisons the comlrl*.test.ts files share.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect } from "vitest";
import type { StateTensor } from "../../src/io/torch-pickle.js";
import type { Item, TransitionInput } from "../../src/rollout/types.js";
import { readSafetensors, type FixtureTensor } from "../support/safetensors.js";

export const COMLRL_GOLDEN = path.resolve(__dirname, "comlrl");
export const COMLRL_MODEL = path.join(COMLRL_GOLDEN, "model");
export const golden = JSON.parse(readFileSync(path.join(COMLRL_GOLDEN, "goldens.json"), "utf8"));
export const goldenTensors: Map<string, FixtureTensor> = readSafetensors(path.join(COMLRL_GOLDEN, "goldens.safetensors"));

// Tolerances. Losses and gradient norms are fp32 sums of the same terms in another order: 1e-5 relative. Parameters:
// one AdamW step of lr 5e-6 moves each weight by ≈ 5e-6 (≈ lr · sign(g)); weights are ≈ 0.3, whose fp32 spacing is
// 3e-8, so 1e-7 absolute is a few ulps and 50× below one step: a wrong gradient sign anywhere shows.
export const LOSS_RTOL = 1e-5;
export const PARAM_ATOL = 1e-7;

export function expectClose(actual: number, expected: number, rtol: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(rtol * Math.max(1, Math.abs(expected)));
}

/** Largest |ours − theirs| over the parameters golden `prefix.<name>` records, but the elements `skip` names. */
export function maxParamDiff(getParameter: (name: string) => ArrayLike<number>, prefix: string, skip: (name: string, index: number) => boolean = () => false): { diff: number; count: number } {
  let diff = 0;
  let count = 0;
  for (const [key, tensor] of goldenTensors) {
    if (!key.startsWith(`${prefix}.`)) continue;
    const name = key.slice(prefix.length + 1);
    if (name === "lm_head.weight") continue; // tied to the embedding: the same tensor
    const ours = getParameter(name);
    expect(ours.length, name).toBe(tensor.data.length);
    for (let i = 0; i < ours.length; i++) if (!skip(name, i)) diff = Math.max(diff, Math.abs(ours[i] - tensor.data[i]));
    count++;
  }
  expect(count, `${prefix}: no parameters in the golden`).toBeGreaterThan(0);
  return { diff, count };
}

export const scratch = () => mkdtempSync(path.join(tmpdir(), "comlrl-golden-"));

/** The golden's tensors under `prefix.` as a state dict (fp32). */
export function goldenStateDict(prefix: string): Record<string, StateTensor> {
  const dict: Record<string, StateTensor> = {};
  for (const [key, t] of goldenTensors) {
    if (key.startsWith(`${prefix}.`)) dict[key.slice(prefix.length + 1)] = { dtype: "float32", shape: t.shape, data: new Uint8Array(Float32Array.from(t.data).buffer) };
  }
  return dict;
}


/** Every optimizer step the trainer records, as [component, update], in order. */
export function recordUpdates(trainer: object): Array<[string, { loss: number; gradNorm: number }]> {
  const records: Array<[string, { loss: number; gradNorm: number }]> = [];
  const record = (trainer as any).recordUpdate.bind(trainer);
  (trainer as any).recordUpdate = (component: string, update: { loss: number; gradNorm: number }) => (records.push([component, update]), record(component, update));
  return records;
}

/** The harness's multi-turn transition (mt_transition): the agent's last prompt, its own last response, the other's. */
export const harnessTransition = ({ agentCompletions, numAgents, promptHistoryPerAgent, responseHistoryPerAgent }: TransitionInput): string[] =>
  Array.from({ length: numAgents }, (_, i) => `${promptHistoryPerAgent[i].at(-1)} | ${responseHistoryPerAgent[i].at(-1)} | ${agentCompletions[1 - i]}`);

/** The harness's tagged formatters (tagged_formatter): "<i> prompt", in later turns the transition's prompt so tagged. */
export const taggedFormatters = [0, 1].map((i) => (item: Item) => `<${i}> ${item.prompt}`);
