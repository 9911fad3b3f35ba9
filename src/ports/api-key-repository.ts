import type { ApiKey, NewApiKey } from '../domain/api-key.js';

/**
 * Where API keys live, by the SHA-256 hash of the key (never the key). Every adapter passes
 * `test/contract/api-key-repository.contract.test.ts`.
 *
 * @example
 *   const key = await keys.create({ user_id: 1, name: 'ci', prefix: 'us_AbCdEfGh', key_hash, created_at, expires_at: null });
 *   await keys.findByHash(key_hash); // the key, revoked or not: the caller decides
 */
export interface ApiKeyRepository {
  create(key: NewApiKey): Promise<ApiKey>;
  findByHash(keyHash: string): Promise<ApiKey | undefined>;
  /** The user's keys, newest first, revoked ones included. */
  listByUser(userId: number): Promise<ApiKey[]>;
  /**
   * Marks the user's key revoked at `at` (a key already revoked keeps its first time). Undefined
   * when the user has no such key.
   */
  revoke(userId: number, id: number, at: string): Promise<ApiKey | undefined>;
  /** Records a use at `at`. */
  touch(id: number, at: string): Promise<void>;
}
