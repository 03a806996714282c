// Data-parallel MAGRPO across real processes on loopback, one thread each: two ranks updating on their halves of
// fixed samples end where one process updating on all of them ends; a full 2-rank run keeps its replicas
// bit-identical and resumes exactly from its own checkpoint; a killed rank fails the others with a clear error,
// and `comlrl launch` leaves no rank behind.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setNumThreads } from "../../src/runtime.js";
import type { UpdateRecord } from "../../src/trainers/lifecycle/stage-host.js";
import { alive, freePort, killAll, rankEnv, start } from "./spawn.js";
import { decodeWeights, fixedSamples, makeDdpBase, makeDdpTrainer, weightsOf } from "./trainer-setup.js";

const worker = path.join(import.meta.dirname, "training-worker.ts");
const cli = path.join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");
const root = mkdtempSync(path.join(tmpdir(), "comlrl-ddp-"));
const base = path.join(root, "base");
const read = (file: string) => JSON.parse(readFileSync(file, "utf8"));

/** Runs the worker as ranks 0..worldSize-1 on a fresh port; resolves with their results once all exit. */
async function runRanks(name: string, args: string[], worldSize = 2) {
  const out = path.join(root, name);
  mkdirSync(out, { recursive: true });
  const port = await freePort();
  const exits = await Promise.all(Array.from({ length: worldSize }, (_, r) => start([worker, args[0], base, out, ...args.slice(1)], rankEnv(r, worldSize, port)).exit));
  exits.forEach((e, r) => expect(e.code, `rank ${r}: ${e.stderr}`).toBe(0));
  return { out, ranks: Array.from({ length: worldSize }, (_, r) => read(path.join(out, `rank-${r}.json`))) };
}

async function until(condition: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const trainLines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((l) => l.includes('"kind":"train"')).length : 0);

beforeAll(async () => {
  await makeDdpBase(base);
  setNumThreads(1);
});
afterAll(killAll);

