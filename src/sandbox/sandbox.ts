// Runs model-written Python and its tests in a separate, contained process: under bubblewrap every namespace is
// unshared (no network, its own pids, no view of the machine's processes), only /usr is visible and read-only, the
// root and /dev are read-only, the only writable places are size-capped tmpfs (/tmp, the working dir, and /dev/shm), no
// user namespace can be made inside, where the machine allows it the whole run sits in a memory cgroup of its own
// (cgroup.ts), capabilities are dropped, and the process runs as "nobody" when we are root
// (so the process limit holds: the kernel does not apply RLIMIT_NPROC to root). Inside, the grader (python/grader.py) applies
// CPU, memory, process, file-size and open-file limits to itself and everything it starts, and runs the code in a
// process of its own (python/candidate.py) that sees only argument values and sends back return values, so the verdicts are
// out of the code's reach. A wall clock kills the whole process group, and with it the sandbox's pid namespace. One
// sandbox per completion runs all of its tests; a shared limit bounds how many run at once.
import { spawn } from "node:child_process";
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Readable } from "node:stream";
import { cgroupSupport, RunCgroup } from "./cgroup.js";
import { pythonProgram } from "./programs.js";
import { limiter } from "../util/limiter.js";

/** "bwrap": contained (the default); "none": runs the code directly on this machine, limits only, no isolation. */
export type SandboxMode = "bwrap" | "none";

/** Resource limits of one sandboxed run (defaults in runSandboxed). */
export interface SandboxLimits {
  /** RLIMIT_CPU. Default: the wall-clock limit, rounded up. */
  cpuSeconds: number;
  /**
   * Memory, bytes. Default 1 GiB. Under bwrap with a memory cgroup (see cgroup.ts) it bounds the whole run: every
   * process, file and shared segment together; it is also each process's RLIMIT_AS.
   */
  memoryBytes: number;
  /** RLIMIT_NPROC: processes and threads. Default 16. */
  processes: number;
  /** RLIMIT_FSIZE: the largest file the code may write, bytes. Default 16 MiB. */
  fileSizeBytes: number;
  /** RLIMIT_NOFILE. Default 64. */
  openFiles: number;
  /** Size of the tmpfs working dir /tmp (bwrap only), bytes. Default 64 MiB. */
  tmpfsBytes: number;
  /** Size of the tmpfs at /dev/shm (bwrap only), bytes. Default 16 MiB. */
  shmBytes: number;
}

/** How code is contained: the sandbox mode, the interpreter and the paths it may read. */
export interface SandboxOptions {
  /** "bwrap" (default): contained; "none": unconfined, an explicit opt-out. */
  mode?: SandboxMode;
  /** The interpreter; must lie under /usr or a path in readOnlyPaths. Default /usr/bin/python3. */
  python?: string;
  /** Extra host paths the sandbox sees read-only (for an interpreter outside /usr). */
  readOnlyPaths?: string[];
  /** The bubblewrap program. Default "bwrap", looked up in /usr/bin and /bin. */
  bwrap?: string;
}

/** One program and its tests for runSandboxed. */
export interface SandboxRequest extends SandboxOptions {
  /** Python source defining what the tests use. */
  code: string;
  /** Python statements, each run on its own after the code loads (typically one assert each). */
  tests: string[];
  /**
   * The function the tests call. An `assert` whose calls of it can be split out runs them in the code's process and
   * the rest in the grader, out of the code's reach; without it (or for a test that cannot be split) a test runs in
   * the code's process, where the code could forge its verdict, and is reported as in-process.
   */
  entryPoint?: string;
  /** Python the grader runs in the tests' namespace before splitting them (the problem's imports); never the code. */
  testSetup?: string;
  /** Each test's timeout, and the code's load timeout. Default 10 s. */
  testTimeoutMs?: number;
  /** After this many timed-out tests the rest are skipped. Default 3. */
  maxTimeouts?: number;
  /** Wall clock for the whole process. Default: every test and the load at their timeout, plus 2 s. */
  wallTimeoutMs?: number;
  /** Limits other than the defaults. */
  limits?: Partial<SandboxLimits>;
  /** Bytes of stdout and of stderr kept. Default 16 KiB. */
  outputLimitBytes?: number;
}

/** A test's outcome: passed, failed, timed out, skipped after too many timeouts, or not run. */
export type TestStatus = "pass" | "fail" | "timeout" | "skipped" | "not run";

