// node-llama-cpp, installed outside the project by scripts/fetch-node-llama-cpp.sh, for the tests that run exported
// GGUF files in llama.cpp. Absent, those tests skip and say why.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** The parts of node-llama-cpp's API the tests use. */
export interface NodeLlamaCpp {
  getLlama(options: { gpu: false; build: "never"; logLevel: "warn" }): Promise<{
    loadModel(options: { modelPath: string }): Promise<LlamaModel>;
  }>;
  readGgufFileInfo(path: string): Promise<{ metadata: { general: { architecture: string }; tokenizer: { chat_template?: string; ggml: { pre?: string } } } }>;
}

interface LlamaModel {
  tokenize(text: string, specialTokens: boolean): number[];
  createContext(options: { contextSize: number; sequences: 1; threads: number }): Promise<{
    getSequence(): { evaluate(tokens: number[], options: { temperature: 0; yieldEogToken: true }): AsyncGenerator<number> };
    dispose(): Promise<void>;
  }>;
  dispose(): Promise<void>;
}

const dir = process.env.COMLRL_NODE_LLAMA_CPP_DIR ?? path.join(homedir(), ".cache", "comlrl", "node-llama-cpp");
const entry = path.join(dir, "node_modules", "node-llama-cpp", "dist", "index.js");

/** Why the node-llama-cpp tests skip, or null when it is installed. */
export const nodeLlamaCppMissing: string | null = existsSync(entry)
  ? null
  : `node-llama-cpp is not installed in ${dir} (run scripts/fetch-node-llama-cpp.sh; COMLRL_NODE_LLAMA_CPP_DIR moves it)`;

/** node-llama-cpp's module. */
export async function importNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  return (await import(pathToFileURL(entry).href)) as NodeLlamaCpp;
}

/**
 * llama.cpp's greedy continuation of each prompt (token ids in, token ids out, no BOS added, end-of-generation tokens
 * kept and decoding continued past them), `count` tokens each, from the GGUF file at modelPath; and the ids its own
 * tokenizer, read from the file, gives each of `texts` (special tokens parsed, no BOS added).
 */
export async function llamaCppGreedy(modelPath: string, prompts: number[][], count: number, texts: string[] = []): Promise<{ greedy: number[][]; tokenized: number[][] }> {
  const { getLlama } = await importNodeLlamaCpp();
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "warn" });
  const model = await llama.loadModel({ modelPath });
  try {
    const tokenized = texts.map((text) => Array.from(model.tokenize(text, true)));
    const greedy: number[][] = [];
    for (const prompt of prompts) {
      // One thread: llama.cpp's workers spin at every barrier, which on a busy or small machine turns a second's work
      // into minutes (24 tokens of the tiny model: 56 s with its default 4 threads on 2 loaded cores, 0.1 s with 1).
      const context = await model.createContext({ contextSize: prompt.length + count + 8, sequences: 1, threads: 1 });
      const tokens: number[] = [];
      for await (const token of context.getSequence().evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
        tokens.push(token);
        if (tokens.length === count) break;
      }
      await context.dispose();
      greedy.push(tokens);
    }
    return { greedy, tokenized };
  } finally {
    await model.dispose();
  }
}

/** How many leading tokens two sequences share. */
export function agreeingPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}
