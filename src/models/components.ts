// The model classes as component modules: how a causal LM and a value head are saved into and restored from a
// checkpoint or saveModel directory (Hugging Face layout, sampling-stream states, value_head.pt).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { ComponentError, type ComponentModule } from "../components/registry.js";
import { writeFileChecked } from "../util/atomic.js";
import { makeDirs } from "../util/make-dirs.js";
import { DROPOUT_STREAM, type CausalLM } from "./causal-lm.js";
import { decoderConfigOf } from "./config.js";
import type { ComlrlTokenizer } from "./tokenizer.js";
import type { ValueHead } from "./value-head.js";

/** The file a causal LM is written to by saveModel with format "gguf", inside its export directory. */
export const GGUF_EXPORT_FILE = "model.gguf";

const GENERATOR_FILE = "generator.bin";
/** The dropout stream's state (same device type as generator.bin's), so a resumed update drops what it would have. */
const DROPOUT_GENERATOR_FILE = "generator-dropout.bin";
/** The device type ("cpu", "cuda") whose generator wrote generator.bin: a CPU generator's state (~5 KB of Mersenne
 * twister) and a CUDA one's (seed and offset) are different things, and neither can continue the other's stream. */
const GENERATOR_DEVICE_FILE = "generator.json";

function deviceType(device: string): string {
  return device.split(":")[0]!;
}

/** Refuses to restore a generator saved on another kind of device, naming both (a checkpoint without the record,
 * from before it was written, is left to the state's own size check). */
function checkGeneratorDevice(dir: string, model: CausalLM): void {
  const file = path.join(dir, GENERATOR_DEVICE_FILE);
  if (!existsSync(file)) return;
  let saved: unknown;
  try {
    saved = (JSON.parse(readFileSync(file, "utf8")) as { device?: unknown }).device;
  } catch (error) {
    throw new ComponentError(`${file}: malformed JSON (${(error as Error).message})`);
  }
  if (typeof saved !== "string") throw new ComponentError(`${file}: "device" must be a device type such as "cpu" or "cuda"`);
  const here = deviceType(model.info().device);
  if (saved !== here) {
    throw new ComponentError(
      `${path.join(dir, GENERATOR_FILE)} holds a ${saved} generator's state but this model is on ${model.info().device}: a sampling stream cannot resume across device types (resume on ${saved}, or start a new run)`,
    );
  }
}

/**
 * A causal LM as a component module: Hugging Face layout with its tokenizer, plus the states of `stream`, the
 * sampling stream it trains with, and of the dropout stream (other streams, e.g. evaluation's, are re-seeded when
 * used and need no saving).
 */
export function causalLMModule(model: CausalLM, tokenizer: ComlrlTokenizer | null, stream = "default"): ComponentModule {
  // Dropout rates are described beside the architecture and only when one is set: a model without dropout never
  // draws from its dropout stream, so its description and its checkpoint (which may then lack that stream's file)
  // are those of a model that has no such stream.
  const { attentionDropout, residualDropout, embeddingDropout, ...architecture } = decoderConfigOf(model.config);
  const dropout = { attentionDropout, residualDropout, embeddingDropout };
  const drops = Object.values(dropout).some((rate) => rate > 0);
  return {
    key: model,
    samplingStream: stream,
    describe: () => ({ architecture, ...(drops ? { dropout } : {}), ...(tokenizer ? { vocabSize: tokenizer.vocabSize } : {}) }),
    saveState: async (dir) => {
      await model.save(dir, { tokenizer: tokenizer ?? undefined });
      await writeFileChecked(path.join(dir, GENERATOR_FILE), model.generatorState(stream));
      await writeFileChecked(path.join(dir, DROPOUT_GENERATOR_FILE), model.generatorState(DROPOUT_STREAM));
      await writeFileChecked(path.join(dir, GENERATOR_DEVICE_FILE), `${JSON.stringify({ device: deviceType(model.info().device) })}\n`);
    },
    loadState: async (dir) => {
      checkGeneratorDevice(dir, model);
      await model.loadWeights(dir);
      for (const [file, restored] of [[GENERATOR_FILE, stream], [DROPOUT_GENERATOR_FILE, DROPOUT_STREAM]] as const) {
        const generator = path.join(dir, file);
        if (!existsSync(generator) && file === DROPOUT_GENERATOR_FILE && !drops) continue;
        if (!existsSync(generator)) throw new ComponentError(`${generator} is missing`);
        try {
          model.setGeneratorState(new Uint8Array(readFileSync(generator)), restored);
        } catch (error) {
          throw new ComponentError(`${generator}: not a sampling generator's state (${(error as Error).message})`, { cause: error });
        }
      }
    },
    export: async (dir, options) => {
      if (options.format !== "gguf") return model.save(dir, { tokenizer: tokenizer ?? undefined });
      if (tokenizer === null) throw new ComponentError(`${dir}: a GGUF file carries its tokenizer, and this model was registered without one`);
      await model.exportGguf(path.join(dir, GGUF_EXPORT_FILE), { tokenizer, dtype: options.dtype });
    },
    dispose: () => model.dispose(),
    // A model the caller passed in goes back to its device's lane.
    release: () => model.setComputeLane(null),
  };
}

const VALUE_HEAD_FILE = "value_head.pt";

/**
 * A value head as a component module: value_head.pt (a torch.save state dict, readable by Python) in its directory,
 * for checkpoints and for saveModel alike. Its shape is what a checkpoint must match.
 */
export function valueHeadModule(head: ValueHead): ComponentModule {
  const file = (dir: string) => path.join(dir, VALUE_HEAD_FILE);
  return {
    key: head,
    describe: () => {
      const { hiddenSize, hiddenDim } = head.info();
      return { valueHead: { hiddenSize, hiddenDim } };
    },
    saveState: async (dir) => {
      await makeDirs(dir);
      await head.save(file(dir));
    },
    loadState: async (dir) => head.loadStateDict(file(dir)),
    dispose: () => head.dispose(),
  };
}
