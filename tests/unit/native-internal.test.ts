// `native` is internal: the lint rule keeps the native handles of CausalLM, ValueHead and Optimizer inside
// src/models and src/native (a trainer that reaches for one fails lint), and the public entry point exports no
// binding handle type.
import { readFileSync } from "node:fs";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const REACH = "export const weights = (model: { native: { parameterNames(): unknown } }) => model.native.parameterNames();\n";
const DESTRUCTURE = "export const handle = ({ native }: { native: unknown }) => native;\n";

async function messages(code: string, filePath: string): Promise<string[]> {
  const [result] = await new ESLint().lintText(code, { filePath });
  return result.messages.map((m) => m.message);
}

describe("native handles stay below the model classes", () => {
  it("a trainer, a distributed module or the CLI that reads .native fails lint, by access or by destructuring", async () => {
    for (const file of ["src/trainers/reach.ts", "src/distributed/reach.ts", "src/cli/reach.ts"]) {
      expect(await messages(REACH, file), file).toContain("native handles are internal to src/models and src/native: use the model's own methods");
      expect(await messages(DESTRUCTURE, file), file).toContain("native handles are internal to src/models and src/native: use the model's own methods");
    }
  }, 60_000);

  it("src/models and src/native may", async () => {
    expect(await messages(REACH, "src/models/reach.ts")).toEqual([]);
    expect(await messages(REACH, "src/native/reach.ts")).toEqual([]);
  }, 60_000);

  it("the package's entry point exports nothing from the native binding", () => {
    expect(readFileSync("src/index.ts", "utf8")).not.toMatch(/native\/binding/);
  });
});
