// The demo epoch under a process layout: `ranks` processes × `threads` intra-op threads each (1 × 2, 2 × 1, 1 × 1
// on two cores), each layout in processes of its own started here, ranks on loopback. Rank 0's epoch time and phases
// are the layout's; a data-parallel layout adds its gradient all-reduces (per optimizer step: bytes and seconds).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createDemoBaseModel } from "../demo/recipes.js";
import { freeLoopbackPort } from "../distributed/local-ranks.js";
import type { TrainerCase, WorkerOutput } from "./types.js";

/** The rank script beside this file: ddp-rank.ts through tsx when running from source, ddp-rank.js when built. */
function rankCommand(): string[] {
  const here = fileURLToPath(import.meta.url);
  const script = path.join(path.dirname(here), `ddp-rank${path.extname(here)}`);
  return here.endsWith(".ts") ? ["--import", "tsx", script] : [script];
}

export async function measureLayoutEpoch(spec: TrainerCase & { layout: { ranks: number; threads: number } }): Promise<WorkerOutput> {
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-bench-ddp-"));
  try {
    const baseDir = path.join(scratch, "base-model");
    await createDemoBaseModel(baseDir, 7);
    const { ranks, threads } = spec.layout;
    const port = ranks > 1 ? await freeLoopbackPort() : 0;
    const children = Array.from({ length: ranks }, (_, rank) => {
      const env: NodeJS.ProcessEnv = { ...process.env, COMLRL_NUM_THREADS: `${threads}` };
      if (ranks > 1) Object.assign(env, { RANK: `${rank}`, WORLD_SIZE: `${ranks}`, LOCAL_RANK: `${rank}`, MASTER_ADDR: "127.0.0.1", MASTER_PORT: `${port}`, COMLRL_DIST_TIMEOUT: "300" });
      const child = spawn(process.execPath, [...rankCommand(), baseDir, scratch, `${spec.items}`, `${spec.repeats}`, spec.scoring], { env, stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr!.on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)));
      return { child, exit: new Promise<{ code: number | null; stderr: string }>((resolve) => child.on("exit", (code) => resolve({ code, stderr }))) };
    });
    const exits = await Promise.all(
      children.map(async ({ exit }, rank) => {
        const result = await exit;
        if (result.code !== 0) children.forEach(({ child }) => child.exitCode === null && child.kill("SIGKILL"));
        return { rank, ...result };
      }),
    );
    const failed = exits.find((e) => e.code !== 0);
    if (failed) throw new Error(`rank ${failed.rank} of ${ranks} exited with ${failed.code}: ${failed.stderr.trim().split("\n").slice(-3).join(" / ")}`);
    return JSON.parse(readFileSync(path.join(scratch, "result.json"), "utf8")) as WorkerOutput;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
