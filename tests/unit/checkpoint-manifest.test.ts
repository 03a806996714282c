// A checkpoint's manifest names files inside its checkpoint only: entries that climb out ("../x"), absolute paths
// and symlinks leading outside are refused by name, so a crafted manifest cannot make resume read (and vouch for)
// files elsewhere.
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { verifyManifest, writeManifest } from "../../src/checkpoint/manifest.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-manifest-"));
const outside = path.join(scratch, "outside.txt");
writeFileSync(outside, "not part of any checkpoint\n");
const entry = { size: 27, sha256: createHash("sha256").update("not part of any checkpoint\n").digest("hex") };

function checkpointListing(name: string, files: Record<string, typeof entry>): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "manifest.json"), JSON.stringify({ format: 1, createdAt: "", files }));
  return dir;
}

describe("checkpoint manifest paths", () => {
  it("entries outside the checkpoint directory are refused, naming the entry", async () => {
    for (const [name, file] of [["climb", "../outside.txt"], ["absolute", outside], ["nested-climb", "a/../../outside.txt"]]) {
      const dir = checkpointListing(name, { [file]: entry });
      await expect(verifyManifest(dir), name).rejects.toThrow(`${path.join(dir, "manifest.json")}: entry ${JSON.stringify(file)} is not a file inside the checkpoint`);
    }
  });

  it("a symlink inside the checkpoint that leads outside is refused", async () => {
    const dir = checkpointListing("link", { "link.txt": entry });
    symlinkSync(outside, path.join(dir, "link.txt"));
    await expect(verifyManifest(dir)).rejects.toThrow(`${path.join(dir, "manifest.json")}: entry "link.txt" is not a file inside the checkpoint`);
  });

  it("a manifest written here verifies", async () => {
    const dir = path.join(scratch, "good");
    mkdirSync(path.join(dir, "sub"), { recursive: true });
    writeFileSync(path.join(dir, "sub", "a.bin"), "abc");
    await writeManifest(dir);
    expect(Object.keys((await verifyManifest(dir)).files)).toEqual([path.join("sub", "a.bin")]);
  });
});
