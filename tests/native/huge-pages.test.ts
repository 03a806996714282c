// A CPU model's parameters sit in one block of memory advised for transparent huge pages (native/runtime/huge_pages.h):
// decoding streams every weight each step, and on 2 MiB pages it takes a few hundred TLB misses where 4 KiB pages
// took over a hundred thousand.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { tinyLM } from "./tiny-lm.js";

const THP_MODE = existsSync("/sys/kernel/mm/transparent_hugepage/enabled")
  ? /\[(\w+)\]/.exec(readFileSync("/sys/kernel/mm/transparent_hugepage/enabled", "utf8"))?.[1]
  : undefined;

/** The process's anonymous mappings the kernel may back with huge pages: start address → size in bytes. */
function hugePageEligibleMappings(): Map<string, number> {
  const eligible = new Map<string, number>();
  let range = "";
  let size = 0;
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const header = /^([0-9a-f]+)-[0-9a-f]+ /.exec(line);
    if (header) range = header[1];
    else if (line.startsWith("Size:")) size = Number(line.split(/\s+/)[1]) * 1024;
    else if (line.startsWith("THPeligible:") && line.trim().endsWith("1")) eligible.set(range, size);
  }
  return eligible;
}

describe("parameters in one block", () => {
  it("a created model, its clone and a tied model each hold their parameters in one block", async () => {
    const model = tinyLM(1, { numLayers: 2 });
    const tied = tinyLM(2, { tieWordEmbeddings: true });
    const clone = await model.clone();
    try {
      for (const m of [model, tied, clone]) expect(m.info().parameterBlocks).toBe(1);
      // The tied weight is one tensor: its bytes count once, as before.
      const untied = tinyLM(2);
      expect(untied.info().parameterBytes - tied.info().parameterBytes).toBe(64 * 16 * 4);
      untied.dispose();
      // The clone, in a block of its own, computes what its source does.
      const ids = Int32Array.from([1, 2, 3, 4]);
      const before = (await model.native.forward({ ids, batch: 1, length: 4 })).logits!;
      const copied = (await clone.native.forward({ ids, batch: 1, length: 4 })).logits!;
      expect(Array.from(copied)).toEqual(Array.from(before));
    } finally {
      for (const m of [model, tied, clone]) m.dispose();
    }
  });

  it.runIf(THP_MODE === "madvise" || THP_MODE === "always")("the block is a mapping the kernel may back with huge pages", () => {
    const before = hugePageEligibleMappings();
    const model = tinyLM(1, { vocabSize: 8192, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2 });
    try {
      const bytes = model.info().parameterBytes;
      expect(bytes).toBeGreaterThan(16 * 2 ** 20);
      const added = [...hugePageEligibleMappings()].filter(([start, size]) => !before.has(start) && size >= bytes);
      expect(added.length).toBeGreaterThanOrEqual(1);
    } finally {
      model.dispose();
    }
  });

  it("COMLRL_HUGE_PAGES=0 leaves every parameter in a block of its own", () => {
    // The addon reads the setting when it places a model: a process of its own, started with it.
    const script = `import { tinyLM } from ${JSON.stringify(path.join(import.meta.dirname, "tiny-lm.ts"))};
      const model = tinyLM(1, { numLayers: 2 });
      console.log(JSON.stringify({ blocks: model.info().parameterBlocks, names: model.native.parameterNames().length }));
      model.dispose();`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
      env: { ...process.env, COMLRL_HUGE_PAGES: "0", COMLRL_NUM_THREADS: "1" },
      timeout: 120_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const { blocks, names } = JSON.parse(run.stdout.trim().split("\n").pop()!) as { blocks: number; names: number };
    expect(names).toBeGreaterThan(1);
    expect(blocks).toBe(names);
  });
});
