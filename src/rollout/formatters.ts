// Per-agent prompt builders (COMLRL-SPEC §4.1).
import type { Formatter, Item } from "./types.js";

export const defaultFormatter: Formatter = (item, externalPrompt) =>
  externalPrompt ?? (typeof item.prompt === "string" ? item.prompt : "");

/** One formatter per agent from none (the default), one shared function, or a list of exactly numAgents. */
export function buildFormatters(formatters: Formatter | readonly Formatter[] | null | undefined, numAgents: number): Formatter[] {
  if (formatters === null || formatters === undefined) return Array(numAgents).fill(defaultFormatter);
  if (typeof formatters === "function") return Array(numAgents).fill(formatters);
  if (!Array.isArray(formatters)) throw new TypeError("formatters must be a function or a list of functions");
  if (formatters.length !== numAgents) {
    throw new RangeError(`Number of formatters (${formatters.length}) must match numAgents (${numAgents})`);
  }
  formatters.forEach((f, i) => {
    if (typeof f !== "function") throw new TypeError(`formatters[${i}] must be a function`);
  });
  return [...formatters];
}

/** Calls a formatter and insists on a string, naming the agent and item otherwise. */
export function formatPrompt(formatter: Formatter, item: Item, agent: number, externalPrompt?: string): string {
  const prompt = externalPrompt === undefined ? formatter(item) : formatter(item, externalPrompt);
  if (typeof prompt !== "string") throw new TypeError(`formatter of agent ${agent} returned ${typeof prompt}, not a string`);
  return prompt;
}

/**
 * Every item must be an object of fields; with `promptRequired` (the default formatter, or a task whose formatters
 * read it) each must also carry a string `prompt`, or the run would train on "undefined" or an empty prompt. `name`
 * names the list in the error ("trainDataset", "dataset acme/x split train"), with the row at fault.
 */
export function checkItems(items: readonly unknown[], name: string, promptRequired: boolean): void {
  items.forEach((item, i) => {
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      throw new TypeError(`${name} row ${i} is ${JSON.stringify(item)?.slice(0, 80) ?? String(item)}: every item must be an object of fields, e.g. {"prompt": "…"}`);
    }
    const prompt = (item as Item).prompt;
    if (promptRequired && typeof prompt !== "string") {
      throw new TypeError(
        `${name} row ${i} has ${prompt === undefined ? "no field prompt" : `prompt ${JSON.stringify(prompt)?.slice(0, 80)}, not a string`}: ` +
          `the prompts are made from it (give every row a string prompt, or formatters that read the fields it has)`,
      );
    }
  });
}