/** One test's outcome in a SandboxResult. */
export interface TestResult {
  /** The test's source, as given. */
  test: string;
  /** How the test ended. */
  status: TestStatus;
  /** The Python exception's type name, when the test raised one. */
  errorType?: string;
  /** The exception's message, when the test raised one. */
  message?: string;
  /** The test ran in the code's own process (it could not be split), so the code could have forged its verdict. */
  inProcess: boolean;
}

/** What runSandboxed reports of a run: parsing, loading, each test's outcome, output and resources. */
export interface SandboxResult {
  /** False when the code does not parse; no test runs then. */
  syntaxOk: boolean;
  /** Where and why the code does not parse (when syntaxOk is false). */
  syntaxError?: {
    /** 1-based line of the error, when Python names one. */
    line: number | null;
    /** Column offset, when Python names one. */
    offset: number | null;
    /** Python's message. */
    message: string;
  };
  /** Set when the code parsed but raised (or timed out) while loading. */
  loadError?: {
    /** The exception's class name. */
    errorType: string;
    /** Its message. */
    message: string;
  };
  /** Tests that passed. */
  passed: number;
  /** Tests that failed (timeouts included). */
  failed: number;
  /** Tests that ran into their own timeout. */
  timeouts: number;
  /** Tests run in the code's own process (see TestResult.inProcess). */
  inProcess: number;
  /** Each test's outcome, in order. */
  results: TestResult[];
  /** The wall clock killed the process. */
  timedOut: boolean;
  /** The program's standard output (cut at outputLimitBytes). */
  stdout: string;
  /** Its standard error (cut at outputLimitBytes). */
  stderr: string;
  /** The sandbox's exit code (null when killed by a signal). */
  exitCode: number | null;
  /** The signal that ended it, if one did. */
  signal: string | null;
  /** Wall time of the run. */
  durationMs: number;
  /** The most memory the whole run held at once, bytes; null without a memory cgroup. */
  memoryPeakBytes: number | null;
  /** Why the process ended without reporting on every test (killed, crashed, a limit hit), when it did. */
  error?: string;
}

/** Code-executing rewards cannot run here (no bubblewrap, no user namespaces, an interpreter outside the sandbox); the message says why and how to fix it. */
export class SandboxUnavailableError extends Error {
  /** Always "SandboxUnavailableError". */
  override name = "SandboxUnavailableError";
}

const DEFAULT_PYTHON = "/usr/bin/python3";
const NOBODY = 65534;
const DEFAULT_MEMORY = 1 << 30;
const RUNNER_ENV = { PATH: "/usr/bin:/bin", LANG: "C.UTF-8", HOME: "/tmp", PYTHONDONTWRITEBYTECODE: "1", PYTHONHASHSEED: "0" };

// ---------------------------------------------------------------- bounded parallelism

let maxParallel = Math.max(1, availableParallelism());

/** How many sandboxed processes may run at once (default: the number of CPUs). */
export function setSandboxParallelism(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`sandbox parallelism must be a positive integer, got ${limit}`);
  maxParallel = limit;
}

const withSlot = limiter(() => maxParallel);

// ---------------------------------------------------------------- the command line

/** The root-level entries that merged-/usr systems make symlinks into /usr; others are bound read-only. */
const USR_ALIASES = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

