import { CausalLM, ComlrlTokenizer, exportGguf, MAGRPOTrainer } from "../../src/index.js";

declare const trainer: MAGRPOTrainer;

// every trained agent as runs/final/agent_i/model.gguf, its 2-D weights in f16
await trainer.saveModel("runs/final", { format: "gguf", dtype: "f16" });

// one model, with the tokenizer the file carries
const model = await CausalLM.load("runs/final-hf/agent_0");
const tokenizer = await ComlrlTokenizer.fromDirectory("runs/final-hf/agent_0");
await model.exportGguf("agent_0.q8_0.gguf", { tokenizer, dtype: "q8_0" });

// a Hugging Face directory as it is (a saved agent, a hub download)
await exportGguf("runs/final-hf/agent_1", "agent_1.bf16.gguf", { dtype: "bf16" });
