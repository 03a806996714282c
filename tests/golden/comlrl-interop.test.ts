// Files interchange with CoMLRL 1.4.3 both ways (issue 24, part 2). value_head.pt uses the keys of
// comlrl.models.actor_critic.ValueHead (value_projection.*, pre_projection.0.*): CoMLRL's own head files load in ours,
// and ours load with strict load_state_dict into a module laid out as that class (here Debian's torch 1.13; the real
// class checks the committed ours_* fixtures in scripts/reference/make_comlrl_goldens.py --check, which also continues
// training from ours_iac_save/, ours_maac_save/ and ours_marlhf_save/ in CoMLRL). CoMLRL's IAC, MAAC and MARLHF
// save_model dirs (comlrl_*_save/) continue training in ours. COMLRL_WRITE_OURS=1 rewrites the committed ours_*_save/.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadTorchStateDict, type StateTensor } from "../../src/io/torch-pickle.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { ValueHead } from "../../src/models/value-head.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { JointRewardModel } from "../../src/trainers/preference/reward-model.js";
import { runPython } from "../support/python.js";
import { readSafetensors } from "../support/safetensors.js";
import { COMLRL_GOLDEN, COMLRL_MODEL, expectClose, golden, goldenTensors, LOSS_RTOL, scratch } from "./comlrl-golden.js";

const FORMS = { linear: null, mlp: 8 } as const;
const KEYS = {
  linear: ["value_projection.bias", "value_projection.weight"],
  mlp: ["pre_projection.0.bias", "pre_projection.0.weight", "value_projection.bias", "value_projection.weight"],
};
const SHARED_HEADS = path.resolve(__dirname, "..", "..", "..", "shared", "golden", "heads");

// Copies the bytes first: a state tensor may view a larger (pooled) buffer.
const floats = (t: StateTensor) => Array.from(new Float32Array(Uint8Array.from(t.data).buffer));

/** Every key of a state dict and its values, in key order. */
function contents(dict: Record<string, StateTensor>): Array<[string, number[], number[]]> {
  return Object.keys(dict)
    .sort()
    .map((key) => [key, dict[key].shape, floats(dict[key])]);
}

function goldenHead(prefix: string): Array<[string, number[], number[]]> {
  return [...goldenTensors]
    .filter(([key]) => key.startsWith(`${prefix}.`))
    .map(([key, t]): [string, number[], number[]] => [key.slice(prefix.length + 1), t.shape, Array.from(Float32Array.from(t.data))])
    .sort(([a], [b]) => (a < b ? -1 : 1));
}

// CoMLRL's ValueHead (comlrl/models/actor_critic.py, 1.4.3) as a module layout: the strict load is the check.
const STRICT_LOAD = `
import json, sys, torch
from torch import nn
class ValueHead(nn.Module):
    def __init__(self, input_dim, hidden_dim=None):
        super().__init__()
        self.pre_projection = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.Tanh()) if hidden_dim else None
        self.value_projection = nn.Linear(hidden_dim or input_dim, 1)
head = ValueHead(16, int(sys.argv[2]) or None)
head.load_state_dict(torch.load(sys.argv[1], weights_only=True), strict=True)
print(json.dumps({k: v.flatten().tolist() for k, v in head.state_dict().items()}))
`;

