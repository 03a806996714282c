// GPT-2's byte-level alphabet, shared by the tokenizers this project writes (tiny models) and reads (GGUF files).
/**
 * GPT-2's reversible byte → printable character table, as an array indexed by byte value. The printable Latin-1 bytes
 * stand for themselves; the rest are shifted to code points from U+0100 so no token contains whitespace or controls.
 * Also returns the bytes in GPT-2's vocabulary order (printable bytes first), which is the order of the first 256 ids.
 */
export function byteAlphabet(): { byteToChar: string[]; order: number[] } {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const byteToChar = new Array<string>(256);
  for (const b of printable) byteToChar[b] = String.fromCodePoint(b);
  const order = [...printable];
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    if (byteToChar[b] === undefined) {
      byteToChar[b] = String.fromCodePoint(256 + shifted++);
      order.push(b);
    }
  }
  return { byteToChar, order };
}
