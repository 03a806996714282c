// The rows' harness: a time budget for the whole run and for each row, rows that survive any other's failure and are
// written to the JSON file as each ends (a run cut short still returns its table), fresh Node and Python processes
// that end within the row's time, and the comparisons the rows share.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const NEEDS_GPU = "needs a CUDA device (this is the CPU fallback)";

class RowTimeout extends Error {}

/**
 * The run: its device, its deadline (GPU_CHECK_DEADLINE, epoch seconds, set by gpu-check.sh from the command's own
 * limit; 480 s from now when run by hand) and its rows.
 */
export class Harness {
  constructor(device, outFile, env = process.env) {
    this.device = device;
    this.gpu = device.startsWith("cuda");
    this.outFile = outFile;
    this.deadline = env.GPU_CHECK_DEADLINE ? Number(env.GPU_CHECK_DEADLINE) * 1000 : Date.now() + 480_000;
    this.rowDeadline = this.deadline;
    this.rows = [];
    this.runtime = null;
  }

  /** Seconds left before the run's deadline. */
  secondsLeft() {
    return Math.max(0, (this.deadline - Date.now()) / 1000);
  }

  /** Milliseconds left for the row running now (a child process or a Python run gets no more). */
  rowMsLeft() {
    return Math.max(1000, this.rowDeadline - Date.now());
  }

  save() {
    writeFileSync(this.outFile, `${JSON.stringify({ device: this.device, runtime: this.runtime, rows: this.rows }, null, 2)}\n`);
  }

  /**
   * Runs one row. fn returns { ok, detail, ...values } or { skip: reason }; a throw is a FAIL with its first line.
   * estimate: { gpu, cpu } seconds; a row whose estimate exceeds the time left SKIPs, and one that runs past
   * max(3 × estimate, estimate + 60) s is a FAIL (its work may still be running: later rows say so by their times). The
   * margin is wide because a CPU fallback on a busy CI machine runs several times slower than on a quiet one.
   */
  async check(name, fn, { gpuOnly = false, estimate = { gpu: 10, cpu: 10 } } = {}) {
    const started = Date.now();
    const expected = this.gpu ? estimate.gpu : estimate.cpu;
    let row;
    if (gpuOnly && !this.gpu) {
      row = { name, status: "SKIP", detail: NEEDS_GPU };
    } else if (expected > this.secondsLeft()) {
      row = { name, status: "SKIP", detail: `estimated ${expected} s, ${this.secondsLeft().toFixed(0)} s left of the run's budget` };
    } else {
      const limitMs = Math.min(this.secondsLeft(), Math.max(3 * expected, expected + 60)) * 1000;
      this.rowDeadline = started + limitMs;
      let timer;
      const overrun = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new RowTimeout(`ran past its ${(limitMs / 1000).toFixed(0)} s budget (estimate ${expected} s)`)), limitMs);
      });
      const work = Promise.resolve().then(fn);
      work.catch(() => {}); // a row abandoned at its budget may fail later: that is not an unhandled rejection
      try {
        const { ok, skip, detail, ...values } = await Promise.race([work, overrun]);
        row = skip ? { name, status: "SKIP", detail: skip, ...values } : { name, status: ok ? "PASS" : "FAIL", detail, ...values };
      } catch (error) {
        const message = String(error?.message ?? error).split("\n")[0];
        row = { name, status: "FAIL", detail: error instanceof RowTimeout ? message : `threw: ${message}` };
      } finally {
        clearTimeout(timer);
        this.rowDeadline = this.deadline;
      }
    }
    row.seconds = (Date.now() - started) / 1000;
    this.rows.push(row);
    this.save();
    console.log(`gpu-check: ${row.status} ${name}: ${row.detail} (${row.seconds.toFixed(1)} s)`);
  }

  /** A script run in a fresh Node process (ES module, dist/ importable as DIST); its last stdout line parsed as JSON. */
  child(script, { env = {} } = {}) {
    const code = `const DIST = ${JSON.stringify(path.join(root, "dist"))};\n${script}`;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
      encoding: "utf8", timeout: this.rowMsLeft(), env: { ...process.env, ...env }, maxBuffer: 64 * 2 ** 20,
    });
    return { status: run.status, signal: run.signal, result: lastJsonLine(run.stdout ?? ""), stderr: run.stderr ?? "" };
  }

  /** The failure of a child run, or null: exit status or signal and the last line of its stderr. */
  childFailure(run) {
    if (run.status === 0 && run.result !== null) return null;
    return `exit ${run.status ?? run.signal}: ${run.stderr.trim().split("\n").at(-1)}`;
  }

  /** A Python script's last stdout line as JSON (python3, or PYTHON); throws with its last stderr line. */
  python(script, args = []) {
    const run = spawnSync(process.env.PYTHON ?? "python3", ["-c", script, ...args], { encoding: "utf8", timeout: this.rowMsLeft(), maxBuffer: 64 * 2 ** 20 });
    const result = lastJsonLine(run.stdout ?? "");
    if (run.status !== 0 || result === null) throw new Error((run.stderr ?? "").trim().split("\n").at(-1) || `python exited with ${run.status ?? run.signal}`);
    return result;
  }

  /** The table on stdout, the JSON file written; the exit status: 1 when a row FAILed. */
  finish() {
    const width = Math.max(...this.rows.map((r) => r.name.length));
    console.log(`\n${"check".padEnd(width)}  result  seconds  detail`);
    for (const r of this.rows) console.log(`${r.name.padEnd(width)}  ${r.status.padEnd(6)}  ${r.seconds.toFixed(1).padStart(7)}  ${r.detail}`);
    this.save();
    console.log(`gpu-check: wrote ${this.outFile}`);
    return this.rows.some((r) => r.status === "FAIL") ? 1 : 0;
  }
}

function lastJsonLine(stdout) {
  try {
    return JSON.parse(stdout.trim().split("\n").at(-1) ?? "");
  } catch {
    return null; // not JSON: the caller reads the status and stderr
  }
}

export function relativeError(a, b) {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num / Math.max(den, 1e-30));
}

export function maxAbsDiff(a, b, keep = () => true) {
  let worst = 0;
  for (let i = 0; i < a.length; i++) if (keep(i)) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

export const hasNaN = (a) => a.some((x) => Number.isNaN(x));

/** A small pure-JS safetensors reader for the golden fixtures (F32/F64/I64/I32), independent of the addon's reader. */
export function readSafetensors(file) {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  const out = new Map();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [begin, end] = entry.data_offsets;
    const view = new DataView(bytes.buffer, bytes.byteOffset + 8 + headerLength + begin, end - begin);
    const count = entry.shape.reduce((a, b) => a * b, 1);
    const data = new Float64Array(count);
    const read = { F32: (i) => view.getFloat32(i * 4, true), F64: (i) => view.getFloat64(i * 8, true),
      I64: (i) => Number(view.getBigInt64(i * 8, true)), I32: (i) => view.getInt32(i * 4, true) }[entry.dtype];
    if (!read) throw new Error(`${file}: dtype ${entry.dtype} not handled`);
    for (let i = 0; i < count; i++) data[i] = read(i);
    out.set(name, { shape: entry.shape, data });
  }
  return out;
}
