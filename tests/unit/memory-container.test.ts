// The memory estimate against the container's limit, and its per-row terms. The cgroup limit is read along this
// process's cgroup path (cgroup v2 memory.max, v1 memory.limit_in_bytes), the smallest on the way up; the files here
// are fake trees under a root given for the test. A rollout's rows hold their prompt's tokens as well as the
// completion's: a large numGenerations is counted with the KV cache of both (it was ~10× under).
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { availableMemory, checkMemoryPlan, estimateMemory, modelShape } from "../../src/config/memory-estimate.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { cgroupMemoryLimit } from "../../src/util/cgroup-memory.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-cgroup-"));
const GB = 1e9;

/** A fake root: /proc/self/cgroup and the given files under /sys/fs/cgroup. */
function fakeRoot(name: string, procSelfCgroup: string, files: Record<string, string>): string {
  const root = path.join(scratch, name);
  for (const [file, content] of Object.entries({ "proc/self/cgroup": procSelfCgroup, ...files })) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), content);
  }
  return root;
}

// Qwen2.5-0.5B's shape with 15 of its 24 layers: 0.36B parameters.
const QWEN_036 = { hidden_size: 896, num_hidden_layers: 15, intermediate_size: 4864, num_attention_heads: 14, num_key_value_heads: 2, vocab_size: 151936 };

describe("the container's memory limit", () => {
  it("the smallest limit from the process's cgroup up to the root: v2 memory.max ('max' is none), v1 memory.limit_in_bytes (its 'unlimited' is none)", () => {
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ["v2", "0::/user.slice/job/run\n", {
        "sys/fs/cgroup/user.slice/job/run/memory.max": "max\n",
        "sys/fs/cgroup/user.slice/job/memory.max": "6442450944\n",
        "sys/fs/cgroup/user.slice/memory.max": "8589934592\n",
      }, 6442450944, "sys/fs/cgroup/user.slice/job/memory.max"],
      ["v1", "5:cpu,cpuacct:/other\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n", {
        "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "4294967296\n",
        "sys/fs/cgroup/memory/docker/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
      }, 4294967296, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"],
    ];
    for (const [name, procSelfCgroup, files, bytes, file] of cases) {
      const root = fakeRoot(name, procSelfCgroup, files);
      expect(cgroupMemoryLimit(root), name).toEqual({ bytes, file: path.join(root, file) });
    }
  });

  it("a container whose own cgroup is mounted as the root; v1 and v2 side by side take the smaller; none at all is null", () => {
    const container = fakeRoot("namespaced", "0::/kubepods/pod1/ctr\n", { "sys/fs/cgroup/memory.max": "2147483648\n" });
    expect(cgroupMemoryLimit(container)?.bytes).toBe(2147483648);
    const hybrid = fakeRoot("hybrid", "4:memory:/a\n0::/a\n", { "sys/fs/cgroup/memory/a/memory.limit_in_bytes": "3000000000\n", "sys/fs/cgroup/unified/a/memory.max": "2000000000\n" });
    expect(cgroupMemoryLimit(hybrid)?.bytes).toBe(2000000000);
    expect(cgroupMemoryLimit(fakeRoot("unlimited", "0::/\n", { "sys/fs/cgroup/memory.max": "max\n" }))).toBeNull();
    expect(cgroupMemoryLimit(path.join(scratch, "no-such-root"))).toBeNull();
  });

  it("2 agents of a 0.36B shape are refused in a 4 GB container, naming its limit file", () => {
    const root = fakeRoot("small", "0::/job\n", { "sys/fs/cgroup/job/memory.max": `${4 * 2 ** 30}\n` });
    const shape = modelShape(QWEN_036, "config.json")!;
    const plan = { models: [0, 1].map(() => ({ shape, device: "cpu", role: "actor" as const, trained: true, loaded: false })), dtype: "float32", precision: "auto" as const, numGenerations: 2, maxNewTokens: 8, promptTokens: 16, processBytes: 0 };
    expect(availableMemory(root)).toEqual({ bytes: 4 * 2 ** 30, what: `this container's memory limit of 4.29 GB (${path.join(root, "sys/fs/cgroup/job/memory.max")})` });
    expect(() => checkMemoryPlan(plan, undefined, () => availableMemory(root))).toThrow(/this run would hold at least 11\.\d GB on cpu, more than this container's memory limit of 4\.29 GB \(.*job\/memory\.max\)/);
  });
});

describe("the rollout's rows", () => {
  const tiny = path.join(scratch, "tiny");
  beforeAll(() => createTinyModel(tiny, { seed: 3, hiddenSize: 32, numLayers: 1, vocabSize: 300 }));

  it("count the KV cache of each row's prompt and completion, the prompt measured on the dataset's first items", async () => {
    // Measured on this shape, 2 agents of 4 new tokens: 2000 rows peaked at 0.42 GB and 8000 at 0.72 GB (estimated
    // 0.39 and 0.67 GB; 0.09 GB for 8000 before), so 10^5 rows of 8 tokens need over 6 GB: a 6 GB cgroup once let
    // them through and was OOM-killed.
    const formatters = coverVowelsFormatters((messages) => messages.map((m) => m.content).join("\n"));
    const refused = MAGRPOTrainer.create({
      agents: [tiny, tiny], rewardFunc: coverVowelsRewardFunc, formatters, trainDataset: coverVowelsDataset(2), quiet: true, outputDir: path.join(scratch, "out"),
      memoryLimitBytes: 6 * GB, config: { numTurns: 1, numGenerations: 100_000, maxNewTokens: 8 },
    });
    await expect(refused).rejects.toThrow(/2 × rollout generation: numGenerations 100000 × \(prompt [1-9]\d+ \+ maxNewTokens 8 tokens\) × KV cache of 1 layers \(and one layer's copy while it grows\), \+ float32 logits over 300 tokens = 5\.\d\d GB/);
    await expect(refused).rejects.toThrow(/this process before loading \(Node\.js, libtorch, the datasets\) = \d\.\d\d GB/);
  });

  it("the update's layer inputs count where they are the larger phase", () => {
    // A wide model with few KV heads: the rows' hidden states outweigh their KV cache.
    const shape = modelShape({ hidden_size: 4096, num_hidden_layers: 2, num_attention_heads: 32, num_key_value_heads: 1, vocab_size: 100 }, "wide")!;
    const cpu = estimateMemory({ models: [{ shape, device: "cpu", role: "actor", trained: true, loaded: true }], dtype: "float32", precision: "auto", numGenerations: 10, maxNewTokens: 10, promptTokens: 90, processBytes: 0 }).get("cpu")!;
    const gradients = 3 * 4 * (100 * 4096 + 2 * (2 * 4096 * 32 * 128 + 2 * 4096 * 128 + 3 * 4096 * 4 * 4096));
    expect(cpu.total - gradients).toBe(10 * 100 * 2 * 4096 * 4 + 10 * 10 * 100 * 4);
    expect(cpu.lines[1]).toMatch(/rollout update: numGenerations 10 × \(prompt 90 \+ maxNewTokens 10 tokens\) × 2 layer inputs of 4096/);
  });
});
