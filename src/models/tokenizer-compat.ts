// Where @huggingface/tokenizers (0.2.0) decodes differently from Hugging Face's own stack — the Rust `tokenizers`
// library and transformers 5, which the goldens in tests/golden/tokenizers come from — and the corrections that make
// ComlrlTokenizer decode like them. Encoding needs none: every family's fixture encodes identically as is.
import * as hf from "@huggingface/tokenizers";
import type { Tokenizer } from "@huggingface/tokenizers";

type Decoder = NonNullable<Tokenizer["decoder"]>;
type JsonObject = Record<string, unknown>;

// The package's .d.ts files re-export the decoder classes through extensionless paths, which NodeNext resolution
// cannot follow; these are the members used here, as the package defines them.
interface DecoderStep {
  config: JsonObject;
  decode_chain(tokens: string[]): string[];
}
// The package exports these decoder classes without typings for them.
const { ByteFallbackDecoder, MetaspaceDecoder, SequenceDecoder } = hf as unknown as {
  ByteFallbackDecoder: new (config: JsonObject) => DecoderStep;
  MetaspaceDecoder: new (config: JsonObject) => DecoderStep & { replacement: string };
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

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The Rust ByteFallback decoder turns each run of "<0xNN>" tokens into its UTF-8 text, or, when the run is not valid
 * UTF-8 as a whole, into one "\uFFFD" per byte; the JS one let TextDecoder replace only the invalid parts, so a
 * completion cut inside a byte-fallback character (a token budget ends generation anywhere) decoded differently.
 */
class RustByteFallbackDecoder extends ByteFallbackDecoder {
  override decode_chain(tokens: string[]): string[] {
    const out: string[] = [];
    let run: number[] = [];
    const flush = () => {
      if (run.length === 0) return;
      try {
        out.push(strictUtf8.decode(Uint8Array.from(run)));
      } catch {
        for (let i = 0; i < run.length; i++) out.push("\uFFFD");
      }
      run = [];
    };
    for (const token of tokens) {
      const byte = /^<0x[0-9A-Fa-f]{2}>$/.test(token) ? parseInt(token.slice(3, 5), 16) : null;
      if (byte === null) {
        flush();
        out.push(token);
      } else {
        run.push(byte);
      }
    }
    flush();
    return out;
  }
}

/** `decoder` with its Metaspace and ByteFallback steps (at any depth of Sequences) replaced by the Rust-exact ones. */
function withRustSteps(decoder: Decoder): Decoder {
  // The Rust-exact steps are decoders by shape (decode_chain, config), not subclasses of the package's Decoder.
  if (decoder instanceof MetaspaceDecoder) return new RustMetaspaceDecoder(decoder.config) as unknown as Decoder;
  if (decoder instanceof ByteFallbackDecoder) return new RustByteFallbackDecoder(decoder.config) as unknown as Decoder;
  if (decoder instanceof SequenceDecoder) decoder.decoders = decoder.decoders.map(withRustSteps);
  return decoder;
}

/** Applies the decoder corrections to a freshly built tokenizer, in place. */
export function matchRustDecoding(tokenizer: Tokenizer): void {
  if (tokenizer.decoder) tokenizer.decoder = withRustSteps(tokenizer.decoder);
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
