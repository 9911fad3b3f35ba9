import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export interface SecretKeySource {
  /** SECRET_KEY, when set. */
  readonly secretKey: string | undefined;
  /** Where a generated key is kept; undefined keeps it only in memory (an in-memory database). */
  readonly secretKeyFile: string | undefined;
}

export const SECRET_KEY_MIN_BYTES = 32;

/**
 * The key that signs sessions: SECRET_KEY when set; otherwise the one kept in the data directory,
 * generated on first start (file mode 0600). Several processes starting at once agree on one key:
 * the file is created exclusively and the losers read the winner's.
 */
export function resolveSecretKey(source: SecretKeySource): string {
  if (source.secretKey !== undefined) return source.secretKey;
  const generated = randomBytes(48).toString('base64url');
  const file = source.secretKeyFile;
  if (file === undefined) return generated;
  mkdirSync(dirname(file), { recursive: true });
  try {
    writeFileSync(file, `${generated}\n`, { mode: 0o600, flag: 'wx' });
    return generated;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const kept = readFileSync(file, 'utf8').trim();
  if (Buffer.byteLength(kept, 'utf8') < SECRET_KEY_MIN_BYTES) {
    throw new Error(
      `${file} holds no usable secret key (under ${SECRET_KEY_MIN_BYTES} bytes); delete it or set SECRET_KEY`,
    );
  }
  return kept;
}
