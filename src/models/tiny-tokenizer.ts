// A small but real byte-level BPE tokenizer, trained in-process, in Hugging Face `tokenizer.json` format.
//
// Tests, demos and benchmarks need a tokenizer without the network. Building one here, with the same component
// types GPT-2 and Qwen use (ByteLevel pre-tokenizer and decoder, BPE model, ChatML special tokens), means the
// tokenizer code path exercised by them is the one real checkpoints take. Every byte is a base token, so any UTF-8
// text encodes and decodes back unchanged.
import { byteAlphabet } from "./byte-alphabet.js";
import { slowTokenizerClass } from "./tokenizer.js";

/** Plain English sentences the tiny tokenizer learns its merges from when no corpus is given. */
export const TINY_ENGLISH_CORPUS: readonly string[] = [
  "One, two, three, four, five, six, seven, eight, nine, ten.",
  "Ten is the number after nine, and eleven is the number after ten.",
  "Twelve eggs make a dozen, and twenty is two times ten.",
  "A hundred is ten times ten; a thousand is ten times a hundred.",
  "Three plus four is seven. Seven minus two is five. Six times seven is forty-two.",
  "If you add 12 and 30, you get 42. Half of 42 is 21.",
  "The answer is 7. The answer is 15. The answer is 100.",
  "Counting is easy: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.",
  "An even number can be split into two equal parts; an odd number cannot.",
  "The sky is blue, the grass is green, and the sun is yellow.",
  "Red and yellow make orange. Blue and yellow make green. Red and blue make purple.",
  "She wore a white shirt, a black coat and a pair of brown shoes.",
  "The old house had a red door, grey walls and a green roof.",
  "At night the sea looks dark blue, almost black, under the silver moon.",
  "The painter mixed pink, gold and violet until the sunset looked real.",
  "The cat sat on the mat and watched the little bird in the tree.",
  "A dog ran across the field, chasing a ball that rolled toward the river.",
  "The horse, the cow and the sheep live together on the farm.",
  "Fish swim in the water, birds fly in the air, and rabbits dig in the ground.",
  "The lion is the king of the animals, but the elephant is the largest.",
  "A small mouse found a piece of cheese under the kitchen table.",
  "The fox jumped over the lazy dog and ran into the forest.",
  "Bees make honey, spiders spin webs, and ants carry food to their nest.",
  "Once upon a time, there was a girl who lived in a small village near the woods.",
  "Every morning she walked to the well to fetch water for her mother.",
  "One day she met an old man who asked her for a drink, and she gave him her cup.",
  "The old man smiled and said, \"Because you were kind, I will grant you one wish.\"",
  "She thought for a long time and then wished for her village to never be hungry again.",
  "From that day on, the fields were full of wheat and the trees were heavy with fruit.",
  "Once there was a boy who wanted to build a boat and sail across the lake.",
  "He worked every day after school, cutting wood and tying ropes.",
  "When the boat was finished, his friends helped him push it into the water.",
  "The wind filled the sail, and the little boat moved slowly toward the other side.",
  "When he reached the shore, he waved to his friends and they cheered for him.",
  "Yesterday it rained all day, so we stayed inside and read books.",
  "Today the weather is warm and sunny, so we will go to the park.",
  "Tomorrow we will visit our grandmother, who lives in a town by the sea.",
  "What is your name? My name is Anna. Where do you live? I live in the city.",
  "How many apples are in the basket? There are five apples and three pears.",
  "Please write a short answer. Think step by step, then give the final answer.",
  "The teacher asked the students to explain why the sky is blue.",
  "Water freezes at zero degrees and boils at one hundred degrees.",
  "The earth goes around the sun once a year, and the moon goes around the earth.",
  "A week has seven days, a year has twelve months, and a day has twenty-four hours.",
  "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday.",
  "January, February, March, April, May, June, July, August, September, October, November, December.",
  "They shared the bread, the cheese and the fruit, and nobody went home hungry.",
  "It's a good day to learn something new, isn't it? We'll see what we've learned.",
];

/** Special tokens of the Qwen ChatML convention, placed after the learned vocabulary by default. */
const CHATML_SPECIAL_TOKENS: readonly string[] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

// Qwen's template reduced to the plain ChatML turn format (no tools, no system default).
const CHATML_TEMPLATE =
  "{%- for message in messages %}" +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

const DEFAULT_VOCAB_SIZE = 512;
const MODEL_MAX_LENGTH = 2048;

// GPT-2's pre-tokenization regex; @huggingface/tokenizers' ByteLevel pre-tokenizer hard-codes the same pattern, so the
// words learned from here are split exactly as they will be split when encoding.
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export interface TinyTokenizerOptions {
  /** Total vocabulary size including the special tokens (default 512). */
  vocabSize?: number;
  /** Texts the merges are learned from (default {@link TINY_ENGLISH_CORPUS}). */
  corpus?: readonly string[];
  /** Special tokens appended at the end of the vocabulary (default {@link CHATML_SPECIAL_TOKENS}). */
  specialTokens?: readonly string[];
}

