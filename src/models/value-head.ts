// ValueHead: a critic's value head (or a reward model's score head) on a CausalLM's last hidden state, with what is
// computed over the two together — readouts, reward scores, the value, actor-critic and Bradley–Terry losses — and
// PyTorch state_dict I/O (value_head.pt files as torch.save writes them, under the keys of CoMLRL's
// comlrl.models.actor_critic.ValueHead so that files interchange with it both ways).
import type { NativeValueHead, NativeValueHeadInfo, Readout } from "../native/binding.js";
import { addon } from "../native/loader.js";
import { loadTorchStateDict, saveTorchStateDict, type StateTensor } from "../io/torch-pickle.js";
import { completionBatch, type CausalLM, type RouterAuxLoss, type Scores, type TokenBatch, type TokenRows } from "./causal-lm.js";

export type { NativeValueHeadInfo as ValueHeadInfo, Readout };

/** The form of a new ValueHead. */
export interface ValueHeadOptions {
  /** null (default): Linear(H, 1); d: Linear(H, d) → Tanh → Linear(d, 1). */
  hiddenDim?: number | null;
  /** Seed of the initial weights, N(0, 0.02) with zero biases (default 0). */
  seed?: number;
}

/** What a value loss is computed against. */
export interface ValueLossOptions {
  /** Where the values are read: "v" (last prompt token), "q" (last completion token), or every position. */
  readout: Readout;
  /** One target per readout value. */
  targets: ArrayLike<number>;
  /** With clipRange: PPO's clipped value loss around these values. */
  oldValues?: ArrayLike<number>;
  /** PPO value clipping: V_old + clip(V − V_old, ±clipRange) (needs oldValues). */
  clipRange?: number;
  /** Weights the accumulated gradient (not the returned loss). */
  scale?: number;
}

export interface ActorCriticOptions extends ValueLossOptions {
  /** One per row: the policy-gradient weights, as in CausalLM.policyGradientBackward. */
  advantages: ArrayLike<number>;
  valueLossCoef: number;
}

export interface PreferencePairs {
  /** Row indices into the batch: pair i prefers row chosen[i] to row rejected[i]. */
  chosen: ArrayLike<number>;
  rejected: ArrayLike<number>;
  /** false: the loss and scores only, no gradients (default true). */
  backward?: boolean;
}

function valueLossInput(options: ValueLossOptions) {
  return {
    readout: options.readout,
    targets: Float32Array.from(options.targets),
    oldValues: options.oldValues === undefined ? undefined : Float32Array.from(options.oldValues),
    clipRange: options.clipRange,
    scale: options.scale,
  };
}

// The native head names its parameters as a bare nn.Linear / nn.Sequential would ("weight", "0.weight", "2.weight");
// CoMLRL's ValueHead module holds them as pre_projection = Sequential(Linear, Tanh) and value_projection = Linear.
const COMLRL_KEY_PREFIXES: Record<string, string> = { "0.": "pre_projection.0.", "2.": "value_projection." };

function comlrlKey(native: string): string {
  const prefix = Object.keys(COMLRL_KEY_PREFIXES).find((p) => native.startsWith(p));
  return prefix ? COMLRL_KEY_PREFIXES[prefix] + native.slice(prefix.length) : `value_projection.${native}`;
}

// Files of earlier versions (bare keys) still load; the first one a process reads says so, once.
let warnedOldKeys = false;

/** A value (or reward) head on a CausalLM's last hidden state — Linear(H, 1), or Linear(H, d) → Tanh → Linear(d, 1) — with the readouts and losses computed over model and head together. */
export class ValueHead {
  private constructor(
    /**
     * The native head the methods call into: only src/models and src/native reach it (eslint.config.js).
     * @internal
     */
    readonly native: NativeValueHead,
    /** The model whose hidden states the head reads. */
    readonly model: CausalLM,
  ) {}

  /** A new head for model, in the model's dtype and on its device. */
  static create(model: CausalLM, options: ValueHeadOptions = {}): ValueHead {
    const { dtype, device } = model.info();
    const native = new (addon().NativeValueHead)({
      hiddenSize: model.config.hiddenSize,
      hiddenDim: options.hiddenDim ?? null,
      dtype,
      device,
      seed: options.seed ?? 0,
    });
    return new ValueHead(native, model);
  }

  /** Its shape, dtype and device. */
  info(): NativeValueHeadInfo {
    return this.native.info();
  }

  /**
   * Values without gradients: "v" one per row (the last prompt position, prompt alone), "q" one per row (the last
   * completion token), "positions" one per prompt + completion token, rows concatenated.
   */
  async readout(prompts: TokenRows, completions: TokenRows, readout: Readout): Promise<Float32Array> {
    return addon().values(this.model.native, this.native, { ...completionBatch(prompts, completions), readout });
  }

  /** The head on each row's last real token (left or right padding), without gradients: a reward model's scores. */
  async rewardScores(batch: TokenBatch): Promise<Float32Array> {
    return addon().rewardScores(this.model.native, this.native, batch);
  }

  /** Accumulates the value loss's gradient into the head and (unless frozen) the model; returns the unscaled loss. */
  async valueLossBackward(prompts: TokenRows, completions: TokenRows, options: ValueLossOptions): Promise<{
    /** The value loss (unscaled). */
    loss: number;
    /** The values read, one per readout position. */
    values: Float32Array;
  }> {
    return addon().valueLossBackward(this.model.native, this.native, { ...completionBatch(prompts, completions), ...valueLossInput(options) });
  }

