import { loadDataset } from "../../src/index.js";

// A hub id, a local directory, or a .jsonl / .parquet file; the split syntax is `datasets`'.
const items = await loadDataset("trl-lib/tldr", { split: "train[:1000]" });
console.log(items.length, Object.keys(items[0]));