function rootLayout(): string[] {
  const args = ["--ro-bind", "/usr", "/usr"];
  for (const entry of USR_ALIASES) {
    let stat;
    try {
      stat = lstatSync(entry);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push("--symlink", readlinkSync(entry), entry);
    else if (stat.isDirectory()) args.push("--ro-bind", entry, entry);
  }
  return args;
}

function bwrapArgs(python: string, readOnlyPaths: string[], limits: SandboxLimits): string[] {
  // Every writable place is a size-capped tmpfs (/tmp, /dev/shm); the root and /dev are remounted read-only, and no
  // user namespace can be made inside (a new one would bring capabilities to mount further tmpfs).
  return [
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--cap-drop", "ALL",
    ...rootLayout(),
    ...readOnlyPaths.flatMap((p) => ["--ro-bind", p, p]),
    "--proc", "/proc",
    "--dev", "/dev",
    "--size", String(limits.shmBytes),
    "--tmpfs", "/dev/shm",
    "--remount-ro", "/dev",
    "--size", String(limits.tmpfsBytes),
    "--tmpfs", "/tmp",
    "--remount-ro", "/",
    "--chdir", "/tmp",
    "--",
    python, ...pythonArgs(),
  ];
}

/** -I: no user site-packages, no PYTHON* variables, no cwd on sys.path. */
const pythonArgs = () => ["-I", "-c", pythonProgram("grader")];

/** Moves itself into the cgroup named by $0, then runs the rest of its arguments. */
const ENTER_CGROUP = 'echo 0 > "$0" && exec "$@"';
const SETPRIV = ["/usr/bin/setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "--"];

function command(mode: SandboxMode, options: SandboxOptions, limits: SandboxLimits, cgroup: RunCgroup | null) {
  const python = options.python ?? DEFAULT_PYTHON;
  if (mode === "none") return { file: python, args: pythonArgs(), dropToNobody: false };
  const asRoot = process.getuid?.() === 0;
  const bwrap = [options.bwrap ?? "bwrap", ...bwrapArgs(python, options.readOnlyPaths ?? [], limits)];
  if (!cgroup) return { file: bwrap[0], args: bwrap.slice(1), dropToNobody: asRoot };
  // The shell joins the cgroup before bwrap starts, so nothing of the run is ever outside it; as root it can write
  // the cgroup's files, and setpriv then drops to nobody as the spawn's uid option would.
  return { file: "/bin/sh", args: ["-c", ENTER_CGROUP, cgroup.procsFile, ...(asRoot ? SETPRIV : []), ...bwrap], dropToNobody: false };
}

// ---------------------------------------------------------------- one run

interface RawRun {
  events: Record<string, unknown>[];
  stdout: string;
  stderr: string;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  spawnError?: NodeJS.ErrnoException;
  durationMs: number;
  memoryPeakBytes: number | null;
  memoryLimitHit: boolean;
}

/** Keeps the first `limit` bytes of a stream and drains the rest, so a flood of output cannot block or bloat us. */
function capture(stream: Readable, limit: number): () => string {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = 0;
  stream.on("data", (chunk: Buffer) => {
    const room = limit - kept;
    if (room > 0) {
      chunks.push(chunk.subarray(0, room));
      kept += Math.min(room, chunk.length);
    }
    dropped += Math.max(0, chunk.length - Math.max(0, room));
  });
  return () => Buffer.concat(chunks).toString("utf8") + (dropped > 0 ? `\n[… ${dropped} more bytes dropped]` : "");
}

const OOM_POLL_MS = 20;

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // The group is already gone.
  }
}

async function runProcess(mode: SandboxMode, options: SandboxOptions, input: string, limits: SandboxLimits, wallTimeoutMs: number, outputLimit: number): Promise<RawRun> {
  const cgroups = cgroupSupport();
  const cgroup = mode === "bwrap" && cgroups.ok ? RunCgroup.create(cgroups.hierarchy, limits.memoryBytes) : null;
  try {
    const raw = await spawnRun(command(mode, options, limits, cgroup), input, wallTimeoutMs, outputLimit, cgroup ? () => cgroup.oomKilled() : undefined);
    return { ...raw, memoryPeakBytes: cgroup?.peakBytes() ?? null, memoryLimitHit: cgroup?.hitLimit() ?? false };
  } finally {
    await cgroup?.removeWhenEmpty();
  }
}

function spawnRun(
  { file, args, dropToNobody }: ReturnType<typeof command>,
  input: string,
  wallTimeoutMs: number,
  outputLimit: number,
  oomKilled?: () => boolean,
): Promise<Omit<RawRun, "memoryPeakBytes" | "memoryLimitHit">> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      cwd: "/",
      env: RUNNER_ENV,
      stdio: ["pipe", "pipe", "pipe", "pipe"],
      // Its own process group, so the wall clock can kill it and everything it started in one signal.
      detached: true,
      ...(dropToNobody ? { uid: NOBODY, gid: NOBODY } : {}),
    });
    const stdout = capture(child.stdout!, outputLimit);
    const stderr = capture(child.stderr!, outputLimit);
    let report = "";
    const reportStream = child.stdio[3] as Readable;
    reportStream.on("data", (chunk: Buffer) => {
      if (report.length < 1 << 20) report += chunk.toString("utf8");
    });
    let timedOut = false;
    let spawnError: NodeJS.ErrnoException | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, wallTimeoutMs);
    // One process killed at the memory limit ends the run: what its survivors report next is not a result.
    const oomWatch = oomKilled
      ? setInterval(() => {
          if (oomKilled()) killGroup(child.pid);
        }, OOM_POLL_MS)
      : undefined;
    child.on("error", (error: NodeJS.ErrnoException) => {
      spawnError = error;
    });
    child.stdin!.on("error", () => {
      // The process may exit before reading its request (a failed start); the exit status says why.
    });
    child.stdin!.end(input);
    child.on("close", (exitCode, signal) => {
      clearTimeout(timer);
      clearInterval(oomWatch);
      // The group may still hold processes that outlived the leader (only possible without the pid namespace).
      killGroup(child.pid);
      const events = report
        .split("\n")
        .filter((line) => line.trim())
        .flatMap((line) => {
          try {
            const event = JSON.parse(line) as unknown;
            return event && typeof event === "object" ? [event as Record<string, unknown>] : [];
          } catch {
            return [];
          }
        });
      resolve({ events, stdout: stdout(), stderr: stderr(), exitCode, signal, timedOut, spawnError, durationMs: performance.now() - started });
    });
  });
}

