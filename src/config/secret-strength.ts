/**
 * How much a `SECRET_KEY` looks like a random key, for production's check. The rule (README
 * "Configuration"): a key is refused when it
 * - has fewer than `MIN_DISTINCT` different characters (`aaaa…`, `abab…`),
 * - repeats a shorter piece (`password1password1…`, `0123456701234567…`),
 * - runs mostly up or down the character table (`abcdefgh…`, `98765432…`), or
 * - carries fewer than `MIN_BITS` by its characters' frequencies (length × Shannon entropy per
 *   character): 32 random hex characters give about 110, 48 random bytes in base64 about 350.
 */
export const MIN_BITS = 80;
export const MIN_DISTINCT = 8;

/** Why the key is weak, in words fit for the start-up message; undefined when it looks random. */
export function weakSecretReason(key: string): string | undefined {
  const chars = [...key];
  const counts = new Map<string, number>();
  for (const c of chars) counts.set(c, (counts.get(c) ?? 0) + 1);
  if (counts.size < MIN_DISTINCT) {
    return `has only ${counts.size} different characters (at least ${MIN_DISTINCT})`;
  }
  const period = repeatedPeriod(chars);
  if (period !== undefined) return `repeats a piece of ${period} characters`;
  let steps = 0;
  for (let i = 1; i < chars.length; i++) {
    if (Math.abs(chars[i]!.codePointAt(0)! - chars[i - 1]!.codePointAt(0)!) === 1) steps++;
  }
  if (steps * 2 > chars.length - 1) return 'runs up or down the alphabet';
  let bitsPerChar = 0;
  for (const n of counts.values()) bitsPerChar -= (n / chars.length) * Math.log2(n / chars.length);
  const bits = Math.floor(bitsPerChar * chars.length);
  if (bits < MIN_BITS) return `carries about ${bits} bits by its character frequencies (at least ${MIN_BITS})`;
  return undefined;
}

/** The shortest piece the key is made of, repeated (the last repetition may be cut short). */
function repeatedPeriod(chars: readonly string[]): number | undefined {
  for (let period = 1; period * 2 <= chars.length; period++) {
    if (chars.every((c, i) => i < period || c === chars[i - period])) return period;
  }
  return undefined;
}