describe("data-parallel MAGRPO (2 ranks × 1 thread on 127.0.0.1)", () => {
  it("two ranks updating on halves of fixed samples end where one process on all of them does, and agree bit for bit", async () => {
    const { ranks } = await runRanks("update", ["update"]);
    const [w0, w1] = ranks.map((r) => r.weights as string[]);
    expect(w1).toEqual(w0);

    const { ComlrlTokenizer } = await import("../../src/models/tokenizer.js");
    const single = await makeDdpTrainer(base, await ComlrlTokenizer.fromDirectory(base), path.join(root, "update-single"), { ddp: false, epochs: 1, trainBatchSize: 8 });
    const updates: UpdateRecord[][] = [];
    for (let round = 0; round < 2; round++) updates.push(await single.update(fixedSamples()));
    const expected = decodeWeights(weightsOf(single));
    const initial = decodeWeights(weightsOf(await makeDdpTrainer(base, await ComlrlTokenizer.fromDirectory(base), path.join(root, "update-initial"), { ddp: false, epochs: 1 })));
    await single.close();

    let maxDifference = 0;
    let maxMove = 0;
    decodeWeights(w0).forEach((w, p) => w.forEach((v, i) => {
      maxDifference = Math.max(maxDifference, Math.abs(v - expected[p][i]));
      maxMove = Math.max(maxMove, Math.abs(expected[p][i] - initial[p][i]));
    }));
    // Two AdamW steps at lr 2e-3 move weights by up to ~4e-3; the ranks differ from one process by summation order only.
    expect(maxMove).toBeGreaterThan(1e-3);
    // Measured 1.04e-5: AdamW's first steps divide by |g| + ε, which magnifies the summation-order error of gradient
    // entries near zero; an unsynchronised pair of ranks would be ~1e-3 away.
    expect(maxDifference).toBeLessThan(5e-5);
    // Each step logged over every rank's samples: 4 per agent, the same loss as one process within float error.
    ranks[0].updates.flat().forEach((u: { samples: number; loss: number }, i: number) => {
      const one = updates.flat()[i];
      expect(u.samples).toBe(4);
      expect(u.loss).toBeCloseTo(one.loss, 5);
    });
  });

  it("a 2-rank run keeps its replicas bit-identical, rank 0 alone writes, and its checkpoint resumes exactly in a 2-rank run", async () => {
    const first = await runRanks("train", ["train", "2", path.join(root, "train", "checkpoints")]);
    expect(first.ranks[1].weights).toEqual(first.ranks[0].weights);
    // 6 items over 2 ranks: 3 steps per rank per epoch.
    expect(first.ranks[0].progress).toMatchObject({ epoch: 2, unitsDone: 2 });
    expect(readdirSync(path.join(first.out, "checkpoints")).sort()).toEqual(["checkpoint-1", "checkpoint-2"]);
    expect(trainLines(path.join(first.out, "run", "metrics.jsonl"))).toBeGreaterThan(0);

    const resumed = await runRanks("resume", ["train", "2", path.join(root, "resume", "checkpoints"), path.join(first.out, "checkpoints", "checkpoint-1")]);
    expect(resumed.ranks[0].weights).toEqual(first.ranks[0].weights);
    expect(resumed.ranks[1].weights).toEqual(first.ranks[0].weights);

    const { ComlrlTokenizer } = await import("../../src/models/tokenizer.js");
    const alone = await makeDdpTrainer(base, await ComlrlTokenizer.fromDirectory(base), path.join(root, "alone"), { ddp: false, epochs: 2 });
    await expect(alone.train({ resumeFromCheckpoint: path.join(first.out, "checkpoints", "checkpoint-1") })).rejects.toThrow(/written by a data-parallel run of 2 ranks/);
    await alone.close();
  });

  it.each(["IAC", "MAAC", "MAPPO"])("%s: a 2-rank run keeps its actors and critics bit-identical, even when ranks hold different sample counts", async (kind) => {
    const run = await runRanks(`train-${kind}`, ["train", "2", path.join(root, `train-${kind}`, "checkpoints"), "", "0", "6", kind]);
    expect(run.ranks[0].weights.length).toBeGreaterThan(0);
    expect(run.ranks[1].weights).toEqual(run.ranks[0].weights);
  });

  it.each(["MARLHF-IAC", "MARLHF-MAAC"])("%s: the RL phase hosted in MARLHF's job keeps actors, critics and reward model bit-identical over 2 ranks", async (kind) => {
    const run = await runRanks(`train-${kind}`, ["train", "1", path.join(root, `train-${kind}`, "checkpoints"), "", "0", "6", kind]);
    expect(run.ranks[0].weights.length).toBeGreaterThan(0);
    expect(run.ranks[1].weights).toEqual(run.ranks[0].weights);
    // Both ranks counted the same job: pairs, reward-model and RL steps over every rank's share.
    expect(run.ranks[1].progress).toEqual(run.ranks[0].progress);
  });

  it.each(["MADPO", "MARLHF-IAC"])("%s: one rank's non-finite DPO or reward-model loss is skipped with a step of no samples; the ranks stay bit-identical and finish", async (kind) => {
    const name = `nonfinite-${kind}`;
    const run = await runRanks(name, ["train", "1", path.join(root, name, "checkpoints"), "", "0", "6", kind, "1"]);
    expect(run.ranks[1].nonFinite).toBeGreaterThan(0);
    expect(run.ranks[0].nonFinite).toBe(0);
    expect(run.ranks[0].weights.length).toBeGreaterThan(0);
    expect(run.ranks[1].weights).toEqual(run.ranks[0].weights);
    expect(run.ranks[1].progress).toEqual(run.ranks[0].progress);
  });

  it("MARLHFIter: every rank's pairs gathered, the same training pairs drawn, actors and the replaced reward model bit-identical; rank 0 writes the files; a 2-rank resume over the same directory continues exactly", async () => {
    const name = "train-MARLHF-ITER";
    const run = await runRanks(name, ["train", "1", path.join(root, name, "checkpoints"), "", "0", "6", "MARLHF-ITER"]);
    // The weights include the second iteration's reward model, put in place of the first: its steps reduce gradients too.
    expect(run.ranks[0].weights.length).toBeGreaterThan(0);
    expect(run.ranks[1].weights).toEqual(run.ranks[0].weights);
    expect(run.ranks[1].progress).toEqual(run.ranks[0].progress);
    // Drawn from the whole replay at random: alike only if both ranks hold the same shards and draw alike.
    expect(run.ranks[0].pairs.length).toBeGreaterThan(0);
    expect(run.ranks[1].pairs).toEqual(run.ranks[0].pairs);
    // Rank r collected items r, r + 2, r + 4; each shard holds both ranks' pairs in item order.
    const replay = path.join(run.out, "run", "preference_replay");
    const items = [1, 2, 3].flatMap((k) => read(path.join(replay, `iteration_000${k}.json`)).pairs.map((p: { item_index: number }) => p.item_index));
    expect(new Set(items.map((i: number) => i % 2))).toEqual(new Set([0, 1]));
    expect(readdirSync(path.join(run.out, "run", "policy_checkpoints")).sort()).toEqual(["initial", "iteration_0000", "iteration_0001", "iteration_0002"]);

    // checkpoint-3: iteration 1 done (collect, reward_model, rl). Resumed beside the first run's files, in artefact
    // directories each rank would name differently on its own: iteration 3's comparator loads iteration 2's policy
    // checkpoint from where rank 0 wrote it.
    const resumed = await runRanks(name, ["train", "1", path.join(root, name, "resumed"), path.join(run.out, "checkpoints", "checkpoint-3"), "0", "6", "MARLHF-ITER"]);
    expect(resumed.ranks[0].weights).toEqual(run.ranks[0].weights);
    expect(resumed.ranks[1].weights).toEqual(run.ranks[0].weights);
    const [tag] = readdirSync(replay).filter((f) => f.startsWith("resume-"));
    expect(readdirSync(path.join(replay, tag)).sort()).toEqual(["iteration_0002.json", "iteration_0003.json"]);
  });

  it("MADPOIter: every rank's pairs gathered, the same replay sample and DPO order drawn, actors bit-identical over 2 ranks", async () => {
    const run = await runRanks("train-MADPO-ITER", ["train", "1", path.join(root, "train-MADPO-ITER", "checkpoints"), "", "0", "6", "MADPO-ITER"]);
    expect(run.ranks[0].weights.length).toBeGreaterThan(0);
    expect(run.ranks[1].weights).toEqual(run.ranks[0].weights);
    expect(run.ranks[1].progress).toEqual(run.ranks[0].progress);
    expect(run.ranks[0].pairs.length).toBeGreaterThan(0);
    expect(run.ranks[1].pairs).toEqual(run.ranks[0].pairs);
  });

  it("ranks whose datasets differ in length fail at once, naming the stage and the step counts", async () => {
    const out = path.join(root, "mismatch");
    mkdirSync(out, { recursive: true });
    const port = await freePort();
    const exits = await Promise.all([0, 1].map((r) => start([worker, "train", base, out, "1", path.join(out, "checkpoints"), "", "0", "6,4"], rankEnv(r, 2, port, 10)).exit));
    exits.forEach((e) => {
      expect(e.code).not.toBe(0);
      expect(e.stderr).toMatch(/stage "train" has [64] steps on rank [01] but between 4 and 6 over the ranks/);
    });
  });

  it("a rank killed mid-run makes the other fail with a clear error within the timeout", async () => {
    const out = path.join(root, "killed");
    mkdirSync(out, { recursive: true });
    const port = await freePort();
    const args = [worker, "train", base, out, "20", path.join(out, "checkpoints"), "", "150"];
    const [rank0, rank1] = [0, 1].map((r) => start(args, rankEnv(r, 2, port, 10)));
    await until(() => trainLines(path.join(out, "run", "metrics.jsonl")) >= 2, "training to start");
    rank1.child.kill("SIGKILL");
    const killedAt = Date.now();
    const exit = await rank0.exit;
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toMatch(/failed on rank 0 of 2 \(a peer rank died, or did not join within 10000 ms\)/);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
  });

  it("comlrl launch stops every rank when one dies and exits with a failure", async () => {
    const out = path.join(root, "launch-killed");
    mkdirSync(out, { recursive: true });
    const launch = start([cli, "launch", "--nproc", "2", worker, "train", base, out, "20", path.join(out, "checkpoints"), "", "150"], { COMLRL_DIST_TIMEOUT: "10" });
    await until(() => trainLines(path.join(out, "run", "metrics.jsonl")) >= 2, "training to start");
    const pids = [0, 1].map((r) => Number(readFileSync(path.join(out, `pid-${r}`), "utf8")));
    process.kill(pids[1], "SIGKILL");
    const exit = await launch.exit;
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toMatch(/comlrl launch: rank 1 was killed by SIGKILL; stopping the other ranks/);
    pids.forEach((pid) => expect(alive(pid)).toBe(false));
  });
});
