// Device specs and how one machine reads them (CoMLRL spec §5.4), the parts trainers/placement.ts plans from. Pure:
// what CUDA offers is passed in as CudaFacts, so placement is decided and tested without loading libtorch. Get the
// facts from runtimeInfo(): { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount }.
import { ConfigError, field, reject, show, type FieldSpec } from "./fields.js";

/** "cpu", "cuda", "cuda:N", "auto", or a list of devices (one for all, or one per model). */
export type DeviceSpec = string | readonly string[];

/** What the machine offers, as runtimeInfo() reports it; placement is decided from these alone. */
export interface CudaFacts {
  /** Whether the loaded libtorch can use CUDA on this machine. */
  readonly cudaAvailable: boolean;
  /** Visible CUDA devices (0 without CUDA). */
  readonly deviceCount: number;
}

/** A device name in canonical spelling ("cuda" means device 0, as in torch), or undefined if it is not one. */
function deviceName(raw: string): string | undefined {
  const name = raw.trim().toLowerCase();
  if (name === "cuda") return "cuda:0";
  return /^(cpu|cuda:\d+)$/.test(name) ? name : undefined;
}

/**
 * One spelling per device ("cuda" and " CUDA:0" are "cuda:0"), so that a model loaded on "cuda" shares cuda:0's lane
 * and stream with the rest and optimizers and heads see one device; a name that is no device is returned as given,
 * for the native side to refuse by name.
 */
export function canonicalDevice(raw: string): string {
  return deviceName(raw) ?? raw;
}

/** A device the machine described by facts actually has. */
function availableDevice(raw: string, kind: string, facts: CudaFacts): string {
  const device = deviceName(raw);
  if (device === undefined) throw new ConfigError(`${kind} has an invalid device ${show(raw)}: use "cpu", "cuda" or "cuda:N"`, kind);
  if (device === "cpu") return device;
  if (!facts.cudaAvailable) throw new ConfigError(`${kind} asks for ${device} but CUDA is not available`, kind);
  if (Number(device.slice("cuda:".length)) >= facts.deviceCount) {
    throw new ConfigError(`${kind} asks for ${device} but only ${facts.deviceCount} CUDA device(s) are visible`, kind);
  }
  return device;
}

/**
 * The config field for a device spec: null (the default) means auto; lists are copied and frozen. Devices are spelt
 * canonically except an index-less "cuda", kept as written: under ddp it means each rank's own GPU (forRank),
 * elsewhere cuda:0.
 */
export function deviceSpec(): FieldSpec<DeviceSpec | null> {
  const valid = (raw: unknown): string =>
    (typeof raw === "string" ? (isIndexlessCuda(raw) ? "cuda" : deviceName(raw)) : undefined) ?? reject(`must name devices as "cpu", "cuda" or "cuda:N"`);
  return field<DeviceSpec | null>((raw) => {
    if (raw === null) return null;
    if (typeof raw === "string") return raw.trim().toLowerCase() === "auto" ? "auto" : valid(raw);
    if (!Array.isArray(raw)) reject("must be a device string, a list of devices, or null");
    if (raw.length === 0) reject("must not be an empty list");
    return Object.freeze(raw.map(valid));
  }, null, '"cpu" | "cuda" | "cuda:N" | "auto" | list of devices | null');
}

function isIndexlessCuda(raw: string): boolean {
  return raw.trim().toLowerCase() === "cuda";
}

export function isAuto(spec: DeviceSpec | null | undefined): spec is "auto" | null | undefined {
  return spec == null || (typeof spec === "string" && spec.trim().toLowerCase() === "auto");
}

/**
 * n devices for n models. Auto (null or "auto"): no CUDA ⇒ cpu for all; fewer GPUs than models ⇒ all on cuda:0;
 * else cuda:0…n−1. A string is used for all; a list of 1 is broadcast; a list of n gives one each.
 */
export function resolveDevices(spec: DeviceSpec | null | undefined, n: number, kind: string, facts: CudaFacts): string[] {
  if (isAuto(spec)) {
    if (!facts.cudaAvailable) return Array<string>(n).fill("cpu");
    if (facts.deviceCount < n) return Array<string>(n).fill("cuda:0");
    return Array.from({ length: n }, (_, i) => `cuda:${i}`);
  }
  if (typeof spec === "string") return Array<string>(n).fill(availableDevice(spec, kind, facts));
  if (spec.length === 0) throw new ConfigError(`${kind} must not be an empty list`, kind);
  if (spec.length !== 1 && spec.length !== n) throw new ConfigError(`${kind} length (${spec.length}) must be 1 or ${n}`, kind);
  const devices = spec.map((d) => availableDevice(d, kind, facts));
  return spec.length === 1 ? Array<string>(n).fill(devices[0]!) : devices;
}

/** One device from the first spec that is set (a string, or a list's first entry); auto when none is. */
export function resolveSingleDevice(
  specs: readonly (DeviceSpec | null | undefined)[],
  facts: CudaFacts,
  kind = "device",
): string {
  const spec = specs.find((s) => s != null);
  if (isAuto(spec)) return resolveDevices(null, 1, kind, facts)[0]!;
  if (typeof spec === "string") return availableDevice(spec, kind, facts);
  if (spec.length === 0) throw new ConfigError(`${kind} must not be an empty list`, kind);
  return availableDevice(spec[0]!, kind, facts);
}

/**
 * A data-parallel rank's device when placement is auto: the GPU of its local rank, as torchrun jobs place ranks
 * (ranks past the GPU count share them round-robin; their collectives then run on Gloo, see DistributedContext);
 * cpu without CUDA.
 */
export function rankDevice(localRank: number, facts: CudaFacts): string {
  if (!facts.cudaAvailable || facts.deviceCount < 1) return "cpu";
  return `cuda:${localRank % facts.deviceCount}`;
}

/**
 * A device spec as one data-parallel rank reads it: an index-less "cuda" is the rank's own GPU (rankDevice), as a
 * config written for one GPU means on each rank. An explicit cuda:N other than the rank's own GPU is refused where the
 * rank has a GPU of its own: every rank would share cuda:N (and out of memory, or reduce over Gloo, see
 * DistributedContext). Auto is left to the caller.
 */
export function forRank(spec: DeviceSpec | null, kind: string, localRank: number, facts: CudaFacts): DeviceSpec | null {
  if (isAuto(spec)) return spec;
  const own = rankDevice(localRank, facts);
  const read = (entry: string): string => {
    if (isIndexlessCuda(entry)) return facts.cudaAvailable ? own : entry;
    const device = deviceName(entry);
    if (device !== undefined && device !== own && device.startsWith("cuda:") && localRank < facts.deviceCount) {
      throw new ConfigError(
        `${kind} asks for ${device} under parallelTraining "ddp", which puts every rank on it (rank ${localRank}'s own GPU is ${own}); use "cuda" or "auto" for each rank's own GPU`,
        kind,
      );
    }
    return entry;
  };
  return typeof spec === "string" ? read(spec) : spec.map(read);
}
