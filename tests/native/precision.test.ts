// Precision settings for GPU training, checked where a CPU can check them: float16 training refused by name, float32
// AdamW moments for bf16 parameters as an option (pure bf16 the default), and the COMLRL_TF32 / COMLRL_DETERMINISTIC
// opt-ins read when the addon loads (child processes, since they are process-wide).
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { tf32Hint } from "../../src/runtime.js";
import { TINY_SHAPE } from "./tiny-lm.js";

const CONFIG = buildConfigJson("qwen2", TINY_SHAPE, { bosTokenId: null, eosTokenId: 63 });
const PROMPTS = [[3, 4, 5], [9, 10]];
const COMPLETIONS = [[6, 7, 8], [11, 12, 13, 14]];

async function train(model: CausalLM, optimizer: Optimizer, steps: number): Promise<void> {
  for (let i = 0; i < steps; i++) {
    await model.policyGradientBackward(PROMPTS, COMPLETIONS, [1, -0.5]);
    await optimizer.step({ maxGradNorm: 1 });
  }
}

describe("float16 training", () => {
  it("an optimizer over a float16 model is refused, naming the dtype and why", () => {
    const half = CausalLM.create(CONFIG, { seed: 1, initStd: 0.2, dtype: "float16" });
    try {
      expect(() => new Optimizer(half, { lr: 1e-3 })).toThrow(/model is float16: training in float16 needs loss scaling and float32 master weights/);
      expect(() => new Optimizer([{ module: half }], { lr: 1e-3 })).toThrow(/groups\[0\]\.module is float16/);
    } finally {
      half.dispose();
    }
  });
});

describe("float32 moments for bf16 parameters", () => {
  it("with fp32Moments bf16 parameters keep float32 moments (through save and load); the default keeps bf16 ones", async () => {
    const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-precision-"));
    const runs: Record<string, Float32Array> = {};
    for (const fp32Moments of [false, true]) {
      const model = CausalLM.create(CONFIG, { seed: 1, initStd: 0.2, dtype: "bfloat16" });
      const optimizer = new Optimizer(model, { lr: 1e-2, ...(fp32Moments ? { fp32Moments } : {}) });
      try {
        await train(model, optimizer, 3);
        const dtypes = new Set(optimizer.momentDtypes());
        expect([...dtypes]).toEqual([fp32Moments ? "float32" : "bfloat16"]);
        expect(optimizer.momentDtypes().length).toBe(2 * model.native.parameterNames().length);
        const file = path.join(scratch, `adamw-${fp32Moments}.pt`);
        await optimizer.save(file);
        await optimizer.load(file);
        expect(new Set(optimizer.momentDtypes())).toEqual(dtypes);
        await train(model, optimizer, 1);
        runs[String(fp32Moments)] = model.native.getParameter("model.layers.0.mlp.down_proj.weight")!;
      } finally {
        optimizer.dispose();
        model.dispose();
      }
    }
    // The moments' precision changes the updates.
    expect(runs.true).not.toEqual(runs.false);
  });

  it("bf16 moments from a file are widened to float32 once the option is on", async () => {
    const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-precision-"));
    const model = CausalLM.create(CONFIG, { seed: 1, initStd: 0.2, dtype: "bfloat16" });
    const plain = new Optimizer(model, { lr: 1e-2 });
    const widened = new Optimizer(model, { lr: 1e-2, fp32Moments: true });
    try {
      await train(model, plain, 1);
      await plain.save(path.join(scratch, "plain.pt"));
      await widened.load(path.join(scratch, "plain.pt"));
      expect(new Set(widened.native.momentDtypes())).toEqual(new Set(["bfloat16"]));
      await train(model, widened, 1);
      expect(new Set(widened.native.momentDtypes())).toEqual(new Set(["float32"]));
    } finally {
      plain.dispose();
      widened.dispose();
      model.dispose();
    }
  });

  it("an fp32 model steps identically with and without the option", async () => {
    const params: Float32Array[] = [];
    for (const fp32Moments of [false, true]) {
      const model = CausalLM.create(CONFIG, { seed: 1, initStd: 0.2 });
      const optimizer = new Optimizer(model, { lr: 1e-2, fp32Moments });
      try {
        await train(model, optimizer, 3);
        expect(new Set(optimizer.momentDtypes())).toEqual(new Set(["float32"]));
        params.push(model.native.getParameter("model.layers.0.self_attn.q_proj.weight")!);
      } finally {
        optimizer.dispose();
        model.dispose();
      }
    }
    expect(params[1]).toEqual(params[0]);
  });
});

