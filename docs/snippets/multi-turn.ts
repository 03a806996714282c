import { MAGRPOTrainer, RewardProcessors, type ExternalTransition, type Formatter, type Item, type RewardFunction } from "../../src/index.js";

declare const items: Item[]; // e.g. { prompt: "a question", answer: "42" }

// One formatter per agent: the first turn's prompt. From turn 2 on the transition's prompt is passed in too.
const formatters: Formatter[] = [
  (item, external) => external ?? `Propose an answer: ${item.prompt}\n`,
  (item, external) => external ?? `Check the proposal to: ${item.prompt}\n`,
];

// The shared reward of every joint action j of a node: completions[agent][j]. Async rewards are awaited.
const reward: RewardFunction = (completions, context) =>
  completions[0].map((proposal, j) => (proposal.includes(String(context.item.answer)) && completions[1][j].includes("ok") ? 1 : 0));

// The environment between turns: each agent's next prompt from the branch so far.
const transition: ExternalTransition = ({ agentCompletions, item }) => [
  `Your proposal was: ${agentCompletions[0]}\nThe checker said: ${agentCompletions[1]}\nRevise: ${item.prompt}\n`,
  `The revised proposal follows; check it: ${item.prompt}\n`,
];

const trainer = await MAGRPOTrainer.create({
  agentModel: "Qwen/Qwen2.5-0.5B",
  numAgents: 2,
  rewardFunc: reward,
  rewardProcessor: RewardProcessors.clamp(0, 1),
  formatters,
  externalTransition: transition,
  trainDataset: items,
  config: { numTurns: 2, numGenerations: 4, jointMode: "aligned", earlyTerminationThreshold: 0.9 },
});
await trainer.train();
await trainer.close();
