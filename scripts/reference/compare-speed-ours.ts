// Our side of the speed comparison with CoMLRL (compare_speed.py drives it; README "Against CoMLRL"). One process
// per run, like CoMLRL's side: `config` prints the resolved trainer config and the rendered prompts that the CoMLRL
// side must reproduce; `run` does a one-item warm-up epoch with a throwaway trainer, then times train() of one epoch
// and prints one JSON line. The configs are the bench suite's (src/bench/algorithms.ts) on the demo task. `learn`
// (compare_learning.py drives it) trains the configured epochs once and prints the task reward of each epoch's
// samples, recorded as compare_learning.py records CoMLRL's. `ceilings` measures the machine's fp32 matmul rate and
// read bandwidth (the bench suite's ceilings, src/bench/ceilings.ts), which the driver reads the phases against.
// `decode` times one agent's generate() of the first item's first prompt at 4, 8 and 16 rows (every row runs to
// maxNewTokens), with the config's sampling: what more rows per decode step would buy.
//
//   npx tsx scripts/reference/compare-speed-ours.ts make-demo-model DIR
//   npx tsx scripts/reference/compare-speed-ours.ts ceilings
//   npx tsx scripts/reference/compare-speed-ours.ts decode --model DIR --reward paragraphs [--overrides ...]
//   npx tsx scripts/reference/compare-speed-ours.ts config|run|learn --trainer magrpo --model DIR [--critic DIR]
//       [--items 16] [--overrides '{"maxNewTokens":8}'] [--reward vowels|digits|paragraphs]
// --reward paragraphs runs the paragraph-summary task (src/tasks/paragraph-summary.ts: its items, chat-templated
// formatters and reward) in place of the demo's; `config` then prints the items too, for the CoMLRL side to render.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { algorithmConfig } from "../../src/bench/algorithms.js";
import { measureCopyCeiling, measureMatmulCeiling } from "../../src/bench/ceilings.js";
import { iacConfig, maacConfig, madpoConfig, magrpoConfig, marlhfConfig } from "../../src/config/index.js";
import { createDemoBaseModel, demoTrainerOptions } from "../../src/demo/recipes.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { Formatter, Item, RewardContext, RewardFunction } from "../../src/rollout/types.js";
import { runtimeInfo } from "../../src/runtime.js";
import { getTask } from "../../src/tasks/registry.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import type { Trainer } from "../../src/trainers/lifecycle/trainer.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { JointRewardModel } from "../../src/trainers/preference/reward-model.js";
import type { TrainingStage } from "../../src/trainers/lifecycle/trainer.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const SEED = 7;

type Config = Record<string, unknown>;
type Built = Trainer & { progress: { envStep: number; update: number } };

interface Recipe {
  resolve: (config: Config) => object;
  create: (options: ReturnType<typeof demoTrainerOptions> & { tokenizer: ComlrlTokenizer }, config: Config, critic: string) => Promise<Built>;
}

// A separate critic is the given model (the demo's base model at demo size); useSeparateCritic false in the overrides
// puts value heads on the actors instead and passes no critic.
const critics = (config: Config, critic: string) => (config.useSeparateCritic === false ? {} : { criticModel: critic });

// Each trainer runs the bench suite's overrides of the demo's MAGRPO config under its name (src/bench/algorithms.ts).
const RECIPES: Record<Parameters<typeof algorithmConfig>[0], Recipe> = {
  magrpo: {
    resolve: (c) => magrpoConfig(c),
    create: (options, config) => MAGRPOTrainer.create({ ...options, config }),
  },
  iac: {
    resolve: (c) => iacConfig(c),
    create: (options, config, critic) => IACTrainer.create({ ...options, config, ...critics(config, critic) }),
  },
  maac: {
    resolve: (c) => maacConfig(c),
    create: (options, config, critic) => MAACTrainer.create({ ...options, config, criticModel: critic }),
  },
  madpo: {
    resolve: (c) => madpoConfig(c),
    create: (options, config) => MADPOTrainer.create({ ...options, config }),
  },
  marlhf: {
    resolve: (c) => marlhfConfig(c),
    create: (options, config) => MARLHFTrainer.create({ ...options, config }),
  },
};