function defaultLimits(wallTimeoutMs: number, overrides: Partial<SandboxLimits> = {}): SandboxLimits {
  const limits: SandboxLimits = {
    cpuSeconds: Math.ceil(wallTimeoutMs / 1000),
    memoryBytes: DEFAULT_MEMORY,
    processes: 16,
    fileSizeBytes: 16 << 20,
    openFiles: 64,
    tmpfsBytes: 64 << 20,
    shmBytes: 16 << 20,
    ...overrides,
  };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value < 1) throw new RangeError(`sandbox limit ${name} must be a positive integer, got ${value}`);
  }
  return limits;
}

const rlimits = (limits: SandboxLimits) => ({
  RLIMIT_CPU: limits.cpuSeconds,
  RLIMIT_AS: limits.memoryBytes,
  RLIMIT_NPROC: limits.processes,
  RLIMIT_FSIZE: limits.fileSizeBytes,
  RLIMIT_NOFILE: limits.openFiles,
  RLIMIT_CORE: 0,
});

function positiveOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}

interface GraderRequest {
  code: string;
  tests: string[];
  entryPoint?: string;
  testSetup?: string;
  testTimeoutMs: number;
  maxTimeouts: number;
  limits: SandboxLimits;
}

/** The grader's request, on its stdin (see python/grader.py). */
function graderInput(r: GraderRequest): string {
  return JSON.stringify({
    code: r.code,
    tests: r.tests,
    entryPoint: r.entryPoint ?? null,
    testSetup: r.testSetup ?? "",
    testTimeout: r.testTimeoutMs / 1000,
    maxTimeouts: r.maxTimeouts,
    limits: rlimits(r.limits),
    candidate: pythonProgram("candidate"),
  });
}

function assemble(request: SandboxRequest, raw: RawRun): SandboxResult {
  const syntax = raw.events.find((e) => e.kind === "syntax");
  const load = raw.events.find((e) => e.kind === "load");
  const results: TestResult[] = request.tests.map((test) => ({ test, status: "not run", inProcess: false }));
  for (const event of raw.events) {
    if (event.kind !== "test" || typeof event.index !== "number" || !results[event.index] || results[event.index].status !== "not run") continue;
    results[event.index] = {
      test: results[event.index].test,
      status: event.status as TestStatus,
      ...(typeof event.errorType === "string" ? { errorType: event.errorType } : {}),
      ...(typeof event.message === "string" ? { message: event.message } : {}),
      inProcess: event.inProcess === true,
    };
  }
  const syntaxOk = syntax?.ok === true;
  const loaded = load?.ok === true;
  const reportedAll = syntax !== undefined && (!syntaxOk || load !== undefined) && (!loaded || results.every((r) => r.status !== "not run"));
  let error: string | undefined;
  if (!reportedAll) {
    error = raw.timedOut
      ? `killed after the wall-clock limit`
      : raw.memoryLimitHit
        ? `killed at the memory limit (${request.limits?.memoryBytes ?? DEFAULT_MEMORY} bytes for the whole run)`
      : `the process ended (exit ${raw.exitCode ?? "none"}, signal ${raw.signal ?? "none"}) before reporting every test${raw.stderr ? `: ${raw.stderr.trim().split("\n").at(-1)}` : ""}`;
    for (const r of results) if (r.status === "not run") Object.assign(r, { errorType: raw.timedOut ? "WallTimeout" : "ProcessEnded", message: error });
  }
  return {
    syntaxOk,
    ...(syntax && !syntaxOk
      ? { syntaxError: { line: (syntax.line as number | null) ?? null, offset: (syntax.offset as number | null) ?? null, message: String(syntax.message ?? "") } }
      : {}),
    ...(load && !loaded ? { loadError: { errorType: String(load.errorType), message: String(load.message ?? "") } } : {}),
    passed: results.filter((r) => r.status === "pass").length,
    failed: results.filter((r) => r.status !== "pass").length,
    timeouts: results.filter((r) => r.status === "timeout").length,
    inProcess: results.filter((r) => r.inProcess).length,
    results,
    timedOut: raw.timedOut,
    stdout: raw.stdout,
    stderr: raw.stderr,
    exitCode: raw.exitCode,
    signal: raw.signal,
    durationMs: raw.durationMs,
    memoryPeakBytes: raw.memoryPeakBytes,
    ...(error ? { error } : {}),
  };
}

