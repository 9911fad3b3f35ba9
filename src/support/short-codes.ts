import { randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** The largest multiple of 62 a byte holds: bytes at or above it are skipped, so every letter is as likely. */
const UNBIASED_BELOW = 248;

/** A uniformly random code of `length` letters and digits (5.95 bits each), from the system's CSPRNG. */
export function randomCode(length: number): string {
  let code = '';
  while (code.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= UNBIASED_BELOW) continue;
      code += ALPHABET[byte % 62];
      if (code.length === length) break;
    }
  }
  return code;
}
