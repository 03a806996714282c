// Part of `npm run build:ts`: the sandbox's Python programs (src/sandbox/python) go beside the compiled sandbox module
// (dist/sandbox/python), where src/sandbox/programs.ts reads them in the installed package as it does in the source tree.
import { cpSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const target = `${root}dist/sandbox/python`;
rmSync(target, { recursive: true, force: true });
cpSync(`${root}src/sandbox/python`, target, { recursive: true, filter: (path) => !path.includes("__pycache__") });
