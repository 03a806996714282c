// The reward-model stage of MARLHF and MARLHFIter (COMLRL-SPEC §6.3): a joint reward model and its optimizer,
// registered as reward_model (+ reward_model/head), trained with Bradley–Terry on the run's preference pairs for
// rewardNumTrainEpochs, with the last items' pairs held out to measure its pairwise accuracy. It runs inside its
// trainer's host, which counts and logs its steps; MARLHFIter puts a fresh model in place every iteration.
import { Optimizer } from "../../models/optimizer.js";
import { adamW } from "../options.js";
import type { ModelSource } from "../agents.js";
import type { ComponentSpec } from "../../components/registry.js";
import { causalLMModule, valueHeadModule } from "../../models/components.js";
import type { StageHost, TrainingStage } from "../lifecycle/stage-host.js";
import type { RewardModelPlace } from "../placement.js";
import type { PreferencePair, PreferencePairs } from "./pairs.js";
import { jointText, JointRewardModel } from "./reward-model.js";
import type { RlhfConfig } from "./base-config.js";
import { meanOrZero } from "../../util/mean.js";

/** What one Bradley–Terry step of the reward model logs. */
export interface RewardModelStepMetrics {
  /** mean −log σ(s_w − s_l) over the batch's pairs. */
  loss: number;
  /** Share of the batch's pairs the model ranked right before the step. */
  accuracy: number;
  /** The gradients' total norm before clipping. */
  gradNorm: number;
}

const texts = (pairs: readonly PreferencePair[], side: "winnerTexts" | "loserTexts") => pairs.map((p) => jointText(p.prompts, p[side]));

/** The reward model's backbone: rewardModelName, else the first actor's model id; null for an actor given as an object. */
export function rewardModelSource(config: Pick<RlhfConfig, "rewardModelName">, firstActor: ModelSource | undefined): string | null {
  return config.rewardModelName ?? (typeof firstActor === "string" ? firstActor : null);
}

export class RewardModelTraining {
  private current: { model: JointRewardModel; optimizer: Optimizer } | null = null;
  /** The current epoch's order of the training pairs. */
  private order: number[] = [];
  private readonly source: { source: string; device: string };

  constructor(
    private readonly host: StageHost,
    private readonly config: RlhfConfig,
    private readonly preferences: PreferencePairs,
    /** The first actor's source: the backbone unless rewardModelName is set. */
    firstActor: ModelSource,
    /** Where the placement plan puts the reward model, with the note of a device fallback. */
    placed: RewardModelPlace,
  ) {
    const source = rewardModelSource(config, firstActor);
    if (source === null) throw new TypeError("MARLHF: rewardModelName must be set when the actors are loaded model objects (there is no model id to load the reward model's backbone from)");
    if (placed.note !== null) host.console(placed.note);
    this.source = { source, device: placed.device };
  }

  get model(): JointRewardModel {
    if (!this.current) throw new Error("the reward model is not loaded yet");
    return this.current.model;
  }

  /** A fresh (untrained) reward model and its optimizer, put into the registry by `place` (register or replace). */
  async load(place: (spec: ComponentSpec) => unknown): Promise<void> {
    const c = this.config;
    const { source, device } = this.source;
    const rm = await JointRewardModel.load(source, { device, dtype: c.dtype, seed: c.seed, maxLength: c.rewardMaxLength, freezeBackbone: c.rewardFreezeBackbone });
    // CoMLRL trains its reward model in train mode; its later scoring computes no gradients, so no dropout acts there.
    rm.model.train();
    const optimizer = new Optimizer(c.rewardFreezeBackbone ? rm.head : [{ module: rm.model }, { module: rm.head }], adamW(c, c.rewardLearningRate));
    this.current = { model: rm, optimizer };
    await place({ name: "reward_model", module: causalLMModule(rm.model, rm.tokenizer), optimizer, ownsModule: true, exportDir: "reward_model" });
    await place({ name: "reward_model/head", module: valueHeadModule(rm.head), ownsModule: true, exportDir: "reward_model" });
  }

  /** Items held out of reward-model training: the last ⌊rewardHeldOutFraction × items with pairs⌋. */
  private get heldOutItems(): Set<number> {
    const items = [...new Set(this.preferences.pairs.map((p) => p.itemIndex))].sort((a, b) => a - b);
    const count = Math.floor(this.config.rewardHeldOutFraction * items.length);
    return new Set(count > 0 ? items.slice(-count) : []);
  }

  get trainingPairs(): PreferencePair[] {
    const held = this.heldOutItems;
    return this.preferences.pairs.filter((p) => !held.has(p.itemIndex));
  }

  get heldOutPairs(): PreferencePair[] {
    const held = this.heldOutItems;
    return this.preferences.pairs.filter((p) => held.has(p.itemIndex));
  }

  /** One Bradley–Terry step of the reward model on a batch of pairs. */
  async step(batch: PreferencePair[]): Promise<RewardModelStepMetrics> {
    const { model: rm, optimizer } = this.current!;
    let accuracy = Number.NaN;
    const update = await this.host.step({
      component: "reward_model",
      optimizer,
      samples: batch.length,
      zeroGrad: () => rm.zeroGrad(),
      backward: async () => {
        const out = await rm.bradleyTerryBackward(texts(batch, "winnerTexts"), texts(batch, "loserTexts"));
        accuracy = meanOrZero(Array.from(out.winnerScores, (s, i) => (s > out.loserScores[i] ? 1 : 0)));
        return out.loss;
      },
      subject: "reward model",
      batch: `a batch of ${batch.length} pairs`,
      maxGradNorm: this.config.maxGradNorm,
    });
    this.host.logger?.logTrain({ "reward_model/loss": update.loss, "reward_model/accuracy": accuracy }, this.host.progress.envStep);
    return { loss: update.loss, accuracy, gradNorm: update.gradNorm };
  }

  /**
   * rewardNumTrainEpochs over the training pairs in batches of rewardTrainBatchSize, each taken by `step` (the
   * trainer's public rewardModelStep), held-out accuracy after each epoch.
   */
  stage(step: (batch: PreferencePair[]) => Promise<RewardModelStepMetrics>): TrainingStage {
    const c = this.config;
    const trainingPairs = () => this.trainingPairs;
    let pairs: PreferencePair[] = [];
    return {
      name: "reward_model",
      epochs: c.rewardNumTrainEpochs,
      get steps() {
        return Math.ceil(trainingPairs().length / c.rewardTrainBatchSize);
      },
      // Drawn from the checkpointed generator, so a resumed epoch has the same order.
      beginEpoch: async () => {
        pairs = this.trainingPairs;
        this.order = this.host.random.shuffle(pairs.map((_, j) => j));
      },
      runStep: async (i) => {
        const batch = this.order.slice(i * c.rewardTrainBatchSize, (i + 1) * c.rewardTrainBatchSize).map((j) => pairs[j]);
        const metrics = await step(batch);
        return { "rm loss": metrics.loss };
      },
      endEpoch: async () => {
        const heldOut = this.heldOutPairs;
        if (heldOut.length === 0) return;
        const accuracy = await this.model.pairwiseAccuracy(texts(heldOut, "winnerTexts"), texts(heldOut, "loserTexts"));
        this.host.logger?.logTrain({ "reward_model/heldout_accuracy": accuracy, "reward_model/heldout_pairs": heldOut.length }, this.host.progress.envStep);
      },
    };
  }
}
