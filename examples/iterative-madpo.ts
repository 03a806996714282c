// Iterative MADPO on the demo's task ("cover the vowels"): every iteration the current agents sample candidates,
// compare each with a candidate of the comparator (here the agents themselves on their own sampling stream), and
// train joint DPO on the iteration's pairs, replayed with older iterations' shards weighted by (1−λ)λ^age.
//   npx tsx examples/iterative-madpo.ts [--model DIR] [--epochs 3]   (--epochs: iterations)
import { MADPOIterTrainer } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("cover-vowels", "iterative-madpo", { epochs: 3 });
const trainer = await MADPOIterTrainer.create({
  ...inputs,
  config: {
    numIterations: args.epochs,
    comparatorPolicy: "current",
    preferenceNumCandidates: 8,
    preferencePairsPerSample: 4,
    preferenceReplayMode: "lambda_decay",
    preferenceReplayLambda: 0.5,
    maxNewTokens: 4,
    temperature: 1,
    topP: 1,
    agentLearningRate: 5e-3,
    evalInterval: 0,
  },
});
await trainer.train({ checkpointDir: `${args.out}/checkpoints` });
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
