// The baseline the batched policy loss has to beat: MAGRPO scoring one completion per forward and backward, as
// CoMLRL does. The bench suite times a demo epoch under it and under the batched loss (trainer/demo/perCompletion).
import type { MAGRPOConfig } from "../config/index.js";
import type { TokenRows } from "../models/causal-lm.js";
import type { RolloutEnvironment } from "../rollout/tree.js";
import type { Agent } from "../trainers/agents.js";
import type { StageHost } from "../trainers/lifecycle/stage-host.js";
import { PolicyLoss, type PolicyLossConfig } from "../trainers/policy-loss.js";
import { MAGRPOLearner, MAGRPOTrainer, type MAGRPOTrainerOptions } from "../trainers/reinforce/magrpo.js";

/** CoMLRL's loss, one completion per native call: as many backwards as rows, so no step inside them. */
class PerCompletionLoss extends PolicyLoss {
  override get oneBackward(): boolean {
    return false;
  }

  protected override async weightedLogprobBackward(agent: Agent, prompts: TokenRows, completions: Int32Array[], weights: number[]): Promise<number> {
    let loss = 0;
    for (let i = 0; i < completions.length; i++) loss += (await agent.model.policyGradientBackward([prompts[i]], [completions[i]], [weights[i]], 1)).loss;
    return loss;
  }
}

class PerCompletionLearner extends MAGRPOLearner {
  protected override createPolicyLoss(config: PolicyLossConfig): PolicyLoss {
    if (config.objectives.some((o) => o.lossType !== "comlrl")) throw new RangeError("the per-completion baseline scores CoMLRL's loss only (lossType \"comlrl\")");
    return new PerCompletionLoss(config);
  }
}

/** MAGRPOTrainer scoring one completion per forward and backward (create() as MAGRPOTrainer's). */
export class PerCompletionMAGRPOTrainer extends MAGRPOTrainer {
  protected static override get Learner(): new (config: MAGRPOConfig, agents: Agent[], options: MAGRPOTrainerOptions, environment: RolloutEnvironment, host: StageHost) => MAGRPOLearner {
    return PerCompletionLearner;
  }
}
