// The paper's writing tasks (LLM_Collab_Writing): two agents write complementary texts and share one level-gated
// reward of at most 3.0. Each level is reached only through the one before it:
//   L1 structure   both texts within a whitespace-token range            +0.5, else stop
//   L2 length      character ratio len₂/len₁ in a band                   +1 (linear ramps at the band's edges), else stop
//   L3 vocabulary  unique-word ratio (all words) in a band               +0.5 (ramps), else stop
//   L4 style       0.4·transition score + 0.6·min(Jaccard, cap)/cap over non-stopwords
// TLDR (concise summary + detailed expansion) and arXiv expansion (background + methodology) differ only in the bands.
// Matching is the upstream one: transition phrases are found as substrings of the lower-cased text (so "so" also
// matches inside "also"), words are \b\w+\b runs.
import type { Formatter, Item, RewardFunction } from "../rollout/types.js";

/** A band [min, max] that earns full credit on [fullFrom, fullTo] and ramps linearly to 0 at min and max. */
export interface Band {
  min: number;
  fullFrom: number;
  fullTo: number;
  max: number;
}

export interface WritingRewardSpec {
  /** Inclusive whitespace-token range both texts must fall in. */
  tokens: [number, number];
  length: Band;
  vocabulary: Band;
  /** Whose text the transition phrases are looked for in. */
  transitionsIn: "second" | "both";
  /** Jaccard similarity at or above which the overlap part of L4 is full. */
  jaccardCap: number;
}

export interface WritingRewardBreakdown {
  structure: number;
  length: number;
  vocabulary: number;
  style: number;
  total: number;
  /** The first level the pair did not reach, or null when it reached all four. */
  stoppedAt: 1 | 2 | 3 | null;
}

export const TLDR_REWARD: WritingRewardSpec = {
  tokens: [8, 256],
  length: { min: 1.1, fullFrom: 1.6, fullTo: 3.2, max: 5.0 },
  vocabulary: { min: 1.3, fullFrom: 2.0, fullTo: Infinity, max: Infinity },
  transitionsIn: "second",
  jaccardCap: 0.03,
};

export const ARXIV_REWARD: WritingRewardSpec = {
  tokens: [128, 256],
  length: { min: 0.8, fullFrom: 1.0, fullTo: 1.3, max: 1.5 },
  vocabulary: { min: 0.5, fullFrom: 0.7, fullTo: 1.3, max: 1.7 },
  transitionsIn: "both",
  jaccardCap: 0.23,
};

// prettier-ignore
const STOPWORDS = new Set([
  "a", "all", "also", "an", "and", "any", "are", "as", "at", "bad", "be", "been", "being", "both", "but", "by", "can",
  "could", "did", "do", "does", "each", "few", "first", "for", "from", "good", "great", "had", "has", "have", "he", "her",
  "here", "him", "his", "how", "i", "if", "in", "is", "it", "its", "just", "last", "left", "little", "long", "low", "many",
  "may", "me", "might", "more", "most", "much", "must", "my", "new", "no", "not", "now", "of", "old", "on", "only", "or",
  "other", "our", "own", "right", "same", "shall", "should", "so", "some", "such", "than", "that", "the", "their", "them",
  "then", "there", "these", "they", "this", "those", "to", "too", "us", "very", "was", "we", "were", "what", "when",
  "where", "which", "who", "why", "will", "with", "would", "you", "your",
]);