export interface TinyTokenizerFiles {
  /** The contents of `tokenizer.json`. */
  tokenizerJson: Record<string, unknown>;
  /** The contents of `tokenizer_config.json`. */
  tokenizerConfig: Record<string, unknown>;
}

/** Splits the corpus into byte-level words (as lists of one-byte symbols) with their frequencies. */
function countWords(corpus: readonly string[], byteToChar: string[]): Map<string, number> {
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const text of corpus) {
    for (const piece of text.match(GPT2_SPLIT) ?? []) {
      const word = Array.from(encoder.encode(piece), (b) => byteToChar[b]).join("");
      counts.set(word, (counts.get(word) ?? 0) + 1);
    }
  }
  return counts;
}

/**
 * Classic BPE training: repeatedly merge the most frequent adjacent symbol pair until `targetSize` tokens exist.
 * Ties go to the lexicographically smallest pair, so the result depends only on the input.
 */
function learnMerges(
  wordCounts: Map<string, number>,
  vocab: Map<string, number>,
  targetSize: number,
): [string, string][] {
  const words = [...wordCounts].map(([word, count]) => ({ symbols: Array.from(word), count }));
  const merges: [string, string][] = [];
  while (vocab.size < targetSize) {
    const pairCounts = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairCounts.set(key, (pairCounts.get(key) ?? 0) + count);
      }
    }
    let best: string | null = null;
    let bestCount = 0;
    for (const [key, count] of pairCounts) {
      if (count > bestCount || (count === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === null) {
      throw new Error(
        `buildByteLevelBpeTokenizer: the corpus ran out of pairs to merge at ${vocab.size} tokens, ` +
          `short of the ${targetSize} asked for; give a larger corpus or a smaller vocabSize`,
      );
    }
    // Byte-level symbols never contain a space (it is mapped to "Ġ"), so the space separator is unambiguous.
    const [left, right] = best.split(" ") as [string, string];
    const merged = left + right;
    merges.push([left, right]);
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const word of words) {
      const s = word.symbols;
      const out: string[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === left && s[i + 1] === right) {
          out.push(merged);
          i++;
        } else {
          out.push(s[i]!);
        }
      }
      word.symbols = out;
    }
  }
  return merges;
}

/**
 * Trains a byte-level BPE tokenizer on `corpus` and returns its `tokenizer.json` and `tokenizer_config.json` contents.
 * Ids 0–255 are the byte alphabet, then the learned merges, then the special tokens (ids `vocabSize - k` …
 * `vocabSize - 1`). With the default ChatML specials, eos is `<|im_end|>`, pad is `<|endoftext|>` and the config holds
 * a ChatML chat template; specials that are left out simply leave the matching config entry null.
 */
export function buildByteLevelBpeTokenizer(options: TinyTokenizerOptions = {}): TinyTokenizerFiles {
  const vocabSize = options.vocabSize ?? DEFAULT_VOCAB_SIZE;
  const corpus = options.corpus ?? TINY_ENGLISH_CORPUS;
  const specials = options.specialTokens ?? CHATML_SPECIAL_TOKENS;
  if (new Set(specials).size !== specials.length || specials.some((t) => t.length === 0)) {
    throw new Error(`buildByteLevelBpeTokenizer: specialTokens must be distinct non-empty strings, got ${JSON.stringify(specials)}`);
  }
  const baseSize = vocabSize - specials.length;
  if (!Number.isInteger(vocabSize) || baseSize < 256) {
    throw new Error(
      `buildByteLevelBpeTokenizer: vocabSize must be an integer of at least 256 + ${specials.length} special tokens, got ${vocabSize}`,
    );
  }

  const { byteToChar, order } = byteAlphabet();
  const vocab = new Map<string, number>(order.map((b, id) => [byteToChar[b]!, id]));
  const merges = learnMerges(countWords(corpus, byteToChar), vocab, baseSize);

  const addedTokens = specials.map((content, i) => ({
    id: baseSize + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const tokenizerJson = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries(vocab),
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };

  const has = (token: string) => specials.includes(token);
  const eos = has("<|im_end|>") ? "<|im_end|>" : null;
  const pad = has("<|endoftext|>") ? "<|endoftext|>" : null;
  const tokenizerConfig = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: Object.fromEntries(addedTokens.map(({ id, ...token }) => [String(id), token])),
    additional_special_tokens: specials.filter((t) => t !== pad),
    bos_token: null,
    chat_template: has("<|im_start|>") && has("<|im_end|>") ? CHATML_TEMPLATE : null,
    // Decoding must give back the exact text, so no "tidying" of spaces before punctuation.
    clean_up_tokenization_spaces: false,
    eos_token: eos,
    errors: "replace",
    model_max_length: MODEL_MAX_LENGTH,
    pad_token: pad,
    split_special_tokens: false,
    // GPT-2's byte-level regex: slow loaders split text the same way only as GPT2Tokenizer.
    tokenizer_class: slowTokenizerClass(tokenizerJson),
    unk_token: null,
  };
  return { tokenizerJson, tokenizerConfig };
}
