// Scratch folders for tests: one per test, or one per file holding a tiny model; removed when done.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { createTinyModel } from "../../src/models/tiny-model.js";

/** A fresh folder named after `prefix` for every test of the file, removed after it; returns the running test's. */
export function scratchPerTest(prefix: string): () => string {
  let scratch: string | undefined;
  beforeEach(() => {
    scratch = mkdtempSync(path.join(tmpdir(), prefix));
  });
  afterEach(() => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  });
  return () => {
    if (!scratch) throw new Error("the scratch folder exists while a test runs");
    return scratch;
  };
}

/** One folder for the file's tests, holding a one-layer tiny model in tiny/ (seed 3), removed after the last test. */
export function scratchWithTinyModel(prefix: string): { readonly scratch: string; readonly modelDir: string } {
  const scratch = mkdtempSync(path.join(tmpdir(), prefix));
  const modelDir = path.join(scratch, "tiny");
  beforeAll(async () => {
    await createTinyModel(modelDir, { seed: 3, hiddenSize: 32, numLayers: 1 });
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  return { scratch, modelDir };
}