// prettier-ignore
export const TRANSITION_CATEGORIES: Record<string, string[]> = {
  elaboration: ["furthermore", "moreover", "additionally", "also", "besides", "in addition", "what is more", "not only", "as well as", "along with", "coupled with", "together with", "likewise", "similarly", "equally important", "by the same token", "in the same way", "correspondingly", "in like manner", "comparatively", "analogously"],
  examples: ["for example", "for instance", "specifically", "particularly", "namely", "such as", "including", "especially", "in particular", "to illustrate", "as an illustration", "case in point", "to demonstrate", "as evidence", "to exemplify", "notably", "markedly", "chiefly", "mainly", "primarily", "above all", "most importantly"],
  explanation: ["that is", "in other words", "to put it simply", "to clarify", "indeed", "in fact", "actually", "clearly", "obviously", "to put it another way", "to rephrase", "more precisely", "specifically speaking", "what this means is", "the point is", "essentially", "basically", "fundamentally", "at its core", "in essence", "simply put", "stated differently"],
  cause_effect: ["therefore", "thus", "consequently", "as a result", "hence", "accordingly", "for this reason", "due to this", "because of this", "so", "then", "thereby", "wherefore", "thence", "ergo", "as a consequence", "in consequence", "it follows that", "this leads to", "this results in", "this causes", "this brings about", "owing to", "on account of", "thanks to", "resulting from"],
  contrast: ["however", "nevertheless", "nonetheless", "on the other hand", "in contrast", "while", "whereas", "although", "even though", "despite this", "but", "yet", "still", "conversely", "on the contrary", "rather", "instead", "alternatively", "otherwise", "in opposition", "by contrast", "contrarily", "notwithstanding", "regardless", "all the same", "even so", "be that as it may", "in any case", "at any rate"],
  sequence: ["first", "second", "third", "next", "then", "after that", "finally", "lastly", "initially", "subsequently", "meanwhile", "to begin with", "to start with", "in the beginning", "at first", "at the outset", "primarily", "secondly", "thirdly", "following this", "afterward", "later", "later on", "in the meantime", "simultaneously", "concurrently", "at the same time", "in conclusion", "to conclude", "ultimately", "in the end", "to summarize", "in summary"],
  emphasis: ["indeed", "certainly", "surely", "undoubtedly", "without doubt", "definitely", "absolutely", "positively", "unquestionably", "indubitably", "of course", "naturally", "obviously", "clearly", "evidently", "manifestly", "undeniably", "admittedly", "granted", "to be sure", "in fact", "as a matter of fact", "notably", "significantly"],
  summary: ["in summary", "in conclusion", "to summarize", "to conclude", "in short", "in brief", "briefly", "to sum up", "on the whole", "overall", "all in all", "in essence", "essentially", "basically", "fundamentally", "in the final analysis", "after all", "ultimately", "in the end", "when all is said and done", "the bottom line is"],
  comparison: ["similarly", "likewise", "in the same way", "equally", "just as", "comparable to", "in comparison", "by the same token", "correspondingly", "in like manner", "along the same lines", "in similar fashion", "analogously", "by analogy", "just like", "much like", "as with"],
  concession: ["although", "though", "even though", "while", "whereas", "despite", "in spite of", "regardless of", "notwithstanding", "admittedly", "granted", "even if", "be that as it may", "nevertheless", "nonetheless", "however", "yet", "still", "all the same"],
  condition: ["if", "unless", "provided that", "assuming that", "supposing that", "in case", "in the event that", "on condition that", "given that", "as long as", "so long as", "only if", "even if", "whether or not", "should", "were", "had", "otherwise", "or else"],
  time: ["when", "while", "as", "after", "before", "until", "since", "during", "meanwhile", "simultaneously", "at the same time", "concurrently", "previously", "formerly", "earlier", "later", "afterward", "subsequently", "eventually", "finally", "recently", "lately", "nowadays", "currently", "presently", "immediately"],
};

export const countTokens = (text: string): number => (text.trim() ? text.trim().split(/\s+/).length : 0);

// Python's \w is Unicode-aware; JavaScript's is ASCII-only even with the u flag.
const words = (text: string): string[] => text.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? [];

/** Python's len(): code points, not UTF-16 units. */
const characters = (text: string): number => [...text].length;

export const uniqueWordCount = (text: string): number => new Set(words(text)).size;

const contentWords = (text: string) => new Set(words(text).filter((w) => !STOPWORDS.has(w)));

/** Jaccard similarity of the two texts' non-stopword sets; 1 when both are empty. */
export function jaccardSimilarity(a: string, b: string): number {
  const setA = contentWords(a);
  const setB = contentWords(b);
  if (setA.size === 0 && setB.size === 0) return 1;
  const shared = [...setA].filter((w) => setB.has(w)).length;
  return shared / (setA.size + setB.size - shared);
}