/**
 * Runs `code` then each of `tests` in one contained Python process and reports every test's outcome. Whatever the
 * code does — loop, fork, allocate, flood output, write or read outside its tmpfs, open sockets — ends as failed
 * tests, never as an exception here; a sandbox that cannot start is a SandboxUnavailableError.
 */
export async function runSandboxed(request: SandboxRequest): Promise<SandboxResult> {
  const mode = request.mode ?? "bwrap";
  if (mode !== "bwrap" && mode !== "none") throw new Error(`sandbox mode must be "bwrap" or "none", got ${JSON.stringify(mode)}`);
  if (typeof request.code !== "string") throw new TypeError("sandbox request: code must be a string");
  if (!Array.isArray(request.tests) || request.tests.some((t) => typeof t !== "string")) throw new TypeError("sandbox request: tests must be a list of strings");
  if (request.entryPoint !== undefined && !/^[A-Za-z_]\w*$/.test(request.entryPoint)) throw new TypeError(`sandbox request: entryPoint must be a Python name, got ${JSON.stringify(request.entryPoint)}`);
  if (request.testSetup !== undefined && typeof request.testSetup !== "string") throw new TypeError("sandbox request: testSetup must be a string");
  const testTimeoutMs = positiveOption("testTimeoutMs", request.testTimeoutMs, 10_000);
  const maxTimeouts = positiveOption("maxTimeouts", request.maxTimeouts, 3);
  const wallTimeoutMs = positiveOption("wallTimeoutMs", request.wallTimeoutMs, testTimeoutMs * (request.tests.length + 1) + 2000);
  const outputLimit = positiveOption("outputLimitBytes", request.outputLimitBytes, 16 << 10);
  const limits = defaultLimits(wallTimeoutMs, request.limits);
  if (mode === "bwrap") await requireSandbox(request);
  const input = graderInput({ code: request.code, tests: request.tests, entryPoint: request.entryPoint, testSetup: request.testSetup, testTimeoutMs, maxTimeouts, limits });
  const raw = await withSlot(() => runProcess(mode, request, input, limits, wallTimeoutMs, outputLimit));
  if (raw.spawnError) throw new SandboxUnavailableError(`could not start ${mode === "none" ? request.python ?? DEFAULT_PYTHON : request.bwrap ?? "bwrap"}: ${raw.spawnError.message}`);
  return assemble(request, raw);
}

// ---------------------------------------------------------------- the probe

/** Whether sandboxed runs work here (checkSandbox): the mode and its start-up cost, or why not and how to fix it. */
export type SandboxCheck =
  | {
      /** Sandboxed runs work. */
      ok: true;
      /** The mode checked. */
      mode: SandboxMode;
      /** Milliseconds a trivial sandboxed run took. */
      overheadMs: number;
      /** How a run's memory is bounded: "cgroup" (memoryBytes for the whole run) or why only per-process limits hold. */
      memoryBound:
        | {
            /** memoryBytes bounds the whole run through a memory cgroup. */
            kind: "cgroup";
          }
        | {
            /** Only the per-process limits hold. */
            kind: "per-process";
            /** Why no memory cgroup is available. */
            reason: string;
          };
    }
  | {
      /** Sandboxed runs do not work. */
      ok: false;
      /** The mode checked. */
      mode: SandboxMode;
      /** What fails. */
      reason: string;
      /** What to do about it. */
      fix: string;
    };

const probes = new Map<string, Promise<SandboxCheck>>();

