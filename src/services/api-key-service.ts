import { randomBytes } from 'node:crypto';
import {
  API_KEY_MARKER,
  API_KEY_NAME_MAX_LENGTH,
  API_KEY_PREFIX_LENGTH,
  API_KEY_RANDOM_BYTES,
  type ApiKey,
} from '../domain/api-key.js';
import { errors } from '../domain/errors.js';
import { canonicalTimestamp } from '../domain/timestamp.js';
import type { ApiKeyRepository } from '../ports/api-key-repository.js';
import type { Clock } from '../ports/clock.js';
import { apiKeyHash } from './auth-service.js';

export interface ApiKeyServiceOptions {
  readonly keys: ApiKeyRepository;
  readonly clock: Clock;
}

/** A key just made: the only time the key itself is ever returned. */
export interface CreatedApiKey {
  readonly apiKey: ApiKey;
  readonly key: string;
}

/** A user's API keys: create (shown once), list, revoke. Verifying a key is `AuthService`'s. */
export class ApiKeyService {
  constructor(private readonly options: ApiKeyServiceOptions) {}

  async create(userId: number, name: string, expiresAt: string | undefined): Promise<CreatedApiKey> {
    const trimmed = name.trim();
    if (trimmed === '' || trimmed.length > API_KEY_NAME_MAX_LENGTH) {
      throw errors.validation(`'name' must be 1 to ${API_KEY_NAME_MAX_LENGTH} characters`);
    }
    let expires: string | null = null;
    if (expiresAt !== undefined) {
      const canonical = canonicalTimestamp(expiresAt);
      if (canonical === undefined) throw errors.validation(`'expires_at' must be an RFC 3339 date-time`);
      if (Date.parse(canonical) <= this.options.clock.now()) {
        throw errors.validation(`'expires_at' must be in the future`);
      }
      expires = canonical;
    }
    const key = API_KEY_MARKER + randomBytes(API_KEY_RANDOM_BYTES).toString('base64url');
    const apiKey = await this.options.keys.create({
      user_id: userId,
      name: trimmed,
      prefix: key.slice(0, API_KEY_PREFIX_LENGTH),
      key_hash: apiKeyHash(key),
      created_at: this.timestamp(),
      expires_at: expires,
    });
    return { apiKey, key };
  }

  list(userId: number): Promise<ApiKey[]> {
    return this.options.keys.listByUser(userId);
  }

  /** Revokes one of the user's keys: 404 for a key that is not theirs. Revoking twice is fine. */
  async revoke(userId: number, id: number): Promise<ApiKey> {
    const revoked = await this.options.keys.revoke(userId, id, this.timestamp());
    if (!revoked) throw errors.apiKeyNotFound();
    return revoked;
  }

  private timestamp(): string {
    return canonicalTimestamp(new Date(this.options.clock.now()).toISOString())!;
  }
}
