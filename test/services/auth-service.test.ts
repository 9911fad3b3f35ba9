import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BcryptPasswordHasher } from '../../src/adapters/auth/bcrypt-password-hasher.js';
import { CsrfTokens } from '../../src/adapters/auth/csrf.js';
import { JwtCodec } from '../../src/adapters/auth/jwt.js';
import { createSecurityMetrics } from '../../src/adapters/auth/security-metrics.js';
import { KyselyAuthStateStore } from '../../src/adapters/storage/kysely-auth-state-store.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { KyselyApiKeyRepository } from '../../src/adapters/storage/kysely-api-key-repository.js';
import { KyselyUserRepository } from '../../src/adapters/storage/kysely-user-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import type { PasswordHasher } from '../../src/ports/password-hasher.js';
import { AuthService } from '../../src/services/auth-service.js';
import { ManualClock } from '../helpers/auth.js';

/** The real bcrypt hasher, recording which hashes each verification ran against. */
class RecordingHasher implements PasswordHasher {
  readonly verified: Array<{ password: string; hash: string }> = [];
  constructor(private readonly inner: BcryptPasswordHasher) {}
  get dummyHash() {
    return this.inner.dummyHash;
  }
  hash(password: string) {
    return this.inner.hash(password);
  }
  verify(password: string, hash: string) {
    this.verified.push({ password, hash });
    return this.inner.verify(password, hash);
  }
}

describe('AuthService login timing', () => {
  let dir: string;
  let database: Database;
  let hasher: RecordingHasher;
  let auth: AuthService;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'urlshortener-auth-'));
    database = openDatabase({ kind: 'sqlite', url: join(dir, 'a.db'), poolMax: 1 });
    await migrateToLatest(database.db, database.dialect);
    const clock = new ManualClock();
    hasher = new RecordingHasher(new BcryptPasswordHasher(4));
    auth = new AuthService({
      users: new KyselyUserRepository(database.db, database.dialect),
      apiKeys: new KyselyApiKeyRepository(database.db),
      passwords: hasher,
      state: new KyselyAuthStateStore(database.db, clock),
      settings: { current: () => ({ password_min_length: 8, max_login_attempts: 5, lockout_duration_minutes: 15 }) },
      tokens: new JwtCodec('k'.repeat(32), clock),
      csrf: new CsrfTokens('k'.repeat(32)),
      clock,
      metrics: createSecurityMetrics(new Registry()),
      accessTokenMinutes: 1440,
    });
    await auth.register({ username: 'alice', email: 'alice@example.com', password: 'alice password' });
  });
  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const attempt = async (username: string, password: string) => {
    hasher.verified.length = 0;
    await expect(auth.login(username, password)).rejects.toMatchObject({ statusCode: 401 });
    return [...hasher.verified];
  };

  it('verifies an unknown username against the dummy hash: one bcrypt check, like a wrong password', async () => {
    const unknown = await attempt('nobody', 'some password');
    expect(unknown).toEqual([{ password: 'some password', hash: hasher.dummyHash }]);
    const wrong = await attempt('alice', 'some password');
    expect(wrong).toHaveLength(1);
    expect(wrong[0]!.hash).toMatch(/^\$2b\$04\$/);
    expect(wrong[0]!.hash).not.toBe(hasher.dummyHash);
  });

  it('spends one bcrypt check on a password over 72 bytes, which never matches', async () => {
    const long = await attempt('alice', `alice password${'x'.repeat(70)}`);
    expect(long).toHaveLength(1);
  });

  it('the dummy hash has the configured cost and matches nothing', async () => {
    for (const rounds of [4, 10, 12]) {
      const dummy = new BcryptPasswordHasher(rounds).dummyHash;
      expect(dummy).toMatch(new RegExp(`^\\$2b\\$${String(rounds).padStart(2, '0')}\\$[./A-Za-z0-9]{53}$`));
    }
    const low = new BcryptPasswordHasher(4);
    expect(await low.verify('', low.dummyHash)).toBe(false);
    expect(await low.verify('dummy-password-never-used', low.dummyHash)).toBe(false);
  });
});
