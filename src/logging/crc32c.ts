// CRC-32C (Castagnoli), the checksum TFRecord framing uses, and the "masked" form TensorFlow stores: a CRC computed
// over data that itself embeds CRCs is weak, so TFRecord rotates and offsets the value before writing it.

const CASTAGNOLI_REVERSED = 0x82f63b78;

const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ CASTAGNOLI_REVERSED : crc >>> 1;
    table[byte] = crc >>> 0;
  }
  return table;
})();

/** CRC-32C of data, as an unsigned 32-bit integer (crc32c("123456789") = 0xe3069283). */
export function crc32c(data: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of data) crc = TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC-32C: ((crc >>> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32. */
export function maskedCrc32c(data: Uint8Array): number {
  const crc = crc32c(data);
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}
