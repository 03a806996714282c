// Files interchange with CoMLRL 1.4.3 both ways (issue 24, part 2). value_head.pt uses the keys of
// comlrl.models.actor_critic.ValueHead (value_projection.*, pre_projection.0.*): CoMLRL's own head files load in ours,
// and ours load with strict load_state_dict into a module laid out as that class (here Debian's torch 1.13; the real
// class checks the committed ours_* fixtures in scripts/reference/make_comlrl_goldens.py --check, which also continues
// training from ours_iac_save/ in CoMLRL). CoMLRL's IAC save_model dir (comlrl_iac_save/) continues training in ours.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadTorchStateDict, type StateTensor } from "../../src/io/torch-pickle.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { ValueHead } from "../../src/models/value-head.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { runPython } from "../support/python.js";
import { readSafetensors } from "../support/safetensors.js";
import { COMLRL_GOLDEN, COMLRL_MODEL, goldenTensors, scratch } from "./comlrl-golden.js";

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
  const options = (agent: string, critic: string, tokenizer: ComlrlTokenizer) => ({
    agents: [agent], critics: [critic], tokenizer, numAgents: 1, rewardFunc: () => [0.5, 0.25], trainDataset: [{ prompt: "the red fox" }], quiet: true, outputDir: scratch(),
    config: { numAgents: 1, numTurns: 1, numGenerations: 2, rolloutBufferSize: 2, numTrainEpochs: 1, maxNewTokens: 3, evalInterval: 0 },
  });

  it("CoMLRL's IAC save_model dir (actor, critic/ with value_head.pt) continues training in ours", async () => {
    const saved = path.join(COMLRL_GOLDEN, "comlrl_iac_save");
    const tokenizer = await ComlrlTokenizer.fromDirectory(saved);
    const trainer = await IACTrainer.create(options(saved, path.join(saved, "critic"), tokenizer));
    try {
      trainer.critics[0].valueHead.loadStateDict(path.join(saved, "critic", "value_head.pt"));
      expect(contents(trainer.critics[0].valueHead.stateDict())).toEqual(goldenHead("comlrl_iac_save.head"));
      await trainer.train();
      expect(trainer.progress.envStep).toBe(2);
    } finally {
      await trainer.close();
    }
  });

  it("our IAC saveModel dir has CoMLRL's layout and keys (ours_iac_save/ is what the harness continues in CoMLRL)", async () => {
    const tokenizer = await ComlrlTokenizer.fromDirectory(COMLRL_MODEL);
    const trainer = await IACTrainer.create(options(COMLRL_MODEL, COMLRL_MODEL, tokenizer));
    const out = scratch();
    try {
      await trainer.saveModel(out);
    } finally {
      await trainer.close();
    }
    const committed = path.join(COMLRL_GOLDEN, "ours_iac_save");
    const files = (dir: string) => readdirSync(dir, { recursive: true }).map(String).sort();
    expect(files(out)).toEqual(files(committed));
    for (const file of files(out).filter((f) => f.endsWith("config.json"))) {
      expect(JSON.parse(readFileSync(path.join(out, file), "utf8")), file).toEqual(JSON.parse(readFileSync(path.join(committed, file), "utf8")));
    }
    expect(Object.keys(loadTorchStateDict(path.join(out, "critic", "value_head.pt"))).sort()).toEqual(KEYS.linear);
  });
});
