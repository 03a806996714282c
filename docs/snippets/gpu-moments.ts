import { CausalLM, Optimizer } from "../../src/index.js";

const model = await CausalLM.load("Qwen/Qwen2.5-0.5B", { dtype: "bfloat16", device: "cuda:0" });
const optimizer = new Optimizer(model, { lr: 1e-5, fp32Moments: true });
optimizer.momentDtypes(); // ["float32", ...] once a step has run