describe("value_head.pt interchange with CoMLRL 1.4.3", () => {
  it.each(Object.keys(FORMS) as Array<keyof typeof FORMS>)("%s: CoMLRL's file loads in ours; ours loads strictly into CoMLRL's layout", async (form) => {
    const model = await CausalLM.fromDirectory(COMLRL_MODEL);
    const head = ValueHead.create(model, { hiddenDim: FORMS[form], seed: 1 });
    try {
      head.loadStateDict(path.join(COMLRL_GOLDEN, `comlrl_value_head_${form}.pt`));
      expect(contents(head.stateDict())).toEqual(goldenHead(`value_head.${form}`));
      const file = path.join(scratch(), "value_head.pt");
      await head.save(file);
      expect(Object.keys(loadTorchStateDict(file)).sort()).toEqual(KEYS[form]);
      const loaded = runPython(STRICT_LOAD, [file, String(FORMS[form] ?? 0)]);
      expect(Object.keys(loaded).sort()).toEqual(KEYS[form]);
      for (const [key, , values] of goldenHead(`value_head.${form}`)) expect(loaded[key]).toEqual(values);
      // The committed fixture the harness strict-loads into the real class is what we write today.
      expect(contents(loadTorchStateDict(path.join(COMLRL_GOLDEN, `ours_value_head_${form}.pt`)))).toEqual(contents(head.stateDict()));
    } finally {
      head.dispose();
      model.dispose();
    }
  });

  it("a head file with the bare keys earlier versions wrote still loads", async () => {
    const model = await CausalLM.fromDirectory(COMLRL_MODEL);
    const head = ValueHead.create(model, { hiddenDim: 8, seed: 1 });
    try {
      const comlrl = loadTorchStateDict(path.join(COMLRL_GOLDEN, "comlrl_value_head_mlp.pt"));
      const bare = { "0.weight": comlrl["pre_projection.0.weight"], "0.bias": comlrl["pre_projection.0.bias"], "2.weight": comlrl["value_projection.weight"], "2.bias": comlrl["value_projection.bias"] };
      head.loadStateDict(bare);
      expect(contents(head.stateDict())).toEqual(contents(comlrl));
      expect(() => head.loadStateDict({ ...comlrl, "value_projection.extra": comlrl["value_projection.bias"] })).toThrow(/the saved head has .*value_projection\.extra/);
    } finally {
      head.dispose();
      model.dispose();
    }
  });

  // The heads of the shared goldens were written by CoMLRL's ValueHead on the four reference models.
  const sharedModels = existsSync(SHARED_HEADS) ? readdirSync(SHARED_HEADS).filter((name) => existsSync(path.join(SHARED_HEADS, name, "comlrl_value_head_linear.pt"))) : [];
  it.skipIf(sharedModels.length === 0)("CoMLRL's head files of the shared goldens load with the weights they hold", async () => {
    for (const name of sharedModels) {
      const reference = readSafetensors(path.join(SHARED_HEADS, name, "heads.safetensors"));
      const model = await CausalLM.fromDirectory(path.join(SHARED_HEADS, "..", name));
      try {
        for (const [form, hiddenDim] of [["linear", null], ["mlp", 16]] as const) {
          const head = ValueHead.create(model, { hiddenDim, seed: 1 });
          head.loadStateDict(path.join(SHARED_HEADS, name, `comlrl_value_head_${form}.pt`));
          const ours = head.stateDict();
          const bare = (key: string) => key.replace("pre_projection.0.", "0.").replace("value_projection.", form === "mlp" ? "2." : "");
          for (const [key, t] of Object.entries(ours)) expect(floats(t), `${name} ${form} ${key}`).toEqual(Array.from(Float32Array.from(reference.get(`head.${form}.${bare(key)}`)!.data)));
          head.dispose();
        }
      } finally {
        model.dispose();
      }
    }
  });
});

