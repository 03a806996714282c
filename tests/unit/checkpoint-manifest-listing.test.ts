// A checkpoint holds exactly the files its manifest lists: a file added beside them (a planted model.safetensors
// shard, an extra state file) is refused by name rather than trusted, and an entry that is not a regular file (a
// FIFO, a device) is refused before it is opened, where reading it would block resume forever.
import { spawnSync } from "node:child_process";
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { verifyManifest, writeManifest } from "../../src/checkpoint/manifest.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-manifest-listing-"));
const fifos: string[] = [];

async function checkpoint(name: string): Promise<string> {
  const dir = path.join(scratch, name);
  mkdirSync(path.join(dir, "agent_0"), { recursive: true });
  writeFileSync(path.join(dir, "agent_0", "model.safetensors"), "weights");
  writeFileSync(path.join(dir, "trainer_state.json"), "{}");
  await writeManifest(dir);
  return dir;
}

function fifo(file: string): void {
  expect(spawnSync("mkfifo", [file]).status).toBe(0);
  fifos.push(file);
}

// A reader left blocked in open() by a failing run is released by opening the other end.
afterAll(() => {
  for (const file of fifos) {
    try {
      closeSync(openSync(file, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // No reader is waiting.
    }
  }
});

describe("checkpoint manifest listing", () => {
  it("a file the manifest does not list is refused, naming it", async () => {
    const dir = await checkpoint("unlisted");
    writeFileSync(path.join(dir, "agent_0", "model-00002-of-00002.safetensors"), "planted");
    await expect(verifyManifest(dir)).rejects.toThrow(
      `checkpoint ${dir} holds ${path.join("agent_0", "model-00002-of-00002.safetensors")}, which its manifest.json does not list (added after it was written)`,
    );
  });

  it("a listed entry that is a FIFO is refused at once, not read", async () => {
    const dir = await checkpoint("fifo");
    const state = path.join(dir, "trainer_state.json");
    const listed = path.join(dir, "manifest.json");
    // The manifest vouches for an empty file where the FIFO now is, so its size alone cannot refuse it.
    const manifest = JSON.parse(readFileSync(listed, "utf8"));
    manifest.files["trainer_state.json"] = { size: 0, sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" };
    writeFileSync(listed, JSON.stringify(manifest));
    rmSync(state);
    fifo(state);
    await expect(verifyManifest(dir)).rejects.toThrow(`checkpoint file ${state} is not a regular file (a FIFO)`);
  }, 10_000);

  it("a checkpoint as written verifies", async () => {
    const dir = await checkpoint("good");
    expect(Object.keys((await verifyManifest(dir)).files)).toEqual([path.join("agent_0", "model.safetensors"), "trainer_state.json"]);
  });
});