  /**
   * The actor-critic loss of a model with its own head: policy-gradient loss + valueLossCoef · value loss from one
   * forward of prompt ⧺ completion, back-propagated once (scale weights the gradient; the losses returned are unscaled),
   * plus c · the router's auxiliary loss of that forward with the model's LoadOptions routerAuxLossCoef c.
   */
  async actorCriticBackward(
    prompts: TokenRows,
    completions: TokenRows,
    options: ActorCriticOptions,
  ): Promise<Scores & {
    /** The policy-gradient part. */
    policyLoss: number;
    /** The value part, before valueLossCoef. */
    valueLoss: number;
    /** policyLoss + valueLossCoef · valueLoss. */
    loss: number;
    /** The values read. */
    values: Float32Array;
  } & RouterAuxLoss> {
    return addon().actorCriticBackward(this.model.native, this.native, {
      ...completionBatch(prompts, completions),
      ...valueLossInput(options),
      advantages: Float32Array.from(options.advantages),
      valueLossCoef: options.valueLossCoef,
    });
  }

  /** Accumulates ∇ of mean −log σ(s_chosen − s_rejected) over the pairs into the head and (unless frozen) the model. */
  async bradleyTerryBackward(batch: TokenBatch & PreferencePairs): Promise<{
    /** mean −log σ(s_chosen − s_rejected). */
    loss: number;
    /** The score of every row of the batch. */
    scores: Float32Array;
  }> {
    return addon().bradleyTerryBackward(this.model.native, this.native, {
      ...batch,
      chosen: Int32Array.from(batch.chosen),
      rejected: Int32Array.from(batch.rejected),
      backward: batch.backward ?? true,
    });
  }

  /** Clears the head's accumulated gradients (on the head's lane, so the JS thread never waits on its lock). */
  zeroGrad(): Promise<void> {
    return this.native.zeroGrad();
  }

  /** No more gradients: optimizers skip the head from now on. */
  freeze(): void {
    this.native.freeze();
  }

  /** The head's parameters under CoMLRL's ValueHead keys (value_projection.*, pre_projection.0.*). */
  stateDict(): Record<string, StateTensor> {
    return Object.fromEntries(Object.entries(this.native.stateDict()).map(([name, tensor]) => [comlrlKey(name), tensor]));
  }

  /**
   * From a state dict or a value_head.pt file (torch.save of the head's state_dict): CoMLRL's keys, or the bare
   * Linear/Sequential keys earlier versions of this package wrote ("weight", "0.weight", …), which still load (a
   * process warning says so once). Names and shapes must match this head's (set by valueHeadHiddenDim /
   * criticValueHeadHiddenDim); otherwise the error names the file and both.
   */
  loadStateDict(dictOrPath: Record<string, StateTensor> | string): void {
    const where = typeof dictOrPath === "string" ? `${dictOrPath}: ` : "";
    const nativeNames = this.native.parameterNames();
    const byComlrlKey = new Map(nativeNames.map(({ name }) => [comlrlKey(name), name]));
    const entries = (list: Array<{ name: string; shape: number[] }>) => list.map(({ name, shape }) => `${name} [${shape.join(", ")}]`);
    let comlrlKeys = false as boolean;
    // The same names and shapes in any order: a state dict's key order is not part of the head. A file is checked
    // before its storages are read, so a hostile one cannot make us gather gigabytes first.
    const check = (saved: Array<{ name: string; shape: number[] }>) => {
      comlrlKeys = saved.some(({ name }) => byComlrlKey.has(name));
      const theirs = entries(saved);
      const ours = entries(nativeNames.map(({ name, shape }) => ({ name: comlrlKeys ? comlrlKey(name) : name, shape })));
      if ([...theirs].sort().join() !== [...ours].sort().join()) {
        throw new Error(`${where}the saved head has ${theirs.join(", ")}; this value head has ${ours.join(", ")} (its hidden size and hidden dim must match the saved head's)`);
      }
    };
    let given: Record<string, StateTensor>;
    if (typeof dictOrPath === "string") given = loadTorchStateDict(dictOrPath, check);
    else {
      given = dictOrPath;
      check(Object.entries(given).map(([name, t]) => ({ name, shape: t.shape })));
    }
    if (!comlrlKeys && !warnedOldKeys) {
      warnedOldKeys = true;
      process.emitWarning(`${where}a value head saved by an earlier version of this package, with bare Linear keys (${Object.keys(given).join(", ")}); loaded. Saving it again writes CoMLRL's keys (value_projection.*, pre_projection.0.*).`);
    }
    const dict = comlrlKeys ? Object.fromEntries(Object.entries(given).map(([key, t]) => [byComlrlKey.get(key) ?? key, t])) : given;
    try {
      this.native.loadStateDict(dict);
    } catch (error) {
      // From a file, the error names it; the native error stays as its cause.
      throw where ? new Error(`${where}${(error as Error).message}`, { cause: error }) : error;
    }
  }

  /** Writes the head as torch.save(head.state_dict()) would (readable by torch.load(weights_only=True)), atomically. */
  async save(file: string): Promise<void> {
    await saveTorchStateDict(file, this.stateDict());
  }

  /** Frees the native head now; it is unusable after. */
  dispose(): void {
    this.native.dispose();
  }

  /** dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
