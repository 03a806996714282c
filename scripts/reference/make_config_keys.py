#!/usr/bin/env python3
"""The config.json keys that can change what transformers computes, per model family comlrl runs, read from
transformers' own source: src/models/transformers-config-keys.ts (generated; never edit it by hand).

A key can change the computation when the family's causal-LM code reads it. So, statically (Python's `ast`, nothing is
imported or run), for each family:

  reads   every `config.<key>` / `self.config.<key>` / `getattr(config, "<key>", ...)` / `hasattr(config, "<key>")` in
          the code reachable from <Family>ForCausalLM: the classes and functions of modeling_<family>.py it names,
          transitively, and those of the shared forward helpers it imports (masking, rotary embeddings, the layer
          base classes; SHARED below). The loading, generation and cache machinery is left out: it reads runtime
          settings, not what a forward computes. Each key is then mapped through the config class's attribute_map
          (GPT-2's hidden_size is the file's n_embd), and a key the config class computes in __post_init__ or in a
          property brings in the keys it is computed from (Qwen2's layer_types from use_sliding_window and
          max_window_layers). Building the config reads keys too: the config class's own methods, and for a rotary
          family RotaryEmbeddingConfigMixin's, which fold the legacy rope_theta / rope_scaling / partial_rotary_factor
          and a top-level original_max_position_embeddings into rope_parameters.
  default the value transformers uses when the file leaves the key out: the config class's field default (its own,
          an ancestor's in the same file, or PreTrainedConfig's), else the default of the getattr() that reads it;
          null when there is none (the key is then judged by presence).
  fields  every key the config class knows (its fields, its ancestors', PreTrainedConfig's, attribute_map's names),
          each with its default as above. A key in neither is one transformers' config class has never heard of for
          this family.

Usage (any python3 >= 3.9; transformers itself need not import, only its source tree is read):

    pip download --no-deps transformers==5.24.0 && unzip -q transformers-5.24.0-*.whl 'transformers/*'
    python3 scripts/reference/make_config_keys.py path/to/transformers [output file, default the one above]

The version read is the one scripts/reference/requirements.txt pins; tests/unit/config-keys.test.ts checks the table
against that pin, this script's hash and the TypeScript family list, and regenerates it when COMLRL_TRANSFORMERS_SRC
names a source tree.
"""
import ast
import hashlib
import json
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "src", "models", "transformers-config-keys.ts")

# comlrl's model types. Each one's transformers directory is its name less "_text" (gemma3_text's code is gemma3's), its
# config class the one whose model_type it is, its causal-LM class the one module class named *ForCausalLM (GPT-2's:
# *LMHeadModel).
MODEL_TYPES = ("qwen2", "qwen3", "qwen3_moe", "llama", "mistral", "mixtral", "gemma2", "gemma3_text", "phi3", "olmo2", "smollm3", "gpt2")

# Shared modules on the forward path whose code counts as the family's: the causal / sliding-window masks, the rotary
# initialisers, the decoder-layer base class.
SHARED = ("masking_utils.py", "modeling_rope_utils.py", "modeling_layers.py")

# PreTrainedConfig's properties the forward code reads, and the file key each one stands for.
BASE_PROPERTIES = {"is_heterogeneous": "per_layer_config"}

# Names a config object goes by in that code.
CONFIG_NAMES = {"config", "text_config"}


def parse(path):
    with open(path, encoding="utf8") as f:
        return ast.parse(f.read(), path)


def is_config(node):
    """`config`, `text_config`, or `<anything>.config` (self.config, module.config, model.config)."""
    return (isinstance(node, ast.Name) and node.id in CONFIG_NAMES) or (isinstance(node, ast.Attribute) and node.attr == "config")


def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


class Module:
    """One source file: its top-level definitions and the transformers names it imports."""

    def __init__(self, tree_root, rel):
        self.rel = rel
        self.tree = parse(os.path.join(tree_root, rel))
        self.defs = {}
        self.imports = {}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.defs[target.id] = node
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                base = os.path.dirname(rel)
                for _ in range(node.level - 1):
                    base = os.path.dirname(base)
                target = os.path.join(base, *(node.module or "").split(".")) + ".py"
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (os.path.normpath(target), alias.name)


