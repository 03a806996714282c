// Two agents, one shared reward: agent 0 writes a brief summary, agent 1 a detailed one, and the pair is rewarded
// when the detailed text is 2–3× as long as the brief one.
//   COMLRL_MODEL=Qwen/Qwen2.5-0.5B npx tsx examples/quickstart.ts   (a hub id or a local Hugging Face directory)
import { MAGRPOTrainer, type RewardFunction } from "../src/index.js";

const model = process.env.COMLRL_MODEL ?? "Qwen/Qwen2.5-0.5B";
const items = ["the cat sat on the mat", "rain is expected tomorrow", "the shop opens at nine"].map((prompt) => ({ prompt }));
const lengthRatio: RewardFunction = ([brief, detailed]) =>
  brief.map((b, j) => (detailed[j].length >= 2 * b.length && detailed[j].length <= 3 * b.length ? 1 : 0));

const trainer = await MAGRPOTrainer.create({
  agentModel: model,
  numAgents: 2,
  rewardFunc: lengthRatio,
  formatters: [(item) => `Summarise briefly: ${item.prompt}\n`, (item) => `Explain in detail: ${item.prompt}\n`],
  trainDataset: items,
  outputDir: "runs/quickstart",
  config: { numTurns: 1, numTrainEpochs: 2, numGenerations: 4, maxNewTokens: 48, agentLearningRate: 5e-5 },
});
await trainer.train();
await trainer.saveModel("runs/quickstart/agents"); // agent_0/ and agent_1/ in Hugging Face layout
await trainer.close();
