// The sandbox's two Python programs, the grader (the sandbox's first process) and the candidate (the process that
// runs the model's code), from the real files in ./python/: each is codec.py and timer.py, then its own file, run as
// one program with `python -I -c` (the sandbox shows the interpreter only /usr, so the files cannot be imported
// there). `npm run build:ts` copies ./python/ beside the compiled module, so the same relative path serves the source
// tree (tsx, vitest) and the installed package.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The files each program is joined from, in order. */
export const PROGRAM_FILES = {
  grader: ["codec.py", "timer.py", "grader.py"],
  candidate: ["codec.py", "timer.py", "candidate.py"],
} as const;

/** The directory the sandbox's Python files are read from. */
export const PYTHON_DIR = fileURLToPath(new URL("./python/", import.meta.url));

const programs = new Map<keyof typeof PROGRAM_FILES, string>();

/** The source of one program, read once. */
export function pythonProgram(name: keyof typeof PROGRAM_FILES): string {
  let source = programs.get(name);
  if (source === undefined) {
    source = PROGRAM_FILES[name].map(readPythonFile).join("\n");
    programs.set(name, source);
  }
  return source;
}

function readPythonFile(file: string): string {
  const path = PYTHON_DIR + file;
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`the sandbox's Python file ${path} cannot be read (${(error as Error).message}); a build of dist/ must copy src/sandbox/python there (npm run build:ts)`);
  }
}