// "digits": the mean digit value in the two completions over 9 (0 without digits). A random 0.5B model's text holds
// no vowels (its ids past the demo tokenizer decode to "<id>"), so its candidates all tie on cover-the-vowels; this
// reward is continuous, so they practically never tie.
function meanDigit(text: string): number {
  const digits = (text.match(/[0-9]/g) ?? []).map(Number);
  return digits.length ? digits.reduce((a, b) => a + b, 0) / (9 * digits.length) : 0;
}
const digitsReward: RewardFunction = (completions) => completions[0].map((a, j) => meanDigit(a + completions[1][j]));

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    trainer: { type: "string", default: "magrpo" },
    model: { type: "string" },
    critic: { type: "string" },
    items: { type: "string", default: "16" },
    overrides: { type: "string", default: "{}" },
    reward: { type: "string", default: "vowels" },
  },
});

const chatTemplate = (tokenizer: ComlrlTokenizer) => (messages: { role: string; content: string }[]) =>
  tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });

function taskFor(model: string, tokenizer: ComlrlTokenizer, items: number, outputDir: string) {
  const name = values.trainer as keyof typeof RECIPES;
  const recipe = RECIPES[name];
  if (!recipe) throw new Error(`--trainer: ${values.trainer} is not one of ${Object.keys(RECIPES).join(", ")}`);
  const { config: demo, sampleLogInterval: _samples, ...task } = demoTrainerOptions(model, tokenizer, { outputDir, epochs: 1, seed: SEED, quiet: true, items });
  const config = { ...algorithmConfig(name, demo as Config), ...(JSON.parse(values.overrides!) as Config) };
  if (values.reward === "paragraphs") {
    const paragraphs = getTask("paragraph-summary", { chatTemplate: chatTemplate(tokenizer) });
    const trainDataset: Item[] = paragraphs.dataset({ limit: items });
    if (trainDataset.length < items) throw new Error(`--items: the paragraph-summary task has ${trainDataset.length} training items, asked for ${items}`);
    return { recipe, options: { ...task, trainDataset, formatters: paragraphs.formatters, rewardFunc: paragraphs.rewardFunc, tokenizer }, config };
  }
  if (values.reward !== "vowels" && values.reward !== "digits") throw new Error(`--reward: ${values.reward} is not vowels, digits or paragraphs`);
  const rewardFunc = values.reward === "digits" ? digitsReward : task.rewardFunc;
  return { recipe, options: { ...task, rewardFunc, tokenizer }, config };
}

/** The process's CPU seconds (user + system, every thread) since `start`: on a machine others load, steadier than wall time. */
function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

/**
 * Counts what generate() does until `stop` is called: calls, rows, prompt tokens (each prompt once: its K rows share
 * one prefill), completion tokens, and weight passes (a call's prefill and decode steps: its longest completion).
 */
function countGeneration() {
  const counts = { calls: 0, rows: 0, promptTokens: 0, completionTokens: 0, weightPasses: 0 };
  const generate = CausalLM.prototype.generate;
  CausalLM.prototype.generate = async function (this: CausalLM, prompts, options) {
    const out = await generate.call(this, prompts, options);
    counts.calls += 1;
    counts.rows += out.completions.length;
    counts.promptTokens += prompts.reduce((n, p) => n + p.length, 0);
    counts.completionTokens += out.completions.reduce((n, c) => n + c.length, 0);
    counts.weightPasses += Math.max(...out.completions.map((c) => c.length));
    return out;
  };
  return { counts, stop: () => (CausalLM.prototype.generate = generate) };
}

