// The component registry: every weight-bearing part of a trainer (an actor, its reference, a value head, a critic, a
// reward model, a comparator) is registered once with its name, module, optimizer and ownership. Checkpoints,
// saveModel and close() iterate over the registry, so an algorithm file never saves, restores or frees by hand.
// A component's name is also its directory in checkpoints (and, through exportDir, in saveModel output).
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { makeDirs } from "../util/make-dirs.js";

/** What the registry needs of any module that holds weights. */
export interface ComponentModule {
  /** Identity used to detect sharing: two components with the same key hold one set of weights. */
  readonly key: object;
  /** What a checkpoint must agree with to be restored into this module (architecture, vocabulary, head shape). */
  describe(): Record<string, unknown>;
  /** Writes the module's weights (and sampling-stream state) into dir, in the module's own layout. */
  saveState(dir: string): Promise<void>;
  /** Restores the weights (and sampling-stream state) saveState wrote into dir. */
  loadState(dir: string): Promise<void>;
  /** Writes the module for users (Hugging Face layout or GGUF, value_head.pt); defaults to saveState. */
  export?(dir: string, options: SaveModelOptions): Promise<void>;
  /** Frees the module's native memory; the module is unusable afterwards. */
  dispose(): void;
  /** Hands a module the caller passed in back as it came (a CPU agent lane the trainer gave it is undone). */
  release?(): void;
  /** The sampling stream the module's model trains with, whose state the module's checkpoint holds (causal LMs). */
  readonly samplingStream?: string;
}

/** A GGUF file's 2-D weight type. */
export type GgufDtype = "f16" | "bf16" | "q8_0";

/** How saveModel writes the trained models. */
export interface SaveModelOptions {
  /** "hf" (default): a Hugging Face directory per model; "gguf": one model.gguf per model, for llama.cpp (docs/gguf.md). */
  format?: "hf" | "gguf";
  /** The GGUF file's 2-D weight type (default "f16"); only with format "gguf". */
  dtype?: GgufDtype;
}

/** What the registry needs of an optimizer. */
export interface ComponentOptimizer {
  /** Writes the optimizer's state (moments, step count) to file. */
  save(file: string): Promise<void>;
  /** Restores the state save wrote to file. */
  load(file: string): Promise<void>;
  /** Frees the optimizer's native memory. */
  dispose(): void;
}

/** How a trainer registers a weight-bearing part: its name (also its checkpoint directory), module, optimizer and where saveModel puts it. */
export interface ComponentSpec {
  /** Unique; its checkpoint directory ("agent_0", "reference_0", "agent_1/critic", "reward_model"). */
  name: string;
  /** The weights: saved, restored, exported and (when owned) freed through this. */
  module: ComponentModule;
  /** The optimizer stepping the module, checkpointed beside it; null for a frozen module. */
  optimizer?: ComponentOptimizer | null;
  /** Whether the trainer created the module and so frees it; a module the caller passed in stays usable. */
  ownsModule: boolean;
  /**
   * Where a frozen module can be reloaded from on resume instead of being saved (a hub id or dir); null saves its
   * weights with every checkpoint.
   */
  reloadSource?: string | null;
  /** Subdirectory of saveModel's output ("agent_0", "" for the output dir itself); null: not exported. */
  exportDir?: string | null;
}

/** A registered part, every field of its spec resolved. */
export interface Component extends Required<ComponentSpec> {
  /** The earlier component whose module this one shares, or null. */
  sharesModuleWith: string | null;
}

/** A component as a checkpoint records it, to check a later trainer against before restoring. */
export interface SavedComponent {
  /** The component's name, also its checkpoint directory. */
  name: string;
  /** Its module's describe() at save time. */
  description: Record<string, unknown>;
  /** The earlier component whose module it shared, or null. */
  sharesModuleWith: string | null;
  /** Where a frozen module is reloaded from instead of its saved weights, or null. */
  reloadSource: string | null;
  /** Whether optimizer state was saved with it. */
  hasOptimizer: boolean;
}

export class ComponentError extends Error {
  /** Always "ComponentError". */
  override name = "ComponentError";
}

const OPTIMIZER_FILE = "optimizer.pt";

/** The trainer's registered parts, which checkpoints, exact resume, saveModel and close() iterate over. */
export class ComponentRegistry {
  private readonly list: Component[] = [];

  /** Adds a component; throws ComponentError when the name is taken. A module already registered is marked as shared. */
  register(spec: ComponentSpec): Component {
    if (this.list.some((c) => c.name === spec.name)) throw new ComponentError(`a component named "${spec.name}" is already registered`);
    const owner = this.list.find((c) => c.module.key === spec.module.key);
    const component: Component = {
      optimizer: null,
      reloadSource: null,
      exportDir: null,
      ...spec,
      sharesModuleWith: owner?.name ?? null,
    };
    this.list.push(component);
    return component;
  }

  /**
   * Puts a new module (and optimizer) in place of the component of that name, at its position, freeing the old
   * optimizer and, when the trainer owns it, the old module (MARLHFIter's fresh reward model every iteration).
   */
  replace(spec: ComponentSpec): Component {
    const index = this.list.findIndex((c) => c.name === spec.name);
    if (index < 0) throw new ComponentError(`no component named "${spec.name}" to replace (known: ${this.list.map((c) => c.name).join(", ")})`);
    const old = this.list[index];
    const sharers = this.list.filter((c) => c !== old && c.module.key === old.module.key).map((c) => c.name);
    if (sharers.length > 0) throw new ComponentError(`"${spec.name}" shares its module with ${sharers.join(", ")}; it cannot be replaced alone`);
    old.optimizer?.dispose();
    if (old.ownsModule) old.module.dispose();
    const owner = this.list.slice(0, index).find((c) => c.module.key === spec.module.key);
    const component: Component = { optimizer: null, reloadSource: null, exportDir: null, ...spec, sharesModuleWith: owner?.name ?? null };
    this.list[index] = component;
    return component;
  }

