// MARLHF's RL phase as a plug (src/trainers/rl-back-end.ts): a trainer registered with an RL back-end becomes an
// rlAlgorithm whose learner MARLHF builds over its own actors, with nothing else to change.
import { describe, expect, it } from "vitest";
import { registerTrainer, trainerDefinition, type RLBackEnd, type RLPhaseSetUp } from "../../src/trainers/builtins.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { MAGRPOLearner } from "../../src/trainers/reinforce/magrpo.js";
import { makeBase } from "../support/checkpoint-run.js";
import { QUICK_PREFERENCE_RUN, tinyRuns } from "../support/runs.js";

const runs = tinyRuns("comlrl-rl-back-end-", makeBase);

describe("an RL back-end registered with a trainer", () => {
  const magrpo = trainerDefinition("magrpo");
  const setUps: RLPhaseSetUp[] = [];
  const recording: RLBackEnd = { ...magrpo.rlBackEnd!, learner: (setUp) => (setUps.push(setUp), magrpo.rlBackEnd!.learner(setUp)) };
  registerTrainer({ ...magrpo, section: "recorded_magrpo", configName: "RecordedConfig", rlBackEnd: recording });

  it("is MARLHF's RL phase when rlAlgorithm names it: its learner over MARLHF's actors, its config from MARLHF's values", async () => {
    const trainer = await MARLHFTrainer.create({
      ...runs.twoAgents(runs.coverVowels(2)),
      config: { ...QUICK_PREFERENCE_RUN, rlAlgorithm: "recorded_magrpo", numTrainEpochs: 1, numGenerations: 2, preferenceNumCandidates: 3, rewardTrainBatchSize: 2, rlNumIterations: 2, lossType: "grpo" },
    });
    try {
      expect(setUps).toHaveLength(1);
      expect(setUps[0].config.rlAlgorithm).toBe("recorded_magrpo");
      expect(setUps[0].actors.agents).toEqual(trainer.agents);
      expect(trainer.rl).toBeInstanceOf(MAGRPOLearner);
      // MARLHF's values reach the learner's own config by name (rlNumIterations as its numIterations).
      expect(trainer.rl.config).toMatchObject({ numGenerations: 2, numIterations: 2, lossType: "grpo", numAgents: 2, parallelTraining: "none" });
      expect(trainer.actorCritic).toBeNull();
      await trainer.train();
      expect(trainer.progress.epoch).toBe(1);
    } finally {
      await trainer.close();
    }
  });

  it("takes no critics when its back-end has none", async () => {
    await expect(MARLHFTrainer.create({ ...runs.twoAgents(runs.coverVowels(2)), criticModel: runs.base, config: { rlAlgorithm: "recorded_magrpo" } })).rejects.toThrow(
      /criticModel and critics are only used with rlAlgorithm "iac" or "maac" \(the RL phases with critics\)/,
    );
  });
});
