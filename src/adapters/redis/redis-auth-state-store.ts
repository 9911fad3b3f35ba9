import { randomUUID } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';
import { BackendUnavailableError } from '../../domain/errors.js';
import type {
  AuthStateStore,
  DurableAuthStateStore,
  FailureWindow,
  RevocationKind,
} from '../../ports/auth-state-store.js';
import { type Clock, systemClock } from '../../ports/clock.js';
import { DIRECT_CALLS, type RedisCalls } from './redis-link.js';

/**
 * Reads one entry, but only from a copy that was completely seeded: without the marker (a Redis
 * that restarted empty, or evicted it) the answer is {0} and the caller asks the database.
 * Returns {0} (not seeded), {1} (absent) or {1, value}.
 */
const READ = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local value = redis.call('GET', KEYS[2])
if not value then return {1} end
return {1, value}`;

/**
 * Writes an entry unless the one there is as new or newer: copies written out of order, or by a
 * rebuild racing a change, keep the latest state. A revocation's value is its expiry, which
 * orders it; a failure record's is `count:expiresAtMs:version`, ordered by the version (a value
 * of two fields, from before versions, comes before every versioned one). ARGV: value, its
 * order, ttlMs.
 */
const WRITE_NEWER = `
local current = redis.call('GET', KEYS[1])
if current then
  local order = tonumber(current)
  if not order then
    local version = string.match(current, '^[^:]*:[^:]*:(.+)$')
    order = version and tonumber(version) or 0
  end
  if order >= tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1`;

/**
 * A rebuild's write: WRITE_NEWER while the rebuild's token is still there, else nothing (-1). An
 * entry removed since the rebuild's snapshot deleted the token with it, atomically, so no entry
 * of that snapshot is written back after it. KEYS: entry, token. ARGV: as WRITE_NEWER's, then
 * this rebuild's token.
 */
const REBUILD_WRITE = `
if redis.call('GET', KEYS[2]) ~= ARGV[4] then return -1 end
${WRITE_NEWER}`;

/**
 * Ends a rebuild: marks the copy complete, but only if the rebuild's token is still there. A copy
 * that failed, or an entry removed, since the rebuild began deleted the token (the rebuild's
 * snapshot may predate that change); so did a rebuild begun later, which marks it instead.
 * KEYS: token, marker. ARGV: this rebuild's token. Returns 1 when marked.
 */
const FINISH_REBUILD = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return 1`;

type ReadReply = [0] | [1] | [1, string];

interface AuthStateCommands {
  authStateRead(marker: string, key: string): Promise<ReadReply>;
  authStateWriteNewer(key: string, value: string, order: number, ttlMs: number): Promise<number>;
  authStateFinishRebuild(token: string, marker: string, id: string): Promise<number>;
}

interface RebuildPipeline extends ChainableCommander {
  authStateRebuildWrite(
    key: string,
    token: string,
    value: string,
    order: number,
    ttlMs: number,
    id: string,
  ): RebuildPipeline;
}

export interface RedisAuthStateStoreOptions {
  /** Prepended to every key (REDIS_KEY_PREFIX). */
  readonly keyPrefix: string;
  /** Deadlines and fast failure (a RedisLink); straight calls by default. */
  readonly calls?: RedisCalls;
  readonly clock?: Clock;
  /** Told when a rebuild of the copy fails (it is tried again at the next miss). */
  readonly onRebuildFailed?: (error: unknown) => void;
}

/** Entries written per round trip when the copy is rebuilt. */
const REBUILD_BATCH = 1000;
/** How long a rebuild's token outlives an instance that died during the rebuild. */
const REBUILD_TOKEN_TTL_MS = 10 * 60_000;

/**
 * The database's revocations and lockouts with a copy in Redis that every instance reads fast.
 * Changes go to the database first (the record), then to Redis; reads come from Redis while it
 * holds a complete copy, else (Redis away, or back empty) from the database, and a copy that
 * went missing is rebuilt from the database in the background. Call `rebuild()` when Redis is
 * back after being away: changes this instance could not copy meanwhile reach it then.
 *
 * A rebuild copies a snapshot, so a change made while it runs may be missing from what it
 * copies: the change's own copy is then what brings it. When that copy fails, or the change is a
 * removal (which the snapshot's older entry would bring back), the change deletes the rebuild's
 * token, and the rebuild ends without marking the copy complete (the next read starts another).
 */
