import { type Kysely, sql } from 'kysely';
import { type Clock, systemClock } from '../../ports/clock.js';
import type {
  AuthStateSnapshot,
  DurableAuthStateStore,
  FailureWindow,
  RevocationKind,
} from '../../ports/auth-state-store.js';
import type { DatabaseSchema } from './schema.js';

/**
 * Revocations and lockouts in the service's database (SQLite or PostgreSQL): what survives
 * restarts of the service and of Redis. Each change is one atomic statement, so concurrent
 * instances neither lose a failure nor shorten a revocation.
 */
export class KyselyAuthStateStore implements DurableAuthStateStore {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly clock: Clock = systemClock,
  ) {}

  async revoke(kind: RevocationKind, id: string, expiresAtMs: number): Promise<void> {
    if (expiresAtMs <= this.clock.now()) return;
    await this.db
      .insertInto('auth_revocations')
      .values({ kind, id, expires_at_ms: Math.ceil(expiresAtMs) })
      .onConflict((conflict) =>
        conflict.columns(['kind', 'id']).doUpdateSet({
          expires_at_ms: sql<number>`CASE WHEN excluded.expires_at_ms > auth_revocations.expires_at_ms
            THEN excluded.expires_at_ms ELSE auth_revocations.expires_at_ms END`,
        }),
      )
      .execute();
  }

  async isRevoked(kind: RevocationKind, id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('auth_revocations')
      .select('expires_at_ms')
      .where('kind', '=', kind)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined && row.expires_at_ms > this.clock.now();
  }

  async lift(kind: RevocationKind, id: string): Promise<void> {
    await this.db.deleteFrom('auth_revocations').where('kind', '=', kind).where('id', '=', id).execute();
  }

  async recordFailure(subject: string, windowMs: number): Promise<FailureWindow> {
    const now = this.clock.now();
    const expiresAtMs = Math.ceil(now + windowMs);
    const version = clockVersion(now);
    const row = await this.db
      .insertInto('auth_login_failures')
      .values({ subject, failures: 1, expires_at_ms: expiresAtMs, version })
      .onConflict((conflict) =>
        conflict.column('subject').doUpdateSet({
          failures: sql<number>`CASE WHEN auth_login_failures.expires_at_ms > ${now}
            THEN auth_login_failures.failures + 1 ELSE 1 END`,
          // Never earlier than it is: an instance whose clock is behind another's commits after
          // it with the higher count, and must not give that count the earlier end.
          expires_at_ms: sql<number>`CASE WHEN auth_login_failures.expires_at_ms > ${expiresAtMs}
            THEN auth_login_failures.expires_at_ms ELSE ${expiresAtMs} END`,
          version: nextVersion(version),
        }),
      )
      .returning(['failures', 'expires_at_ms', 'version'])
      .executeTakeFirstOrThrow();
    return failureWindow(row, now);
  }

  async failures(subject: string): Promise<FailureWindow | undefined> {
    const row = await this.db
      .selectFrom('auth_login_failures')
      .select(['failures', 'expires_at_ms', 'version'])
      .where('subject', '=', subject)
      .executeTakeFirst();
    const now = this.clock.now();
    if (row === undefined || row.expires_at_ms <= now || Number(row.failures) === 0) return undefined;
    return failureWindow(row, now);
  }

  /**
   * The record stays, at 0 failures and a new version, until its window ends (prune): a copy of
   * a failure counted before this, arriving after it, is older and refused.
   */
  async clearFailures(subject: string): Promise<FailureWindow | undefined> {
    const now = this.clock.now();
    const row = await this.db
      .updateTable('auth_login_failures')
      .set({ failures: 0, version: nextVersion(clockVersion(now)) })
      .where('subject', '=', subject)
      .where('expires_at_ms', '>', now)
      .returning(['failures', 'expires_at_ms', 'version'])
      .executeTakeFirst();
    return row && failureWindow(row, now);
  }

  async prune(): Promise<number> {
    const now = this.clock.now();
    const [revocations, failures] = await Promise.all([
      this.db.deleteFrom('auth_revocations').where('expires_at_ms', '<=', now).executeTakeFirst(),
      this.db.deleteFrom('auth_login_failures').where('expires_at_ms', '<=', now).executeTakeFirst(),
    ]);
    return Number(revocations.numDeletedRows) + Number(failures.numDeletedRows);
  }

  async snapshot(): Promise<AuthStateSnapshot> {
    const now = this.clock.now();
    const [revocations, failures] = await Promise.all([
      this.db
        .selectFrom('auth_revocations')
        .select(['kind', 'id', 'expires_at_ms'])
        .where('expires_at_ms', '>', now)
        .execute(),
      this.db
        .selectFrom('auth_login_failures')
        .select(['subject', 'failures', 'expires_at_ms', 'version'])
        .where('expires_at_ms', '>', now)
        .execute(),
    ]);
    return {
      revocations: revocations.map((r) => ({
        kind: r.kind as RevocationKind,
        id: r.id,
        expiresAtMs: Number(r.expires_at_ms),
      })),
      failures: failures.map((f) => ({
        subject: f.subject,
        count: Number(f.failures),
        expiresAtMs: Number(f.expires_at_ms),
        version: Number(f.version),
      })),
    };
  }
}

/** The least version a change at `now` gets: the clock's milliseconds times 1,000. */
function clockVersion(now: number): number {
  return Math.floor(now) * 1000;
}

/**
 * A change's version: one more than the record's, and at least the clock's. A record pruned and
 * begun again (a window or more later) thus still comes after every copy of the old one, and
 * instances whose clocks differ by less than a window still order every change of a record.
 */
function nextVersion(atLeast: number) {
  return sql<number>`CASE WHEN auth_login_failures.version >= ${atLeast}
    THEN auth_login_failures.version + 1 ELSE ${atLeast} END`;
}

function failureWindow(
  row: { failures: number | bigint; expires_at_ms: number | bigint; version: number | bigint },
  now: number,
): FailureWindow {
  const expiresAtMs = Number(row.expires_at_ms);
  return { count: Number(row.failures), ttlMs: expiresAtMs - now, expiresAtMs, version: Number(row.version) };
}
