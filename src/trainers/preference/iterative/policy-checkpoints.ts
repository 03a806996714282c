// Per-iteration policy checkpoints (COMLRL-SPEC §7.2): <dir>/initial/agent_i before iteration 0 and
// <dir>/iteration_KKKK/agent_i (zero-based) after each iteration, in Hugging Face layout with the tokenizer
// (centralized collaboration has agent_0 only). The history comparator loads them back. Which exist is trainer state,
// so that a resumed run compares with exactly the checkpoints its first part wrote.
import { existsSync } from "node:fs";
import path from "node:path";
import { CheckpointError } from "../../../checkpoint/checkpoint.js";
import type { Agent } from "../../agents.js";

export const INITIAL_CHECKPOINT = "initial";

export function iterationCheckpointName(iteration: number): string {
  return `iteration_${String(iteration).padStart(4, "0")}`;
}

export class PolicyCheckpoints {
  /** label → directory, in the order written. */
  private readonly written = new Map<string, string>();

  constructor(public dir: string) {}

  has(label: string): boolean {
    return this.written.has(label);
  }

  /** Records checkpoint `label` and, where `save` (the rank that writes files), saves the agents there. */
  async write(label: string, agents: readonly Agent[], save: boolean): Promise<string> {
    const dir = path.join(this.dir, label);
    if (save) for (const agent of agents) await agent.model.save(path.join(dir, `agent_${agent.index}`), { tokenizer: agent.tokenizer });
    this.written.set(label, path.resolve(dir));
    return dir;
  }

  /** What the history comparator uses at iteration k: iteration_{k−historyK}, else the nearest earlier one, else initial. */
  historyFor(iteration: number, historyK: number): string {
    for (let j = iteration - historyK; j >= 0; j--) {
      const label = iterationCheckpointName(j);
      if (this.written.has(label)) return label;
    }
    if (this.written.has(INITIAL_CHECKPOINT)) return INITIAL_CHECKPOINT;
    throw new Error(`history comparator: no policy checkpoint at or before iteration ${iteration - historyK} and no initial checkpoint under ${this.dir}`);
  }

  /** The agent directories of a checkpoint, each checked to exist. */
  agentDirs(label: string, agents: number): string[] {
    const dir = this.written.get(label);
    if (!dir) throw new Error(`no policy checkpoint "${label}" was written (known: ${[...this.written.keys()].join(", ") || "none"})`);
    return Array.from({ length: agents }, (_, i) => {
      const agentDir = path.join(dir, `agent_${i}`);
      if (!existsSync(path.join(agentDir, "config.json"))) throw new Error(`policy checkpoint ${agentDir} is missing or incomplete (no config.json)`);
      return agentDir;
    });
  }

  state(): Record<string, string> {
    return Object.fromEntries(this.written);
  }

  restore(state: Record<string, string>): void {
    this.written.clear();
    for (const [label, dir] of Object.entries(state)) {
      if (!existsSync(dir)) throw new CheckpointError(`policy checkpoint ${dir} (${label}) recorded by the checkpoint is missing`);
      this.written.set(label, dir);
    }
  }
}