export class RedisAuthStateStore implements AuthStateStore {
  private readonly redis: Redis & AuthStateCommands;
  private readonly calls: RedisCalls;
  private readonly clock: Clock;
  private readonly marker: string;
  /** The token of the rebuild under way (any instance's); see FINISH_REBUILD. */
  private readonly rebuildToken: string;
  private rebuilding: Promise<void> | undefined;
  /** A rebuild asked for while one runs: it starts when that one ends. */
  private rebuildingNext: Promise<void> | undefined;

  /** Takes ownership of `redis`: `close()` ends the connection. */
  constructor(
    private readonly durable: DurableAuthStateStore,
    redis: Redis,
    private readonly options: RedisAuthStateStoreOptions,
  ) {
    redis.defineCommand('authStateRead', { numberOfKeys: 2, lua: READ });
    redis.defineCommand('authStateWriteNewer', { numberOfKeys: 1, lua: WRITE_NEWER });
    redis.defineCommand('authStateRebuildWrite', { numberOfKeys: 2, lua: REBUILD_WRITE });
    redis.defineCommand('authStateFinishRebuild', { numberOfKeys: 2, lua: FINISH_REBUILD });
    this.redis = redis as Redis & AuthStateCommands;
    this.calls = options.calls ?? DIRECT_CALLS;
    this.clock = options.clock ?? systemClock;
    this.marker = `${options.keyPrefix}auth:seeded`;
    this.rebuildToken = `${options.keyPrefix}auth:rebuilding`;
  }

  async revoke(kind: RevocationKind, id: string, expiresAtMs: number): Promise<void> {
    await this.durable.revoke(kind, id, expiresAtMs);
    const end = Math.ceil(expiresAtMs);
    await this.copy(this.revocationKey(kind, id), String(end), end, end);
  }

  async isRevoked(kind: RevocationKind, id: string): Promise<boolean> {
    const value = await this.read(this.revocationKey(kind, id));
    if (value === 'unknown') return this.durable.isRevoked(kind, id);
    return value !== undefined && Number(value) > this.clock.now();
  }

  async lift(kind: RevocationKind, id: string): Promise<void> {
    await this.durable.lift(kind, id);
    await this.remove(this.revocationKey(kind, id));
  }

  async recordFailure(subject: string, windowMs: number): Promise<FailureWindow> {
    const window = await this.durable.recordFailure(subject, windowMs);
    await this.copyFailures(subject, window);
    return window;
  }

  async failures(subject: string): Promise<FailureWindow | undefined> {
    const value = await this.read(this.failureKey(subject));
    if (value === 'unknown') return this.durable.failures(subject);
    if (value === undefined) return undefined;
    const [count, expiresAtMs, version = 0] = value.split(':').map(Number) as [number, number, number?];
    const ttlMs = expiresAtMs - this.clock.now();
    return ttlMs > 0 && count > 0 ? { count, ttlMs, expiresAtMs, version } : undefined;
  }

  /**
   * The cleared record is copied (count 0, its version): a failure's copy still on its way from
   * another instance is older and refused, where a deleted entry would let it in.
   */
  async clearFailures(subject: string): Promise<FailureWindow | undefined> {
    const cleared = await this.durable.clearFailures(subject);
    if (cleared === undefined) await this.remove(this.failureKey(subject));
    else await this.copyFailures(subject, cleared);
    return cleared;
  }

  /** Redis expires its copies by itself; the database's rows are pruned here. */
  prune(): Promise<number> {
    return this.durable.prune();
  }

  /**
   * Copies everything in force from the database, then marks the copy complete, in a rebuild that
   * begins after this call: one under way may have read the database before a change this
   * instance could not copy (Redis away), so when one runs, the next one starts when it ends.
   */
  rebuild(): Promise<void> {
    if (this.rebuilding === undefined) return this.startRebuild();
    this.rebuildingNext ??= this.rebuilding
      .catch(() => undefined)
      .then(() => {
        this.rebuildingNext = undefined;
        return this.startRebuild();
      });
    return this.rebuildingNext;
  }

