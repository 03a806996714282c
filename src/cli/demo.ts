// The README's main job: two tiny LLM agents, made here from scratch, learn the cooperative "cover the vowels" task
// with MAGRPO on the CPU. Prints the reward curve as it trains, writes metrics.jsonl and reward.svg, saves both
// agents, and shows their completions before and after.
import { existsSync } from "node:fs";
import path from "node:path";
import { readJsonlMetrics } from "../logging/jsonl.js";
import { writeLineChartSvg } from "../logging/svg-plot.js";
import { runtimeInfo } from "../runtime.js";
import { createDemoBaseModel, demoTrainerOptions, type DemoOptions } from "../demo/recipes.js";
import { coverVowelsDataset, coverVowelsRewardFunc, SOLO_CEILING } from "../tasks/cover-vowels.js";
import { MAGRPOTrainer } from "../trainers/reinforce/magrpo.js";

const REWARD_KEY = "turn_1/reward_mean";

async function showSamples(trainer: MAGRPOTrainer, title: string): Promise<void> {
  const item = coverVowelsDataset(1)[0];
  const prompts = trainer.agents.map((_, agent) => [trainer.promptFor(agent, item)]);
  const [a, b] = await trainer.generate(prompts, 4);
  console.log(`\n${title} (4 samples per writer; reward of each pair):`);
  a[0].forEach((textA, k) => {
    const reward = (coverVowelsRewardFunc([[textA], [b[0][k]]], { itemIndex: 0, item, turn: 0, prompts: [], promptHistory: [], responseHistory: [] }) as number[])[0];
    console.log(`  A: ${JSON.stringify(textA).padEnd(24)} B: ${JSON.stringify(b[0][k]).padEnd(24)} reward ${reward.toFixed(2)}`);
  });
}

export async function runDemo(options: DemoOptions): Promise<void> {
  const info = runtimeInfo();
  console.log(`comlrl demo: MAGRPO, 2 agents, "cover the vowels" (one writer alone can reach at most ${SOLO_CEILING})`);
  console.log(`libtorch ${info.torchVersion}, ${info.numThreads} threads, ${info.blas}`);
  const baseDir = path.join(options.outputDir, "base-model");
  if (!existsSync(path.join(baseDir, "model.safetensors"))) {
    console.log(`creating a tiny Qwen2-style model and byte-level BPE tokenizer in ${baseDir}`);
  }
  const tokenizer = await createDemoBaseModel(baseDir, options.seed);
  const trainer = await MAGRPOTrainer.create(demoTrainerOptions(baseDir, tokenizer, options));
  try {
    await showSamples(trainer, "before training");
    const started = Date.now();
    await trainer.train();
    const seconds = (Date.now() - started) / 1000;

    const points = readJsonlMetrics(path.join(options.outputDir, "metrics.jsonl"))
      .filter((r) => r.kind === "train" && typeof r[REWARD_KEY] === "number")
      .map((r) => [r.step, r[REWARD_KEY] as number] as [number, number]);
    const window = Math.max(1, Math.floor(points.length / 20));
    const smoothed = points.map(([x], i) => {
      const slice = points.slice(Math.max(0, i - window + 1), i + 1);
      return [x, slice.reduce((s, [, y]) => s + y, 0) / slice.length] as [number, number];
    });
    const start = smoothed[Math.min(window, smoothed.length - 1)][1];
    const end = smoothed[smoothed.length - 1][1];
    const chart = path.join(options.outputDir, "reward.svg");
    await writeLineChartSvg(chart, [{ name: "shared reward (moving mean)", points: smoothed }, { name: "per update", points }], {
      title: "MAGRPO on cover-the-vowels",
      xLabel: "env steps (joint actions)",
      yLabel: "reward",
      yMin: 0,
      yMax: 1,
      references: [
        { y: SOLO_CEILING, label: "one writer alone" },
        { y: 0.8, label: "80% of max" },
      ],
    });
    await showSamples(trainer, "after training");
    const saved = path.join(options.outputDir, "agents");
    await trainer.saveModel(saved);
    console.log(`\nreward ${start.toFixed(2)} -> ${end.toFixed(2)} (max 1.0) in ${seconds.toFixed(0)} s, ${trainer.progress.envStep} env steps`);
    console.log(`metrics: ${path.join(options.outputDir, "metrics.jsonl")}\nplot:    ${chart}\nagents:  ${saved}/agent_0, ${saved}/agent_1`);
    console.log(end >= 0.8 ? "demo: the agents learned to split the vowels between them" : "demo: reward stayed below 0.8 of the maximum");
  } finally {
    await trainer.close();
  }
}
