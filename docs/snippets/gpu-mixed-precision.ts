import { CausalLM, Optimizer } from "../../src/index.js";

const model = await CausalLM.load("Qwen/Qwen2.5-0.5B", { dtype: "bfloat16", device: "cuda:0" });
const optimizer = new Optimizer(model, { lr: 5e-6 }); // precision "auto": bf16-mixed for a bf16 model on a GPU
optimizer.precision; // "bf16-mixed"
optimizer.memory().bytesPerParameter; // 14 once a step has run: bf16 weight 2 + float32 master 4 + moments 8