describe("saveModel directories interchange with CoMLRL 1.4.3", () => {
  const config = { numAgents: 1, numTurns: 1, numGenerations: 2, rolloutBufferSize: 2, numTrainEpochs: 1, maxNewTokens: 3, evalInterval: 0 };
  const options = (agent: string, critic: string, tokenizer: ComlrlTokenizer) => ({
    agents: [agent], critics: [critic], tokenizer, numAgents: 1, rewardFunc: () => [0.5, 0.25], trainDataset: [{ prompt: "the red fox" }], quiet: true, outputDir: scratch(),
    config,
  });
  // One agent; every candidate a distinct task reward, so every item gives preference pairs.
  const marlhf = (agent: string) =>
    MARLHFTrainer.create({
      agents: [agent], numAgents: 1, rewardFunc: (c) => c[0].map((_, j) => j), trainDataset: [{ prompt: "the red fox" }, { prompt: "once upon a time" }], quiet: true, outputDir: scratch(),
      config: { ...config, preferenceNumCandidates: 2, rewardNumTrainEpochs: 1, rewardTrainBatchSize: 2 },
    });

  /** Saves with save into a scratch dir (or, with COMLRL_WRITE_OURS, the committed one) and checks it against the committed one. */
  async function expectCommittedLayout(name: string, save: (dir: string) => Promise<void>): Promise<string> {
    const committed = path.join(COMLRL_GOLDEN, name);
    const out = process.env.COMLRL_WRITE_OURS ? committed : scratch();
    await save(out);
    const files = (dir: string) => readdirSync(dir, { recursive: true }).map(String).sort();
    expect(files(out)).toEqual(files(committed));
    for (const file of files(out).filter((f) => f.endsWith("config.json"))) {
      expect(JSON.parse(readFileSync(path.join(out, file), "utf8")), file).toEqual(JSON.parse(readFileSync(path.join(committed, file), "utf8")));
    }
    return out;
  }

  it.each([
    ["IAC", "comlrl_iac_save", "", IACTrainer.create],
    ["MAAC", "comlrl_maac_save", "agent_0", MAACTrainer.create],
  ] as const)("CoMLRL's %s save_model dir (%s: the actor, critic/ with value_head.pt) continues training in ours", async (_, name, actorDir, create) => {
    const saved = path.join(COMLRL_GOLDEN, name);
    const tokenizer = await ComlrlTokenizer.fromDirectory(path.join(saved, actorDir));
    const trainer = await create(options(path.join(saved, actorDir), path.join(saved, "critic"), tokenizer));
    try {
      trainer.critics[0].valueHead.loadStateDict(path.join(saved, "critic", "value_head.pt"));
      expect(contents(trainer.critics[0].valueHead.stateDict())).toEqual(goldenHead(`${name}.head`));
      await trainer.train();
      expect(trainer.progress.envStep).toBe(2);
    } finally {
      await trainer.close();
    }
  });

  it("CoMLRL's MARLHF save_model dir (agent_0/ with its tokenizer) continues training in ours: pairs, reward model, RL", async () => {
    const trainer = await marlhf(path.join(COMLRL_GOLDEN, "comlrl_marlhf_save", "agent_0"));
    try {
      await trainer.train();
      expect(trainer.rewardModel.isFrozen).toBe(true);
      expect(trainer.progress.envStep).toBeGreaterThan(0);
    } finally {
      await trainer.close();
    }
  });

  it.each([
    ["IAC", "ours_iac_save", IACTrainer.create],
    ["MAAC", "ours_maac_save", MAACTrainer.create],
  ] as const)("our %s saveModel dir has CoMLRL's layout and keys (%s/ is what the harness continues in CoMLRL)", async (_, name, create) => {
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const trainer = await create(options(COMLRL_MODEL, COMLRL_MODEL, tokenizer));
    try {
      const out = await expectCommittedLayout(name, (dir) => trainer.saveModel(dir));
      expect(Object.keys(loadTorchStateDict(path.join(out, "critic", "value_head.pt"))).sort()).toEqual(KEYS.linear);
    } finally {
      await trainer.close();
    }
  });

  it("our MARLHF saveModel dir (agent_0/, reward_model/ with value_head.pt): CoMLRL's JointRewardModel scores texts with it as ours does", async () => {
    const trainer = await marlhf(COMLRL_MODEL);
    try {
      await trainer.train();
      await expectCommittedLayout("ours_marlhf_save", (dir) => trainer.saveModel(dir));
    } finally {
      await trainer.close();
    }
    // The harness loaded the committed reward model into CoMLRL's MARLHF (backbone from reward_model/, its Linear
    // reward_head from our value_head.pt) and scored these texts.
    const ref = golden.ours_marlhf_save;
    const rm = await JointRewardModel.load(path.join(COMLRL_GOLDEN, "ours_marlhf_save", "reward_model"));
    try {
      const scores = await rm.score(ref.texts);
      ref.scores.forEach((score: number, i: number) => expectClose(scores[i], score, LOSS_RTOL, `score of text ${i}`));
    } finally {
      rm.dispose();
    }
  });
});
