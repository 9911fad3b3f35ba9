const ALPHABET = 'abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789';

/** A random 7-character code of letters and digits, leaving out look-alikes (0/O, 1/l/I). */
export function suggestCode(length = 7): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  // 256 % 57 leaves a tiny bias; a suggested code needs no more than that.
  return Array.from(bytes, (b) => ALPHABET[b % ALPHABET.length]).join('');
}

export const CODE_PATTERN = '[a-zA-Z0-9]{6,10}';
