// Small models of our own: a randomly initialised checkpoint of any supported architecture plus a small real
// byte-level BPE tokenizer, written as an HF directory. Tests, examples and the demo use these; nothing is downloaded.
import path from "node:path";
import { CausalLM } from "./causal-lm.js";
import { buildConfigJson, type RotaryModelType } from "./config.js";
import { buildByteLevelBpeTokenizer } from "./tiny-tokenizer.js";
import { ComlrlTokenizer } from "./tokenizer.js";
import { makeDirs } from "../util/make-dirs.js";

/** The shape of a model createTinyModel makes (defaults: Qwen2 layout, hidden 64, 2 layers, vocabulary 512). */
export interface TinyModelOptions {
  /** The architecture (default "qwen2"); any supported family with rotary positions. */
  modelType?: RotaryModelType;
  /** Residual width (default 64). */
  hiddenSize?: number;
  /** MLP width (default 2 × hiddenSize). */
  intermediateSize?: number;
  /** Decoder layers (default 2). */
  numLayers?: number;
  /** Query heads (default 4). */
  numHeads?: number;
  /** Key/value heads (default numHeads / 2, at least 1). */
  numKvHeads?: number;
  /** Head width (default: the family's, hiddenSize / numHeads for most). */
  headDim?: number;
  /** Tie the LM head to the embedding (default true). */
  tieWordEmbeddings?: boolean;
  /** BPE vocabulary size, special tokens included (default 512). */
  vocabSize?: number;
  /** Text the BPE merges are learned from (default: a small built-in English corpus). */
  corpus?: string[];
  /** Seed of the random weights (default 0). */
  seed?: number;
  /** Standard deviation of the random weights (default 0.02). */
  initStd?: number;
}

/** Writes an HF model directory at dir and returns its tokenizer. */
export async function createTinyModel(dir: string, options: TinyModelOptions = {}): Promise<ComlrlTokenizer> {
  const files = buildByteLevelBpeTokenizer({ vocabSize: options.vocabSize ?? 512, corpus: options.corpus });
  const tokenizer = ComlrlTokenizer.fromJson({ tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig, source: dir });
  const modelType = options.modelType ?? "qwen2";
  const hiddenSize = options.hiddenSize ?? 64;
  const numHeads = options.numHeads ?? 4;
  const config = buildConfigJson(
    modelType,
    {
      vocabSize: tokenizer.vocabSize,
      hiddenSize,
      intermediateSize: options.intermediateSize ?? hiddenSize * 2,
      numLayers: options.numLayers ?? 2,
      numHeads,
      numKvHeads: options.numKvHeads ?? Math.max(1, numHeads / 2),
      headDim: options.headDim ?? (modelType === "qwen3" ? hiddenSize / numHeads : undefined),
      ropeTheta: 10000,
      rmsNormEps: 1e-6,
      tieWordEmbeddings: options.tieWordEmbeddings ?? true,
    },
    { bosTokenId: tokenizer.bosTokenId, eosTokenId: tokenizer.eosTokenIds[0], padTokenId: tokenizer.padTokenId },
    { initializer_range: options.initStd ?? 0.02 },
  );
  const model = CausalLM.create(config, { seed: options.seed ?? 0, initStd: options.initStd });
  try {
    await makeDirs(path.dirname(path.resolve(dir)));
    await model.save(dir, { tokenizer });
  } finally {
    model.dispose();
  }
  return ComlrlTokenizer.fromDirectory(dir);
}