function explain(mode: SandboxMode, python: string, raw: RawRun): { reason: string; fix: string } {
  const stderr = raw.stderr.trim();
  // A missing program: spawn's own error, or (bwrap started through the shell that joins the cgroup) the shell's.
  if (raw.spawnError?.code === "ENOENT" || (mode === "bwrap" && /exec: .*: not found|setpriv: failed to execute/.test(stderr))) {
    return mode === "bwrap"
      ? { reason: "bubblewrap (bwrap) is not installed or not on PATH", fix: "install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)" }
      : { reason: `the interpreter ${python} does not exist`, fix: "install Python 3 or pass the interpreter's path as the python option" };
  }
  if (raw.spawnError) return { reason: `could not start ${mode === "bwrap" ? "bwrap" : python}: ${raw.spawnError.message}`, fix: "check that the program exists and is executable" };
  if (/namespace|uid map|setting up uid|Operation not permitted|Permission denied/i.test(stderr) && /bwrap/.test(stderr)) {
    return {
      reason: `bwrap cannot create the sandbox's user namespace: ${stderr}`,
      fix:
        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also " +
        "sysctl kernel.apparmor_restrict_unprivileged_userns=0); in Docker run the container with --security-opt seccomp=unconfined " +
        "--security-opt apparmor=unconfined (or --privileged). Or, knowing the code then runs unconfined on this machine, set sandbox: \"none\"",
    };
  }
  if (/execvp|No such file/i.test(stderr)) {
    return { reason: `the sandbox could not run ${python}: ${stderr}`, fix: "use an interpreter under /usr (python option) or add its install directory to readOnlyPaths" };
  }
  return { reason: `the sandbox probe failed (exit ${raw.exitCode}, signal ${raw.signal}${raw.timedOut ? ", timed out" : ""}): ${stderr || "no output"}`, fix: "run the bwrap command by hand to see why" };
}

async function probe(mode: SandboxMode, options: SandboxOptions): Promise<SandboxCheck> {
  const python = options.python ?? DEFAULT_PYTHON;
  if (mode === "bwrap") {
    let real: string;
    try {
      real = realpathSync(python);
    } catch {
      return { ok: false, mode, reason: `the interpreter ${python} does not exist`, fix: "install Python 3 (apt-get install python3) or pass its path as the python option" };
    }
    const visible = ["/usr", ...(options.readOnlyPaths ?? [])];
    if (!visible.some((dir) => real === dir || real.startsWith(dir.endsWith("/") ? dir : `${dir}/`))) {
      return { ok: false, mode, reason: `the interpreter ${python} (${real}) lies outside /usr, so the sandbox cannot see it`, fix: `use /usr/bin/python3, or add its install directory to readOnlyPaths` };
    }
  }
  const input = graderInput({ code: "def f(x):\n    return x", tests: ["assert f(1) == 1"], entryPoint: "f", testTimeoutMs: 5000, maxTimeouts: 1, limits: defaultLimits(10_000) });
  const raw = await runProcess(mode, options, input, defaultLimits(10_000), 10_000, 4096);
  // The probe's assert must be judged by the grader: a sandbox that cannot split it would leave every verdict forgeable.
  const passed = raw.events.some((e) => e.kind === "test" && e.status === "pass" && e.inProcess === false);
  if (!passed) return { ok: false, mode, ...explain(mode, python, raw) };
  const cgroups = cgroupSupport();
  const memoryBound = mode === "bwrap" && cgroups.ok ? { kind: "cgroup" as const } : { kind: "per-process" as const, reason: cgroups.ok ? "sandbox none uses no cgroup" : cgroups.reason };
  return { ok: true, mode, overheadMs: raw.durationMs, memoryBound };
}

/** Whether code can run in the sandbox here, and if not, why and how to fix it. The answer is cached per setting. */
export function checkSandbox(options: SandboxOptions = {}): Promise<SandboxCheck> {
  const mode = options.mode ?? "bwrap";
  const key = JSON.stringify([mode, options.python ?? DEFAULT_PYTHON, options.readOnlyPaths ?? [], options.bwrap ?? "bwrap"]);
  let check = probes.get(key);
  if (!check) {
    check = probe(mode, options);
    probes.set(key, check);
  }
  return check;
}

/** Throws a SandboxUnavailableError that says why and how to fix it unless the sandbox works. */
export async function requireSandbox(options: SandboxOptions = {}): Promise<void> {
  const check = await checkSandbox(options);
  if (!check.ok) {
    throw new SandboxUnavailableError(`code-executing rewards refuse to run: ${check.reason}. Fix: ${check.fix}.`);
  }
}
