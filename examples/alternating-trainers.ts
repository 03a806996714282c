// A user-written system over two single-agent trainers (recursive self-improvement style): every round both
// trainers answer the same prompts through collect(), and training alternates between them through update().
//   npx tsx examples/alternating-trainers.ts [--model DIR_OR_ID] [--epochs 4]
import { MAGRPOTrainer, type NodeSample, type RewardFunction } from "../src/index.js";
import { dataFile, exampleArgs, readJsonl } from "./common.js";

const args = await exampleArgs("alternating-trainers", { epochs: 4 });
const items = readJsonl(dataFile("story-prompts.jsonl")).slice(0, args.items);
const lengthNear = (target: number): RewardFunction => (completions) => completions[0].map((c) => 1 - Math.min(1, Math.abs(c.length - target) / target));

const make = (name: string, target: number) =>
  MAGRPOTrainer.create({
    agentModel: args.model,
    numAgents: 1,
    rewardFunc: lengthNear(target),
    trainDataset: items,
    outputDir: `${args.out}/${name}`,
    quiet: true,
    config: { numAgents: 1, numTurns: 1, numGenerations: 4, maxNewTokens: 24, agentLearningRate: 1e-4 },
  });
const trainers = [await make("brief", 20), await make("verbose", 60)];
const pending: NodeSample[][] = [[], []];
for (let round = 0; round < args.epochs * items.length; round++) {
  const item = items[round % items.length];
  for (const [i, trainer] of trainers.entries()) pending[i].push(...(await trainer.collect([item], round)));
  const learner = round % 2; // alternate: even rounds train "brief", odd rounds "verbose"
  await trainers[learner].update(pending[learner].splice(0));
  if (round % items.length === items.length - 1) {
    const [brief, verbose] = await Promise.all(trainers.map((t) => t.generate([[String(item.prompt)]], 1)));
    console.log(`round ${round + 1}: brief ${brief[0][0][0].length} chars, verbose ${verbose[0][0][0].length} chars`);
  }
}
for (const trainer of trainers) await trainer.close();