// Runs a script in a fresh process (tsx) with env added to this one's, less the variables under test; returns its exit
// status and output.
function child(script: string, env: Record<string, string>) {
  const base: Record<string, string | undefined> = { ...process.env, COMLRL_NUM_THREADS: "1" };
  for (const name of ["COMLRL_TF32", "COMLRL_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG"]) delete base[name];
  const run = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8", env: { ...base, ...env } });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

// One seeded training step's loss and a parameter's checksum, printed as JSON, with what numerics() reports.
const STEP_SCRIPT = `
  const { numerics } = await import(${JSON.stringify(path.resolve(__dirname, "../../src/runtime.ts"))});
  const { CausalLM } = await import(${JSON.stringify(path.resolve(__dirname, "../../src/models/causal-lm.ts"))});
  const { Optimizer } = await import(${JSON.stringify(path.resolve(__dirname, "../../src/models/optimizer.ts"))});
  const model = CausalLM.create(${JSON.stringify(CONFIG)}, { seed: 1, initStd: 0.2 });
  const optimizer = new Optimizer(model, { lr: 1e-2 });
  const { loss } = await model.policyGradientBackward(${JSON.stringify(PROMPTS)}, ${JSON.stringify(COMPLETIONS)}, [1, -0.5]);
  await optimizer.step({ maxGradNorm: 1 });
  const p = model.native.getParameter("model.embed_tokens.weight");
  console.log(JSON.stringify({ numerics: numerics(), loss, sum: p.reduce((a, b) => a + b, 0) }));
`;

describe("tf32Hint", () => {
  it("says what TF32 would buy only where a GPU is present and TF32 was not asked for", () => {
    expect(tf32Hint({ tf32Requested: false }, 1)).toMatch(/^TF32 is off: float32 matmuls on this GPU run without tensor cores, at about 1\/8 of the TF32 rate .*COMLRL_TF32=1 turns it on/);
    expect(tf32Hint({ tf32Requested: true }, 8)).toBeNull();
    expect(tf32Hint({ tf32Requested: false }, 0)).toBeNull();
  });

  it("comlrl info reports the numerics, and no hint without a GPU", () => {
    const run = spawnSync(process.execPath, ["--import", "tsx", path.resolve(__dirname, "../../src/cli/main.ts"), "info"], { encoding: "utf8", env: { ...process.env, COMLRL_NUM_THREADS: "1" } });
    expect(run.status, run.stderr).toBe(0);
    const info = JSON.parse(run.stdout);
    expect(info.numerics).toMatchObject({ tf32Requested: false, tf32: false });
    expect(info.cudaDeviceCount > 0 ? typeof info.tf32Hint : info.tf32Hint).toBe(info.cudaDeviceCount > 0 ? "string" : undefined);
  });
});

describe("COMLRL_TF32 and COMLRL_DETERMINISTIC", () => {
  it("off by default; deterministic algorithms on with cuBLAS's fixed workspace, and the CPU step unchanged", () => {
    const plain = child(STEP_SCRIPT, {});
    const deterministic = child(STEP_SCRIPT, { COMLRL_DETERMINISTIC: "1" });
    expect(plain.status, plain.stderr).toBe(0);
    expect(deterministic.status, deterministic.stderr).toBe(0);
    const a = JSON.parse(plain.stdout.trim().split("\n").at(-1)!);
    const b = JSON.parse(deterministic.stdout.trim().split("\n").at(-1)!);
    expect(a.numerics).toEqual({ tf32Requested: false, tf32: false, deterministic: false, cublasWorkspaceConfig: null });
    expect(b.numerics).toEqual({ tf32Requested: false, tf32: false, deterministic: true, cublasWorkspaceConfig: ":4096:8" });
    expect(b.loss).toBe(a.loss);
    expect(b.sum).toBe(a.sum);
  });

  it("TF32 is requested but not applied without a CUDA device", () => {
    const run = child(STEP_SCRIPT, { COMLRL_TF32: "1" });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout.trim().split("\n").at(-1)!);
    expect(out.numerics.tf32Requested).toBe(true);
    expect(out.numerics.tf32).toBe(false);
  });

  it("a value other than 0 or 1 stops the addon from loading, naming the variable", () => {
    const run = child(STEP_SCRIPT, { COMLRL_TF32: "yes" });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/COMLRL_TF32 must be 0 or 1, got "yes"/);
  });
});