  async close(): Promise<void> {
    await this.rebuildingNext?.catch(() => undefined);
    await this.rebuilding?.catch(() => undefined);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  /** A rebuild now, or the one under way (what a read that found the copy incomplete needs). */
  private startRebuild(): Promise<void> {
    this.rebuilding ??= this.copyAll().finally(() => {
      this.rebuilding = undefined;
    });
    return this.rebuilding;
  }

  private async copyAll(): Promise<void> {
    // The token before the snapshot: any change the snapshot may miss is made after the token is
    // set, so a change that deletes it is seen at the end (FINISH_REBUILD).
    const id = randomUUID();
    await this.calls.call(() => this.redis.set(this.rebuildToken, id, 'PX', REBUILD_TOKEN_TTL_MS));
    const { revocations, failures } = await this.durable.snapshot();
    const now = this.clock.now();
    const entries = [
      ...revocations.map(
        (r) => [this.revocationKey(r.kind, r.id), String(r.expiresAtMs), r.expiresAtMs, r.expiresAtMs] as const,
      ),
      ...failures.map((f) => [this.failureKey(f.subject), failureValue(f), f.expiresAtMs, f.version] as const),
    ];
    for (let start = 0; start < entries.length; start += REBUILD_BATCH) {
      const pipeline = this.redis.pipeline() as RebuildPipeline;
      for (const [key, value, expiresAtMs, order] of entries.slice(start, start + REBUILD_BATCH)) {
        const ttlMs = Math.max(1, expiresAtMs - now);
        pipeline.authStateRebuildWrite(key, this.rebuildToken, value, order, ttlMs, id);
      }
      const results = await this.calls.call(() => pipeline.exec());
      const failed = results?.find(([error]) => error !== null);
      if (failed) throw failed[0];
      // The token is gone: a change since the snapshot; the next read starts another rebuild.
      if (results?.some(([, result]) => result === -1)) return;
    }
    await this.calls.call(() => this.redis.authStateFinishRebuild(this.rebuildToken, this.marker, id));
  }

  /** The value in the copy; 'unknown' when the copy cannot answer (incomplete, or Redis away). */
  private async read(key: string): Promise<string | undefined | 'unknown'> {
    let reply: ReadReply;
    try {
      reply = await this.calls.call(() => this.redis.authStateRead(this.marker, key));
    } catch (error) {
      if (error instanceof BackendUnavailableError) return 'unknown';
      throw error;
    }
    if (reply[0] === 0) {
      this.rebuild().catch((error: unknown) => this.options.onRebuildFailed?.(error));
      return 'unknown';
    }
    return reply[1];
  }

  /**
   * Best effort: the database has it. A copy that fails leaves the copy incomplete, so it is
   * marked so (readers ask the database and rebuild it); when Redis cannot even be told, the
   * rebuild when it is back repairs it.
   */
  private async copy(key: string, value: string, order: number, expiresAtMs: number): Promise<void> {
    const ttlMs = expiresAtMs - this.clock.now();
    if (ttlMs <= 0) return;
    await this.calls
      .call(() => this.redis.authStateWriteNewer(key, value, order, Math.ceil(ttlMs)))
      .catch(() => this.distrustCopy());
  }

  /** The database's record (its end of the window, its version), not this instance's clock. */
  private copyFailures(subject: string, window: FailureWindow): Promise<void> {
    return this.copy(this.failureKey(subject), failureValue(window), window.version, window.expiresAtMs);
  }

  /** With the rebuild's token: a rebuild under way would copy the entry back from its snapshot. */
  private async remove(key: string): Promise<void> {
    await this.calls.call(() => this.redis.del(key, this.rebuildToken)).catch(() => this.distrustCopy());
  }

  private async distrustCopy(): Promise<void> {
    await this.calls.call(() => this.redis.del(this.marker, this.rebuildToken)).catch(() => undefined);
  }

  private revocationKey(kind: RevocationKind, id: string): string {
    return `${this.options.keyPrefix}auth:revoked:${kind}:${id}`;
  }

  private failureKey(subject: string): string {
    return `${this.options.keyPrefix}auth:failures:${subject}`;
  }
}

function failureValue(record: { count: number; expiresAtMs: number; version: number }): string {
  return `${record.count}:${record.expiresAtMs}:${record.version}`;
}
