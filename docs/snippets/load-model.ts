import { CausalLM } from "../../src/index.js";

const model = await CausalLM.load("Qwen/Qwen2.5-0.5B", { dtype: "float32", device: "cpu", seed: 0 });
console.log(model.info());
model.dispose(); // frees the native weights now rather than at garbage collection