export function transitionCategories(text: string): string[] {
  const lower = text.toLowerCase();
  return Object.entries(TRANSITION_CATEGORIES)
    .filter(([, phrases]) => phrases.some((p) => lower.includes(p)))
    .map(([category]) => category);
}

/** 0 with no category, 0.4 for one, +0.05 for each further one. */
export const transitionScore = (categories: number): number => (categories === 0 ? 0 : Math.min(1, 0.4 + Math.min(0.6, 0.05 * (categories - 1))));

/** Credit in [0, 1] for x in the band, or null outside it (the level is not reached). */
export function bandScore(x: number, band: Band): number | null {
  if (!(x >= band.min && x <= band.max)) return null;
  if (x < band.fullFrom) return (x - band.min) / (band.fullFrom - band.min);
  if (x > band.fullTo) return 1 - (x - band.fullTo) / (band.max - band.fullTo);
  return 1;
}

export function writingRewardBreakdown(first: string, second: string, spec: WritingRewardSpec): WritingRewardBreakdown {
  const result: WritingRewardBreakdown = { structure: 0, length: 0, vocabulary: 0, style: 0, total: 0, stoppedAt: 1 };
  const inRange = (text: string) => countTokens(text) >= spec.tokens[0] && countTokens(text) <= spec.tokens[1];
  const finish = (stoppedAt: WritingRewardBreakdown["stoppedAt"]) => {
    result.stoppedAt = stoppedAt;
    result.total = result.structure + result.length + result.vocabulary + result.style;
    return result;
  };
  if (!inRange(first) || !inRange(second)) return finish(1);
  result.structure = 0.5;

  const length = bandScore(characters(second) / characters(first), spec.length);
  if (length === null) return finish(2);
  result.length = length;

  const uniqueFirst = uniqueWordCount(first);
  const vocabulary = uniqueFirst === 0 ? null : bandScore(uniqueWordCount(second) / uniqueFirst, spec.vocabulary);
  if (vocabulary === null) return finish(3);
  result.vocabulary = 0.5 * vocabulary;

  const categories = transitionCategories(spec.transitionsIn === "second" ? second : first + second).length;
  const overlap = Math.min(jaccardSimilarity(first, second), spec.jaccardCap) / spec.jaccardCap;
  result.style = 0.4 * transitionScore(categories) + 0.6 * overlap;
  return finish(null);
}

export const writingReward = (first: string, second: string, spec: WritingRewardSpec): number => writingRewardBreakdown(first, second, spec).total;

export const writingRewardFunc =
  (spec: WritingRewardSpec): RewardFunction =>
  (completions) =>
    completions[0].map((a, j) => writingReward(a, completions[1][j], spec));

function field(item: Item, name: string): string {
  const value = item[name];
  if (typeof value !== "string" || !value) throw new Error(`writing task item has no text in its "${name}" field`);
  return value;
}

export const tldrFormatters: Formatter[] = [
  (item) =>
    `Create a concise summary response to this post.\n\nQuery:\n${field(item, "prompt")}\n\nIMPORTANT INSTRUCTIONS:\n` +
    "- Provide a brief, focused summary in one sentence or a few sentences\n- Be factual and informative\n",
  (item) =>
    `Create a detailed summary response to this post.\n\nOriginal Query:\n${field(item, "prompt")}\n\nIMPORTANT INSTRUCTIONS:\n` +
    "- Use more unique words\n- Use some transition words to improve flow\n",
];

const arxivFormatter = (focus: string, other: string): Formatter => (item) =>
  `Based on the following scientific abstract, expand content for an introduction section.\n\nAbstract:\n${field(item, "abstract_text")}\n\n` +
  `IMPORTANT INSTRUCTIONS:\n- There is another agent that will provide ${other === "background and motivation" ? "the " : ""}${other}\n` +
  `- You just need to focus on ${focus}\n- Avoid repeating ${other} content\n`;

export const arxivFormatters: Formatter[] = [
  arxivFormatter("background and motivation", "methodology and implications"),
  arxivFormatter("methodology and implications", "background and motivation"),
];