async function epoch(model: string, tokenizer: ComlrlTokenizer, items: number, scratch: string, run: string) {
  const { recipe, options, config } = taskFor(model, tokenizer, items, path.join(scratch, run));
  const trainer = await recipe.create(options, config, values.critic ?? model);
  const generation = countGeneration();
  try {
    const clock = performance.now();
    const cpu = process.cpuUsage();
    const faults = process.resourceUsage().minorPageFault;
    await trainer.train();
    const seconds = (performance.now() - clock) / 1000;
    const cpuSeconds = cpuSecondsSince(cpu);
    // Pages touched for the first time during the epoch: a fresh trainer's optimizer moments and first activations,
    // and memory the allocators handed back to the system and took again.
    const minorPageFaults = process.resourceUsage().minorPageFault - faults;
    // "stage/phase" seconds (stage/seconds: the stage in all), as the bench reports them.
    const timings = Object.fromEntries(
      Object.entries(trainer.timings.stages).flatMap(([stage, time]) => Object.entries(time).map(([phase, value]) => [`${stage}/${phase}`, value])),
    );
    // "stage/phase" peak resident MiB of this epoch's phases (the process's peak is the driver's to read).
    const memory = Object.fromEntries(
      Object.keys(trainer.timings.stages).flatMap((stage) => Object.entries(trainer.timings.memory?.of(stage) ?? {}).map(([phase, m]) => [`${stage}/${phase}`, m.peakRssBytes / 2 ** 20])),
    );
    return { seconds, cpuSeconds, minorPageFaults, envSteps: trainer.progress.envStep, updates: trainer.progress.update, timings, memoryMiB: memory, generation: generation.counts };
  } finally {
    generation.stop();
    await trainer.close();
  }
}

/**
 * Trains the configured epochs and returns the task reward per epoch, as compare_learning.py's CoMLRL side records
 * it: rewards[e] for epoch e (1-based; [0]: before the first epoch, MADPO's and MARLHF's pair collection) of the
 * training rollouts (MAGRPO, IAC, MAAC), of MARLHF's RL rollouts (the task reward beside the reward model's score on
 * the same completions), and MADPO's evaluate() before the first epoch and after each.
 */
async function learn(model: string, tokenizer: ComlrlTokenizer, items: number, scratch: string) {
  const { recipe, options, config } = taskFor(model, tokenizer, items, path.join(scratch, "learn"));
  const name = values.trainer!;
  const epochs = Number(config.numTrainEpochs);
  const rewards: number[][] = Array.from({ length: epochs + 1 }, () => []);
  const evaluations: number[] = [];
  const task = options.rewardFunc;
  const taskReward = async (completions: string[][], context: RewardContext) => {
    const value = await task(completions, context);
    return typeof value === "number" ? [value] : value;
  };
  const offline = name === "madpo" || name === "marlhf";
  // The trainer's epoch, read by the reward hooks once the trainer exists.
  const built: { trainer?: Built } = {};
  const epochNow = () => built.trainer!.progress.epoch + 1;
  const rewardFunc: RewardFunction = async (completions, context) => {
    const value = await taskReward(completions, context);
    rewards[offline ? 0 : epochNow()].push(...value);
    return value;
  };
  const scoreJoint = JointRewardModel.prototype.scoreJoint;
  if (name === "marlhf") {
    JointRewardModel.prototype.scoreJoint = async function (prompts, completions) {
      rewards[epochNow()].push(...(await taskReward(completions.map((c) => [...c]), { prompts: [...prompts] } as RewardContext)));
      return scoreJoint.call(this, prompts, completions);
    };
  }
  const extra = name === "madpo" ? { evalDataset: options.trainDataset } : {};
  const trainer = await recipe.create({ ...options, ...extra, rewardFunc }, config, values.critic ?? model);
  built.trainer = trainer;
  const evaluate = async () => {
    evaluations.push((await (trainer as unknown as MADPOTrainer).evaluate(items))["eval/turn_1/reward_mean"]);
  };
  if (name === "madpo") {
    const withStages = trainer as unknown as { stages: () => TrainingStage[] };
    const stages = withStages.stages.bind(trainer);
    withStages.stages = () => {
      const made = stages();
      const dpo = made.find((s) => s.name === "dpo")!;
      const begin = dpo.beginEpoch;
      dpo.beginEpoch = async () => {
        await evaluate();
        await begin?.();
      };
      return made;
    };
  }
  try {
    const clock = performance.now();
    await trainer.train();
    if (name === "madpo") await evaluate();
    return { seconds: (performance.now() - clock) / 1000, rewards, evaluations };
  } finally {
    JointRewardModel.prototype.scoreJoint = scoreJoint;
    await trainer.close();
  }
}