  /** Every registered component, in registration order. */
  get all(): readonly Component[] {
    return this.list;
  }

  /**
   * Components in write order: a component nested under another's directory ("agent_0/critic" under "agent_0")
   * comes after it, because a model directory is written whole and would replace what was already inside it.
   */
  private inWriteOrder(dirOf: (c: Component) => string = (c) => c.name): Component[] {
    const depth = (dir: string) => (dir === "" ? 0 : dir.split("/").length);
    return [...this.list].sort((a, b) => depth(dirOf(a)) - depth(dirOf(b)));
  }

  /** The component of that name; throws ComponentError when there is none. */
  get(name: string): Component {
    const component = this.list.find((c) => c.name === name);
    if (!component) throw new ComponentError(`no component named "${name}" (known: ${this.list.map((c) => c.name).join(", ")})`);
    return component;
  }

  /** Checkpoint layout: dir/<name>/ holds the module's state (once per shared module) and the optimizer's. */
  async saveCheckpoint(dir: string): Promise<SavedComponent[]> {
    for (const c of this.inWriteOrder()) {
      const componentDir = path.join(dir, c.name);
      if (c.sharesModuleWith === null && c.reloadSource === null) await c.module.saveState(componentDir);
      if (c.optimizer) {
        await makeDirs(componentDir);
        await c.optimizer.save(path.join(componentDir, OPTIMIZER_FILE));
      }
    }
    return this.list.map((c) => ({ name: c.name, description: c.module.describe(), sharesModuleWith: c.sharesModuleWith, reloadSource: c.reloadSource, hasOptimizer: c.optimizer !== null }));
  }

  /** Refuses a checkpoint whose components differ from these in name, shape, sharing or optimizer; returns the reasons. */
  incompatibilities(saved: readonly SavedComponent[]): string[] {
    const names = (list: readonly { name: string }[]) => list.map((c) => c.name).join(", ");
    if (saved.length !== this.list.length || saved.some((s, i) => s.name !== this.list[i].name)) {
      return [`it holds components [${names(saved)}], this trainer has [${names(this.list)}]`];
    }
    const problems: string[] = [];
    this.list.forEach((c, i) => {
      const s = saved[i];
      const here = JSON.stringify(c.module.describe());
      const there = JSON.stringify(s.description);
      if (here !== there) problems.push(`${c.name} differs: checkpoint ${there}, trainer ${here}`);
      if (s.sharesModuleWith !== c.sharesModuleWith) problems.push(`${c.name}: weight sharing differs (checkpoint ${s.sharesModuleWith ?? "none"}, trainer ${c.sharesModuleWith ?? "none"})`);
      if (s.hasOptimizer !== (c.optimizer !== null)) problems.push(`${c.name}: the checkpoint ${s.hasOptimizer ? "has" : "has no"} optimizer state`);
    });
    return problems;
  }

  /** Restores every module and optimizer from a directory saveCheckpoint wrote; check incompatibilities first. */
  async loadCheckpoint(dir: string): Promise<void> {
    for (const c of this.inWriteOrder()) {
      const componentDir = path.join(dir, c.name);
      if (c.sharesModuleWith === null && c.reloadSource === null) await c.module.loadState(componentDir);
      if (c.optimizer) await c.optimizer.load(path.join(componentDir, OPTIMIZER_FILE));
    }
  }

  /**
   * saveModel: every exported component into dir/<exportDir>. All of them are written into a staging directory beside
   * dir first and moved in only when every one is complete, so a save that fails (a full disk) leaves dir as it was.
   * What dir holds besides the exported entries stays; an exported entry already there is replaced whole.
   */
  async exportTo(dir: string, options: SaveModelOptions = {}): Promise<void> {
    if (options.format !== undefined && options.format !== "hf" && options.format !== "gguf") {
      throw new ComponentError(`saveModel: format must be "hf" or "gguf", got ${JSON.stringify(options.format)}`);
    }
    if (options.dtype !== undefined && options.format !== "gguf") throw new ComponentError(`saveModel: dtype ${JSON.stringify(options.dtype)} applies to format "gguf" only`);
    const parent = path.dirname(path.resolve(dir));
    await makeDirs(parent);
    const staging = await mkdtemp(path.join(parent, `.${path.basename(dir)}.export-`));
    try {
      const out = path.join(staging, "out");
      for (const c of this.inWriteOrder((c) => c.exportDir ?? "")) {
        if (c.exportDir === null) continue;
        const target = path.join(out, c.exportDir);
        await (c.module.export ? c.module.export(target, options) : c.module.saveState(target));
      }
      if (!existsSync(out)) return;
      await makeDirs(dir);
      const replaced = path.join(staging, "replaced");
      await mkdir(replaced);
      for (const entry of await readdir(out)) {
        if (existsSync(path.join(dir, entry))) await rename(path.join(dir, entry), path.join(replaced, entry));
        await rename(path.join(out, entry), path.join(dir, entry));
      }
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  /** Frees every optimizer and every module the trainer created, a shared module once; releases the caller's. */
  dispose(): void {
    const freed = new Set<object>();
    for (const c of this.list) {
      c.optimizer?.dispose();
      if (!c.ownsModule) c.module.release?.();
      else if (!freed.has(c.module.key)) c.module.dispose();
      freed.add(c.module.key);
    }
    this.list.length = 0;
  }
}