def config_reads(tree_root, family_dir, causal_lm):
    """Keys read through a config object in the code reachable from the causal-LM class, with getattr defaults."""
    modules = {}

    def module(rel):
        if rel not in modules:
            modules[rel] = Module(tree_root, rel)
        return modules[rel]

    start = os.path.join("models", family_dir, f"modeling_{family_dir}.py")
    reads, getattr_defaults, seen = set(), {}, set()
    work = [(start, causal_lm)]
    while work:
        rel, name = work.pop()
        if (rel, name) in seen:
            continue
        seen.add((rel, name))
        mod = module(rel)
        node = mod.defs.get(name)
        if node is None:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and is_config(sub.value):
                reads.add(sub.attr)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in ("getattr", "hasattr"):
                if len(sub.args) >= 2 and is_config(sub.args[0]) and isinstance(sub.args[1], ast.Constant):
                    key = sub.args[1].value
                    reads.add(key)
                    if sub.func.id == "getattr" and len(sub.args) == 3:
                        getattr_defaults.setdefault(key, literal(sub.args[2]))
            if isinstance(sub, ast.Name):
                if sub.id in mod.defs:
                    work.append((rel, sub.id))
                elif sub.id in mod.imports:
                    target, original = mod.imports[sub.id]
                    if target == start or target in SHARED:
                        work.append((target, original))
    # Method calls on the config (config.get_text_config()) are not keys.
    methods = {n.func.attr for m in modules.values() for n in ast.walk(m.tree)
               if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and is_config(n.func.value)}
    return reads - methods, getattr_defaults, sorted(modules)


def class_fields(tree, name, classes=None):
    """A config class's fields (name -> default node or None), attribute_map, and the keys each computed field or
    property is derived from, following its base classes defined in the same file."""
    classes = classes or {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    node = classes[name]
    fields, attribute_map, derived = {}, {}, {}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            f, a, d = class_fields(tree, base.id, classes)
            fields.update(f)
            attribute_map.update(a)
            derived.update(d)
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            annotation = ast.unparse(item.annotation)
            if not annotation.startswith("ClassVar"):
                fields[item.target.id] = item.value
        elif isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "attribute_map" for t in item.targets):
            attribute_map.update(literal(item.value) or {})
        elif isinstance(item, ast.FunctionDef):
            is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
            if item.name == "__post_init__":
                for sub in ast.walk(item):
                    if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                        used = self_attributes(sub.value) if sub.value is not None else set()
                        for target in targets:
                            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                                derived.setdefault(target.attr, set()).update(used - {target.attr})
            elif is_property:
                derived.setdefault(item.name, set()).update(self_attributes(item))
    return fields, attribute_map, derived


def self_attributes(node):
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}


def only(names, what):
    if len(names) != 1:
        sys.exit(f"expected one {what}, found {names}")
    return names[0]


def config_machinery_reads(tree, class_name):
    """Keys a config class's own methods read while building the config: `self.<key>`, `getattr`/`hasattr(self, key)`
    and `kwargs.get`/`kwargs.pop(key)` (the legacy rope_theta / rope_scaling folded into rope_parameters), with the
    defaults getattr and kwargs calls give. Names the class itself defines (methods, class attributes) are not keys."""
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    own = {item.name for item in node.body if isinstance(item, ast.FunctionDef)} | {
        t.id for item in node.body if isinstance(item, (ast.Assign, ast.AnnAssign))
        for t in (item.targets if isinstance(item, ast.Assign) else [item.target]) if isinstance(t, ast.Name)}
    reads, defaults = set(), {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self" and isinstance(sub.ctx, ast.Load):
            reads.add(sub.attr)
        elif isinstance(sub, ast.Call) and sub.args and isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str):
            via_self = isinstance(sub.func, ast.Name) and sub.func.id in ("getattr", "hasattr")
            via_kwargs = isinstance(sub.func, ast.Attribute) and sub.func.attr in ("get", "pop") and ast.unparse(sub.func.value) == "kwargs"
            if via_kwargs:
                key = sub.args[0].value
                reads.add(key)
                if len(sub.args) == 2:
                    defaults.setdefault(key, literal(sub.args[1]))
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in ("getattr", "hasattr") and len(sub.args) >= 2 \
                and isinstance(sub.args[0], ast.Name) and sub.args[0].id == "self" and isinstance(sub.args[1], ast.Constant):
            reads.add(sub.args[1].value)
            if sub.func.id == "getattr" and len(sub.args) == 3:
                defaults.setdefault(sub.args[1].value, literal(sub.args[2]))
    called = {sub.func.attr for sub in ast.walk(node) if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)}
    return reads - own - called, defaults


