// Where @huggingface/tokenizers (0.2.0) decodes differently from Hugging Face's own stack — the Rust `tokenizers`
// library and transformers 5, which the goldens in tests/golden/tokenizers come from — and the corrections that make
// ComlrlTokenizer decode like them. Encoding needs none: every family's fixture encodes identically as is.
import * as hf from "@huggingface/tokenizers";
import type { Tokenizer } from "@huggingface/tokenizers";

type Decoder = NonNullable<Tokenizer["decoder"]>;
type JsonObject = Record<string, unknown>;

// The package's .d.ts files re-export the decoder classes through extensionless paths, which NodeNext resolution
// cannot follow; these are the members used here, as the package defines them.
interface MetaspaceStep {
  config: JsonObject;
  replacement: string;
  decode_chain(tokens: string[]): string[];
}
const { MetaspaceDecoder, SequenceDecoder } = hf as unknown as {
  MetaspaceDecoder: new (config: JsonObject) => MetaspaceStep;
  SequenceDecoder: new (config: JsonObject) => { decoders: Decoder[] };
};

/**
 * The Rust Metaspace decoder drops every "▁" of the first token (unless prepend_scheme is "never") and turns the
 * others into spaces; the JS one strips only a single leading space from the first token, so a first token such as
 * "▁▁▁" (Mistral v0.3's three spaces) decoded to "  " instead of "".
 */
class RustMetaspaceDecoder extends MetaspaceDecoder {
  override decode_chain(tokens: string[]): string[] {
    const dropFirst = this.config.prepend_scheme !== "never";
    return tokens.map((token, i) => (i === 0 && dropFirst ? token.replaceAll(this.replacement, "") : token.replaceAll(this.replacement, " ")));
  }
}

/** `decoder` with every Metaspace step (at any depth of Sequences) replaced by {@link RustMetaspaceDecoder}. */
function withRustMetaspace(decoder: Decoder): Decoder {
  if (decoder instanceof MetaspaceDecoder) return new RustMetaspaceDecoder(decoder.config) as unknown as Decoder;
  if (decoder instanceof SequenceDecoder) decoder.decoders = decoder.decoders.map(withRustMetaspace);
  return decoder;
}

/** Applies the decoder corrections to a freshly built tokenizer, in place. */
export function matchRustDecoding(tokenizer: Tokenizer): void {
  if (tokenizer.decoder) tokenizer.decoder = withRustMetaspace(tokenizer.decoder);
}

/**
 * Whether `decode` runs transformers' clean_up_tokenization (" ." -> "." and the like). transformers 5 does so only
 * when tokenizer_config.json asks for it and the model is not BPE (for BPE it corrupts text such as "do n't"), unless
 * the config insists with clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output; the JS library
 * cleans up whenever the key is missing or true, which turned Llama 3's and GPT-2's "a , b" into "a, b".
 */
export function cleansUpTokenizationSpaces(tokenizerJson: JsonObject, config: JsonObject): boolean {
  if (config.clean_up_tokenization_spaces !== true) return false;
  const model = tokenizerJson.model as JsonObject | undefined;
  return model?.type !== "BPE" || config.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output === true;
}