async function main(): Promise<void> {
  const [command, dir] = positionals;
  if (command === "make-demo-model") {
    if (!dir) throw new Error("make-demo-model: give the directory to write");
    await createDemoBaseModel(dir, SEED);
    return;
  }
  if (command === "ceilings") {
    const matmul = await measureMatmulCeiling({ kind: "matmul", id: "ceiling/matmul/fp32", dtype: "fp32", repeats: 3, iterationSeconds: 1, repeatSeconds: 1.5 }, "cpu");
    const copy = await measureCopyCeiling({ kind: "copy", id: "ceiling/copy", bytes: 256 * 2 ** 20, iterations: 5, repeats: 3 }, "cpu");
    console.log(JSON.stringify({ threads: runtimeInfo().numThreads, matmulGflops: Math.max(...matmul.samples.gflops), readGbps: Math.max(...copy.samples.readGbps) }));
    return;
  }
  if (!values.model) throw new Error("--model: the model directory both sides load");
  const model = values.model;
  const tokenizer = await ComlrlTokenizer.fromDirectory(model);
  const items = Number(values.items);
  if (command === "config") {
    const { recipe, options, config } = taskFor(model, tokenizer, items, "unused");
    const formatters = ([] as Formatter[]).concat(options.formatters ?? []);
    const prompts = formatters.map((format) => options.trainDataset.map((item) => format(item)));
    const promptIds = prompts.map((agent) => agent.map((p) => tokenizer.encode(p)));
    // The reward on pairs cut from the items (a sentence, the whole paragraph, a truncated one, none, non-ASCII), for
    // the CoMLRL side to check its copy of the reward against.
    const texts = options.trainDataset.flatMap((item) => {
      const text = String(item.prompt);
      return [text.split(". ")[0] + ".", text, text.slice(0, 57), "", `Café — ${text.slice(0, 30)} naïve.`];
    });
    const probe = { summaries: texts, accounts: [...texts.slice(1), texts[0]] };
    const rewardProbe = { ...probe, rewards: await options.rewardFunc([probe.summaries, probe.accounts], { itemIndex: 0, item: {}, turn: 0, prompts: [], promptHistory: [], responseHistory: [] }) };
    console.log(JSON.stringify({ config: recipe.resolve(config), items: options.trainDataset, prompts, promptIds, rewardProbe }));
    return;
  }
  if (command === "decode") {
    const { options, config } = taskFor(model, tokenizer, 1, "unused");
    const agent = await CausalLM.load(model);
    const prompt = tokenizer.encode((options.formatters as Formatter[])[0](options.trainDataset[0]));
    const steps = Number(config.maxNewTokens);
    const sample = (rows: number) =>
      agent.generate([prompt], { maxNewTokens: steps, numReturnSequences: rows, doSample: true, temperature: Number(config.temperature), topP: Number(config.topP), topK: Number(config.topK), eosTokenIds: [] });
    const timings = [];
    for (const rows of [4, 8, 16]) {
      await sample(rows);
      const clock = performance.now();
      const cpu = process.cpuUsage();
      await sample(rows);
      timings.push({ rows, steps, seconds: (performance.now() - clock) / 1000, cpuSeconds: cpuSecondsSince(cpu) });
    }
    console.log(JSON.stringify({ threads: runtimeInfo().numThreads, timings }));
    return;
  }
  if (command === "learn") {
    const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-learncmp-"));
    try {
      console.log(JSON.stringify({ side: "ours", trainer: values.trainer, items, threads: runtimeInfo().numThreads, ...(await learn(model, tokenizer, items, scratch)) }));
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    return;
  }
  if (command !== "run") throw new Error(`unknown command ${command}: make-demo-model, config, run or learn`);
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-speedcmp-"));
  try {
    await epoch(model, tokenizer, 1, scratch, "warm-up");
    const timed = await epoch(model, tokenizer, items, scratch, "timed");
    console.log(JSON.stringify({ side: "ours", trainer: values.trainer, items, threads: runtimeInfo().numThreads, ...timed }));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