def table_for(tree_root, base_fields, family):
    family_dir = family.removesuffix("_text")
    config_tree = parse(os.path.join(tree_root, "models", family_dir, f"configuration_{family_dir}.py"))
    config_class = only([node.name for node in config_tree.body if isinstance(node, ast.ClassDef) and any(
        isinstance(item, ast.Assign) and ast.unparse(item.targets[0]) == "model_type" and literal(item.value) == family for item in node.body)],
        f"config class with model_type {family!r}")
    modeling_classes = [node.name for node in parse(os.path.join(tree_root, "models", family_dir, f"modeling_{family_dir}.py")).body
                        if isinstance(node, ast.ClassDef)]
    causal_lm = only([name for name in modeling_classes if name.endswith("ForCausalLM")] or
                     [name for name in modeling_classes if name.endswith("LMHeadModel")], f"causal-LM class for {family}")
    reads, getattr_defaults, modules = config_reads(tree_root, family_dir, causal_lm)
    fields, attribute_map, derived = class_fields(config_tree, config_class)
    # Building the config reads keys too: a rotary family's RotaryEmbeddingConfigMixin folds the legacy rope keys and a
    # top-level original_max_position_embeddings (any config's, known or not) into rope_parameters; the family's config
    # class may override that.
    builders = [(config_tree, config_class)]
    if "rope_parameters" in fields:
        builders.append((parse(os.path.join(tree_root, "modeling_rope_utils.py")), "RotaryEmbeddingConfigMixin"))
    for tree, name in builders:
        more, more_defaults = config_machinery_reads(tree, name)
        reads |= more
        for key, value in more_defaults.items():
            getattr_defaults.setdefault(key, value)
    all_fields = {**base_fields, **fields}
    keys, pending = set(), [attribute_map.get(r, r) for r in (BASE_PROPERTIES.get(r, r) for r in reads)]
    while pending:
        key = pending.pop()
        if key in keys:
            continue
        keys.add(key)
        pending.extend(attribute_map.get(k, k) for k in derived.get(key, ()))
    # Private bookkeeping (_attn_implementation, ...) is set by transformers, not read from a file's keys.
    keys = {k for k in keys if not k.startswith("_")}

    def default(key):
        if all_fields.get(key) is not None:
            return literal(all_fields[key])
        return getattr_defaults.get(key)

    return {
        "reads": {key: default(key) for key in sorted(keys)},
        "fields": {key: default(key) for key in sorted(set(all_fields) | set(attribute_map))},
        "modules": modules,
    }


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    tree_root = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else OUT
    version = re.search(r'__version__ = "([^"]+)"', open(os.path.join(tree_root, "__init__.py"), encoding="utf8").read()).group(1)
    base_fields, _, _ = class_fields(parse(os.path.join(tree_root, "configuration_utils.py")), "PreTrainedConfig")
    families = {family: table_for(tree_root, base_fields, family) for family in sorted(MODEL_TYPES)}
    # One line per family's list: the data stays readable and diffs by family.
    blocks = [f'  {json.dumps(family)}: {{\n   "fields": {json.dumps(t["fields"], sort_keys=True)},\n   "reads": {json.dumps(t["reads"], sort_keys=True)}\n  }}'
              for family, t in families.items()]
    data = "{\n \"families\": {\n" + ",\n".join(blocks) + f"\n }},\n \"transformers\": {json.dumps(version)}\n}}"
    with open(os.path.abspath(__file__), "rb") as f:
        generator_hash = hashlib.sha256(f.read()).hexdigest()
    sources = sorted({m for t in families.values() for m in t["modules"]})
    text = (
        f"// Generated by scripts/reference/make_config_keys.py from transformers {version}'s source; do not edit, rerun it.\n"
        f"// Source files read: models/<family>/{{modeling,configuration}}_<family>.py, configuration_utils.py, "
        f"{', '.join(s for s in sources if not s.startswith('models/'))}.\n"
        f"// generator sha256: {generator_hash}\n"
        f"// table sha256: {hashlib.sha256(data.encode()).hexdigest()}\n"
        "import type { TransformersConfigKeys } from \"./config-keys.js\";\n\n"
        "/** Per family, the config.json keys transformers' causal-LM code reads (with its defaults) and every key its config class knows. */\n"
        f"export const TRANSFORMERS_CONFIG_KEYS: TransformersConfigKeys = {data};\n"
    )
    with open(out, "w", encoding="utf8") as f:
        f.write(text)
    for family, t in families.items():
        print(f"{family}: {len(t['reads'])} keys read, {len(t['fields'])} known")


if __name__ == "__main__":
    main()
