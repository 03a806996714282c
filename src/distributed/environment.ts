// The torchrun environment: a process learns its place in a data-parallel job from RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR and MASTER_PORT (set by `comlrl launch`, torchrun, or a cluster's scheduler script), plus comlrl's
// own COMLRL_DIST_TIMEOUT and Gloo's GLOO_SOCKET_IFNAME. A partial or malformed environment is an error naming the
// variable; no environment at all means one process.

/** A data-parallel job's environment, read from torchrun's variables (readDistributedEnvironment). */
export interface DistributedEnvironment {
  /** This process's rank (RANK), 0 … worldSize − 1. */
  rank: number;
  /** Processes in the job (WORLD_SIZE). */
  worldSize: number;
  /** This process's rank on its machine (LOCAL_RANK). */
  localRank: number;
  /** Rank 0's address (MASTER_ADDR). */
  masterAddr: string;
  /** Rank 0's rendezvous port (MASTER_PORT). */
  masterPort: number;
  /** How long any collective (and joining the group) may wait for a peer before it fails. */
  timeoutMs: number;
  /** The network interface Gloo uses (GLOO_SOCKET_IFNAME); null picks loopback for a loopback master, else the host's address. */
  interface: string | null;
}

/** A torchrun environment that is partial or malformed; the message names the variable. */
export class DistributedEnvironmentError extends Error {
  /** Always "DistributedEnvironmentError". */
  override name = "DistributedEnvironmentError";
}

/** torch.distributed's default collective timeout. */
export const DEFAULT_TIMEOUT_SECONDS = 1800;

const REQUIRED = ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"] as const;

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number {
  const raw = env[name]!;
  const value = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new DistributedEnvironmentError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** The job this process belongs to, or null when none of the torchrun variables is set. */
export function readDistributedEnvironment(env: NodeJS.ProcessEnv = process.env): DistributedEnvironment | null {
  const present = REQUIRED.filter((name) => env[name] !== undefined && env[name] !== "");
  if (present.length === 0) return null;
  const missing = REQUIRED.filter((name) => !present.includes(name));
  if (missing.length > 0) {
    throw new DistributedEnvironmentError(`${missing.join(", ")} must be set beside ${present.join(", ")} (start the job with comlrl launch or torchrun)`);
  }
  const worldSize = integer(env, "WORLD_SIZE", 1, 1 << 20);
  const rank = integer(env, "RANK", 0, worldSize - 1);
  const localRank = env.LOCAL_RANK ? integer(env, "LOCAL_RANK", 0, worldSize - 1) : rank;
  const timeoutSeconds = env.COMLRL_DIST_TIMEOUT ? Number(env.COMLRL_DIST_TIMEOUT) : DEFAULT_TIMEOUT_SECONDS;
  if (!(timeoutSeconds > 0) || !Number.isFinite(timeoutSeconds)) {
    throw new DistributedEnvironmentError(`COMLRL_DIST_TIMEOUT must be a positive number of seconds, got ${JSON.stringify(env.COMLRL_DIST_TIMEOUT)}`);
  }
  const masterAddr = env.MASTER_ADDR!.trim();
  return {
    rank,
    worldSize,
    localRank,
    masterAddr,
    masterPort: integer(env, "MASTER_PORT", 1, 65535),
    timeoutMs: Math.ceil(timeoutSeconds * 1000),
    interface: env.GLOO_SOCKET_IFNAME?.trim() || null,
  };
}

/**
 * This process's local rank in its data-parallel job: the given context's, else the torchrun environment's; 0 when
 * it belongs to none (one process).
 */
export function localRankOf(given: { readonly localRank: number } | null | undefined, env: NodeJS.ProcessEnv = process.env): number {
  return given?.localRank ?? readDistributedEnvironment(env)?.localRank ?? 0;
}
