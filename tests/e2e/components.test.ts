// The component registry with modules that are not agents: a causal LM carrying a value head, and a head alone on a
// critic, each with an optimizer over parameter groups. Checkpoints restore every one of them exactly; saveModel
// writes the HF directories and value_head.pt files Python reads; sharing and ownership decide what close() frees.
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadCheckpoint, saveCheckpoint } from "../../src/checkpoint/checkpoint.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { ValueHead } from "../../src/models/value-head.js";
import { ComponentRegistry } from "../../src/components/registry.js";
import { causalLMModule, valueHeadModule } from "../../src/models/components.js";
import { runPython } from "../support/python.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-components-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;
beforeAll(async () => {
  tokenizer = await createTinyModel(base, { seed: 21, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
});

interface Parts {
  registry: ComponentRegistry;
  actor: CausalLM;
  head: ValueHead;
  critic: CausalLM;
  criticHead: ValueHead;
  actorOptimizer: Optimizer;
  criticOptimizer: Optimizer;
}

/** agent_0 (an LM), agent_0/value_head (its head, one optimizer over both), agent_0/critic + its head (another). */
async function build(seed: number): Promise<Parts> {
  const actor = await CausalLM.fromDirectory(base, { seed });
  const head = ValueHead.create(actor, { hiddenDim: 8, seed });
  const critic = await CausalLM.fromDirectory(base, { seed: seed + 1 });
  const criticHead = ValueHead.create(critic, { seed: seed + 1 });
  const actorOptimizer = new Optimizer([{ module: actor }, { module: head, lr: 1e-2 }], { lr: 1e-3 });
  const criticOptimizer = new Optimizer([{ module: critic }, { module: criticHead }], { lr: 1e-3 });
  const registry = new ComponentRegistry();
  registry.register({ name: "agent_0", module: causalLMModule(actor, tokenizer), optimizer: actorOptimizer, ownsModule: true, exportDir: "agent_0" });
  registry.register({ name: "agent_0/value_head", module: valueHeadModule(head), ownsModule: true, exportDir: "agent_0" });
  registry.register({ name: "agent_0/critic", module: causalLMModule(critic, tokenizer), optimizer: criticOptimizer, ownsModule: true, exportDir: "agent_0/critic" });
  registry.register({ name: "agent_0/critic/value_head", module: valueHeadModule(criticHead), ownsModule: true, exportDir: "agent_0/critic" });
  return { registry, actor, head, critic, criticHead, actorOptimizer, criticOptimizer };
}

/** One value-loss step on each LM + head pair. */
async function step(p: Parts): Promise<void> {
  const prompt = tokenizer.encode("Hello");
  const completion = Int32Array.from(tokenizer.encode(" world"));
  for (const [model, head, optimizer] of [[p.actor, p.head, p.actorOptimizer], [p.critic, p.criticHead, p.criticOptimizer]] as const) {
    await model.zeroGrad();
    await head.native.zeroGrad();
    await head.valueLossBackward([prompt], [completion], { readout: "q", targets: [1.5] });
    await optimizer.step();
  }
}

const everything = (p: Parts) => [
  ...[p.actor, p.critic].flatMap((m) => m.native.parameterNames().map(({ name }) => Array.from(m.native.getParameter(name)))),
  ...[p.head, p.criticHead].flatMap((h) => h.native.parameterNames().map(({ name }) => Array.from(h.native.getParameter(name)))),
];

describe("component registry", () => {
  it("a checkpoint restores LMs, heads and optimizers over groups so training continues exactly", async () => {
    const uninterrupted = await build(1);
    for (let i = 0; i < 3; i++) await step(uninterrupted);

    const first = await build(1);
    await step(first);
    const dir = await saveCheckpoint(path.join(scratch, "checkpoints"), 1, first.registry, { kind: "test", progress: { epoch: 1, itemIndex: 0, envStep: 0 }, wandb: null, state: {} });
    for (const file of ["agent_0/model.safetensors", "agent_0/optimizer.pt", "agent_0/value_head/value_head.pt", "agent_0/critic/model.safetensors", "agent_0/critic/optimizer.pt", "agent_0/critic/value_head/value_head.pt"]) {
      expect(existsSync(path.join(dir, file)), file).toBe(true);
    }
    first.registry.dispose();

    const resumed = await build(7); // other seeds: every weight must come from the checkpoint
    await loadCheckpoint(dir, "test", resumed.registry);
    for (let i = 0; i < 2; i++) await step(resumed);
    expect(everything(resumed)).toEqual(everything(uninterrupted));
    resumed.registry.dispose();
    uninterrupted.registry.dispose();
  });

  it("refuses a checkpoint whose head has another shape, naming the component", async () => {
    const parts = await build(1);
    const dir = await saveCheckpoint(path.join(scratch, "shape"), 1, parts.registry, { kind: "test", progress: { epoch: 1, itemIndex: 0, envStep: 0 }, wandb: null, state: {} });
    parts.registry.dispose();
    const other = await build(1);
    const wide = ValueHead.create(other.actor, { hiddenDim: 16 });
    const registry = new ComponentRegistry();
    registry.register({ name: "agent_0", module: causalLMModule(other.actor, tokenizer), optimizer: other.actorOptimizer, ownsModule: true });
    registry.register({ name: "agent_0/value_head", module: valueHeadModule(wide), ownsModule: true });
    registry.register({ name: "agent_0/critic", module: causalLMModule(other.critic, tokenizer), optimizer: other.criticOptimizer, ownsModule: true });
    registry.register({ name: "agent_0/critic/value_head", module: valueHeadModule(other.criticHead), ownsModule: true });
    await expect(loadCheckpoint(dir, "test", registry)).rejects.toThrow(/agent_0\/value_head differs: checkpoint \{"valueHead":\{"hiddenSize":32,"hiddenDim":8\}\}, trainer \{"valueHead":\{"hiddenSize":32,"hiddenDim":16\}\}/);
    registry.dispose();
    other.head.dispose();
  });

  it("saveModel layout: HF dirs with value_head.pt beside them, which Python's torch.load(weights_only=True) reads", async () => {
    const parts = await build(3);
    const out = path.join(scratch, "export");
    await parts.registry.exportTo(out);
    for (const file of ["agent_0/config.json", "agent_0/model.safetensors", "agent_0/tokenizer.json", "agent_0/value_head.pt", "agent_0/critic/model.safetensors", "agent_0/critic/value_head.pt"]) {
      expect(existsSync(path.join(out, file)), file).toBe(true);
    }
    const loaded = runPython(
      `import sys, json, torch
print(json.dumps({f: {k: v.flatten().tolist() for k, v in torch.load(f, weights_only=True).items()} for f in sys.argv[1:]}))`,
      [path.join(out, "agent_0", "value_head.pt"), path.join(out, "agent_0", "critic", "value_head.pt")],
    );
    const head = loaded[path.join(out, "agent_0", "value_head.pt")];
    // CoMLRL's ValueHead keys (value_projection.*, pre_projection.0.*) over the native head's parameters.
    const native = { "pre_projection.0.weight": "0.weight", "pre_projection.0.bias": "0.bias", "value_projection.weight": "2.weight", "value_projection.bias": "2.bias" };
    expect(Object.keys(head)).toEqual(Object.keys(native));
    for (const [name, nativeName] of Object.entries(native)) {
      const ours = Array.from(parts.head.native.getParameter(nativeName));
      head[name].forEach((v: number, i: number) => expect(v).toBeCloseTo(ours[i], 7));
    }
    expect(Object.keys(loaded[path.join(out, "agent_0", "critic", "value_head.pt")])).toEqual(["value_projection.weight", "value_projection.bias"]);
    parts.registry.dispose();
  });

  it("saveModel as GGUF: model.gguf in place of each HF dir, value heads as before; bad options named first", async () => {
    const parts = await build(4);
    const out = path.join(scratch, "export-gguf");
    await expect(parts.registry.exportTo(out, { format: "onnx" as "gguf" })).rejects.toThrow(/saveModel: format must be "hf" or "gguf", got "onnx"/);
    await expect(parts.registry.exportTo(out, { dtype: "q8_0" })).rejects.toThrow(/saveModel: dtype "q8_0" applies to format "gguf" only/);
    expect(existsSync(out)).toBe(false);
    await parts.registry.exportTo(out, { format: "gguf", dtype: "q8_0" });
    for (const file of ["agent_0/model.gguf", "agent_0/value_head.pt", "agent_0/critic/model.gguf", "agent_0/critic/value_head.pt"]) {
      expect(existsSync(path.join(out, file)), file).toBe(true);
    }
    expect(existsSync(path.join(out, "agent_0", "config.json"))).toBe(false);
    parts.registry.dispose();
  });

  it("frees only owned modules, a shared one once", async () => {
    const mine = await CausalLM.fromDirectory(base);
    const theirs = await CausalLM.fromDirectory(base);
    const registry = new ComponentRegistry();
    registry.register({ name: "agent_0", module: causalLMModule(mine, tokenizer), ownsModule: true });
    registry.register({ name: "agent_1", module: causalLMModule(mine, tokenizer), ownsModule: true });
    registry.register({ name: "agent_2", module: causalLMModule(theirs, tokenizer), ownsModule: false });
    expect(registry.get("agent_1").sharesModuleWith).toBe("agent_0");
    registry.dispose();
    expect(() => mine.info()).toThrow(/disposed/);
    expect(theirs.info().parameterCount).toBeGreaterThan(0);
    theirs.dispose();
  });

  it("replace: the new module and optimizer take the old one's name and place; the old owned module and its optimizer are freed", async () => {
    const parts = await build(4);
    const { registry } = parts;
    const fresh = await CausalLM.fromDirectory(base, { seed: 9 });
    const freshOptimizer = new Optimizer([{ module: fresh }, { module: parts.criticHead }], { lr: 1e-3 });
    const names = registry.all.map((c) => c.name);
    const replaced = registry.replace({ name: "agent_0/critic", module: causalLMModule(fresh, tokenizer), optimizer: freshOptimizer, ownsModule: true, exportDir: "agent_0/critic" });
    expect(registry.all.map((c) => c.name)).toEqual(names);
    expect(registry.get("agent_0/critic")).toBe(replaced);
    expect(replaced.module.key).toBe(fresh);
    expect(replaced.sharesModuleWith).toBeNull();
    expect(() => parts.critic.info()).toThrow(/disposed/);
    expect(() => parts.criticOptimizer.learningRates()).toThrow(/disposed/);
    expect(parts.actor.info().parameterCount).toBeGreaterThan(0);
    // The checkpoint now carries the new module: restoring it into a registry built around other weights gives them back.
    const dir = await saveCheckpoint(path.join(scratch, "replaced"), 1, registry, { kind: "test", progress: { epoch: 1, itemIndex: 0, envStep: 0 }, wandb: null, state: {} });
    const other = await build(5);
    await loadCheckpoint(dir, "test", other.registry);
    const weights = (m: CausalLM) => m.native.parameterNames().map(({ name }) => Array.from(m.native.getParameter(name)));
    expect(weights(other.critic)).toEqual(weights(fresh));
    other.registry.dispose();

    expect(() => registry.replace({ name: "agent_9", module: causalLMModule(fresh, tokenizer), ownsModule: false })).toThrow(/no component named "agent_9" to replace/);
    const shared = new ComponentRegistry();
    const model = await CausalLM.fromDirectory(base);
    shared.register({ name: "agent_0", module: causalLMModule(model, tokenizer), ownsModule: true });
    shared.register({ name: "reference_0", module: causalLMModule(model, tokenizer), ownsModule: true });
    expect(() => shared.replace({ name: "agent_0", module: causalLMModule(fresh, tokenizer), ownsModule: false })).toThrow(/"agent_0" shares its module with reference_0/);
    shared.dispose();
    registry.dispose();
  });
});
