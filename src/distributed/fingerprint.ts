// Ranks of one data-parallel run must hold the same models under the same config: ranks whose models differ abort
// natively in the first broadcast (gloo's EnforceNotMet on mismatched sizes, SIGABRT), and ranks whose configs
// differ (numGenerations, learning rates) train silently apart. Before any collective that moves tensors, the ranks
// exchange a fingerprint (every config field, each module's tensor shapes) and, where one differs from rank 0's,
// every rank fails with the same error naming the rank and the field or component.
import { createHash } from "node:crypto";
import { redactSecrets } from "../config/secrets.js";
import type { ComponentRegistry } from "../components/registry.js";
import type { DistributedContext } from "./context.js";
import { nativeModuleOf } from "../models/native-module.js";

interface ModuleFingerprint {
  component: string;
  tensors: number;
  parameters: number;
  /** sha256 of the tensors' names and shapes. */
  shapes: string;
}

export interface RunFingerprint {
  /** Each config field's JSON, with secrets redacted; devices are left out (ranks may each have their own). */
  config: Record<string, string>;
  modules: ModuleFingerprint[];
}

export class RankMismatchError extends Error {
  override name = "RankMismatchError";
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const DEVICE_FIELD = /Devices?$/;
const SHOWN = 60;
const show = (json: string | undefined) => (json === undefined ? "unset" : json.length > SHOWN ? `${json.slice(0, SHOWN)}…` : json);

export function runFingerprint(components: ComponentRegistry, config: object): RunFingerprint {
  const fields = Object.entries(redactSecrets(config as Record<string, unknown>)).filter(([name]) => !DEVICE_FIELD.test(name));
  const modules: ModuleFingerprint[] = [];
  for (const c of components.all) {
    const native = c.sharesModuleWith === null ? nativeModuleOf(c.module.key) : null;
    if (!native) continue;
    const tensors = native.parameterNames();
    const parameters = tensors.reduce((sum, { shape }) => sum + shape.reduce((n, d) => n * d, 1), 0);
    modules.push({ component: c.name, tensors: tensors.length, parameters, shapes: sha256(JSON.stringify(tensors)) });
  }
  return { config: Object.fromEntries(fields.map(([name, value]) => [name, JSON.stringify(value) ?? "undefined"])), modules };
}

/** What rank `rank`'s fingerprint has that rank 0's does not, one line per difference. */
export function fingerprintDifferences(reference: RunFingerprint, other: RunFingerprint, rank: number): string[] {
  const out: string[] = [];
  for (const name of new Set([...Object.keys(reference.config), ...Object.keys(other.config)])) {
    if (reference.config[name] !== other.config[name]) out.push(`config ${name} is ${show(other.config[name])} on rank ${rank}, ${show(reference.config[name])} on rank 0`);
  }
  const names = (f: RunFingerprint) => f.modules.map((m) => m.component).join(", ");
  if (names(reference) !== names(other)) {
    out.push(`rank ${rank} has the components [${names(other)}], rank 0 [${names(reference)}]`);
    return out;
  }
  reference.modules.forEach((mine, i) => {
    const theirs = other.modules[i];
    if (theirs.shapes !== mine.shapes) {
      out.push(
        `component ${mine.component} has ${theirs.parameters} parameters in ${theirs.tensors} tensors on rank ${rank}, ` +
          `${mine.parameters} in ${mine.tensors} on rank 0${theirs.parameters === mine.parameters ? " (shapes differ)" : ""}`,
      );
    }
  });
  return out;
}

/** Every rank's fingerprint against rank 0's; throws on every rank alike when any differs. */
export async function checkRanksAgree(context: DistributedContext, components: ComponentRegistry, config: object): Promise<void> {
  const all = await context.allGather(runFingerprint(components, config));
  const differences = all.flatMap((other, rank) => (rank === 0 ? [] : fingerprintDifferences(all[0], other, rank)));
  if (differences.length > 0) {
    throw new RankMismatchError(
      `the ${all.length} data-parallel ranks do not run the same models and config: ${differences.join("; ")} ` +
        `(every rank must load the same models with the same config)`,
    );
  }
}
