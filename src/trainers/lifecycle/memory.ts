// Where a trainer's memory goes: the peak resident bytes (and on CUDA each device's peak allocated and reserved
// bytes) of every phase of every step, beside StageTimings' seconds. The addon's memoryWindow() closes a window of
// time at each phase boundary; the window's peak counts towards the phase innermost at the time ("other" between
// phases: tokenizing, logging, bookkeeping). Phases of agents that update at once overlap, and a window is then
// counted towards the one entered last.
import type { CudaDeviceMemory, MemoryWindow } from "../../native/binding.js";
import type { Metrics } from "../../logging/metrics-logger.js";

/**
 * The phases memory is measured in: StageTimings' phases, with an update's own work split into "backward" (the
 * loss's forward and backward) and "optimizer" (the optimizer step); "update" keeps the rest of it.
 */
export type MemoryPhase = "generation" | "reward" | "referenceKl" | "critic" | "update" | "backward" | "optimizer" | "other";

/** One phase's peaks, in bytes. */
export interface PhaseMemory {
  /** The most resident bytes of the process while the phase ran. */
  peakRssBytes: number;
  /** Per CUDA device ("cuda:0", …): the most allocated and reserved bytes while the phase ran. */
  devices: Record<string, { peakAllocatedBytes: number; peakReservedBytes: number }>;
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => Math.round((bytes / MIB) * 10) / 10;

function merge(into: Map<MemoryPhase, PhaseMemory>, phase: MemoryPhase, rss: number, cuda: readonly CudaDeviceMemory[]): void {
  let entry = into.get(phase);
  if (!entry) into.set(phase, (entry = { peakRssBytes: 0, devices: {} }));
  entry.peakRssBytes = Math.max(entry.peakRssBytes, rss);
  for (const device of cuda) {
    const seen = (entry.devices[device.device] ??= { peakAllocatedBytes: 0, peakReservedBytes: 0 });
    seen.peakAllocatedBytes = Math.max(seen.peakAllocatedBytes, device.peakAllocatedBytes);
    seen.peakReservedBytes = Math.max(seen.peakReservedBytes, device.peakReservedBytes);
  }
}

const copy = (phases: Map<MemoryPhase, PhaseMemory>): Partial<Record<MemoryPhase, PhaseMemory>> =>
  Object.fromEntries([...phases].map(([phase, m]) => [phase, { peakRssBytes: m.peakRssBytes, devices: structuredClone(m.devices) }]));

/** Peak memory per stage and phase, and per step since the last takeStep(). */
export class StageMemory {
  private readonly byStage = new Map<string, Map<MemoryPhase, PhaseMemory>>();
  private step = new Map<MemoryPhase, PhaseMemory>();
  private readonly open: MemoryPhase[] = [];
  private current = "train";

  /** `sample` closes the window open since its previous call and opens the next (the addon's memoryWindow). */
  constructor(private readonly sample: () => MemoryWindow) {
    sample();
  }

  /** Windows from now on count into `stage`. */
  enter(stage: string): void {
    this.close();
    this.current = stage;
  }

  /** Runs `work` as `phase`: the windows while it runs count towards it. */
  async within<T>(phase: MemoryPhase, work: () => Promise<T>): Promise<T> {
    this.close();
    this.open.push(phase);
    try {
      return await work();
    } finally {
      this.close();
      this.open.splice(this.open.lastIndexOf(phase), 1);
    }
  }

  private close(): void {
    const window = this.sample();
    const phase = this.open.at(-1) ?? "other";
    let stage = this.byStage.get(this.current);
    if (!stage) this.byStage.set(this.current, (stage = new Map()));
    merge(stage, phase, window.peakResidentBytes, window.cudaMemory);
    merge(this.step, phase, window.peakResidentBytes, window.cudaMemory);
  }

  /** One stage's peaks per phase that ran in it (none for a stage that has not run). */
  of(stage: string): Partial<Record<MemoryPhase, PhaseMemory>> {
    return copy(this.byStage.get(stage) ?? new Map());
  }

  /**
   * The peaks since the previous call, as metrics.jsonl's "memory" record holds them, in MiB: peak_rss_mib over the
   * whole step and peak_rss_mib/<phase> per phase; on CUDA <device>/peak_allocated_mib[/<phase>] and
   * <device>/peak_reserved_mib[/<phase>] too.
   */
  takeStep(): Metrics {
    this.close();
    const fields: Metrics = {};
    const step = [...this.step];
    this.step = new Map();
    fields.peak_rss_mib = mib(Math.max(...step.map(([, m]) => m.peakRssBytes)));
    for (const [phase, m] of step) fields[`peak_rss_mib/${phase}`] = mib(m.peakRssBytes);
    const devices = [...new Set(step.flatMap(([, m]) => Object.keys(m.devices)))];
    for (const device of devices) {
      const of = (key: "peakAllocatedBytes" | "peakReservedBytes") => step.map(([, m]) => m.devices[device]?.[key] ?? 0);
      fields[`${device}/peak_allocated_mib`] = mib(Math.max(...of("peakAllocatedBytes")));
      fields[`${device}/peak_reserved_mib`] = mib(Math.max(...of("peakReservedBytes")));
      for (const [phase, m] of step) {
        const seen = m.devices[device];
        if (!seen) continue;
        fields[`${device}/peak_allocated_mib/${phase}`] = mib(seen.peakAllocatedBytes);
        fields[`${device}/peak_reserved_mib/${phase}`] = mib(seen.peakReservedBytes);
      }
    }
    return fields;
  }
}
