/**
 * The checker: every acknowledged change (a 2xx) against what was stored. Each change has an
 * identity its event carries: a created or deleted link its code, an update the unique URL it set,
 * an execution its id. An acknowledged change must have exactly one event (none is lost, none
 * doubled); a change that got no answer or a 5xx may have one or none (it may have committed); a
 * refused one (4xx) none. Acknowledged links must exist (unless a delete of theirs was tried),
 * deleted ones must not, and every acknowledged execution must reach one final state, once.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import type { OpKind, OpRecord } from './load.js';

export interface StoredEvent {
  readonly event_type: string;
  readonly payload: Record<string, unknown>;
}

export interface StoredState {
  readonly events: readonly StoredEvent[];
  /** Codes of the mappings in the database. */
  readonly mappings: ReadonlySet<string>;
  /** Execution id → status. */
  readonly executions: ReadonlyMap<string, string>;
}

const FINAL = new Set(['execution.completed', 'execution.failed', 'execution.timed_out']);
const FINAL_STATUSES = new Set(['completed', 'failed', 'timed_out']);

/** The identity of the change an event records, or undefined for events the checker does not follow. */
function eventKey(event: StoredEvent): string | undefined {
  const p = event.payload;
  switch (event.event_type) {
    case 'url.created':
      return `create ${String(p.code)}`;
    case 'url.updated':
      return `update ${String(p.url)}`;
    case 'url.deleted':
      return `delete ${String(p.code)}`;
    case 'execution.requested':
      return `execute ${String(p.execution_id)}`;
    default:
      return FINAL.has(event.event_type) ? `final ${String(p.execution_id)}` : undefined;
  }
}

function recordKey(r: OpRecord): string | undefined {
  if (r.kind === 'create' || r.kind === 'delete') return `${r.kind} ${r.code}`;
  if (r.kind === 'update') return `update ${r.url}`;
  if (r.kind === 'execute' && r.executionId) return `execute ${r.executionId}`;
  return undefined;
}

export interface Verdict {
  /** Per operation; `total` counts the changes, `redirect` and `session` are reads (302 or 200). */
  readonly acknowledged: Record<OpKind | 'total', number>;
  /** Changes without an answer (or with a 5xx): they may or may not have happened. */
  readonly uncertain: number;
  /** Acknowledged changes whose event is missing, and acknowledged links missing from the database. */
  readonly lost: readonly string[];
  /** Changes recorded by more than one event, executions finished more than once. */
  readonly duplicated: readonly string[];
  /** Refused changes that have an event anyway, deleted links still there. */
  readonly unexpected: readonly string[];
  /** Acknowledged executions without a final state. */
  readonly stuck: readonly string[];
}

const is2xx = (s: number | null) => s !== null && s >= 200 && s < 300;
const isUncertain = (s: number | null) => s === null || s >= 500;

export function check(records: readonly OpRecord[], state: StoredState): Verdict {
  const counts = new Map<string, number>();
  for (const event of state.events) {
    const key = eventKey(event);
    if (key) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const acknowledged = { create: 0, update: 0, delete: 0, execute: 0, redirect: 0, session: 0, total: 0 };
  const lost: string[] = [];
  const duplicated: string[] = [];
  const unexpected: string[] = [];
  const stuck: string[] = [];
  let uncertain = 0;
  const deleteTried = new Set(records.filter((r) => r.kind === 'delete').map((r) => r.code));
  for (const r of records) {
    if (r.kind === 'redirect' || r.kind === 'session') {
      if (is2xx(r.status) || r.status === 302) acknowledged[r.kind]++;
      continue;
    }
    const key = recordKey(r);
    const n = key ? (counts.get(key) ?? 0) : 0;
    if (is2xx(r.status)) {
      acknowledged[r.kind]++;
      acknowledged.total++;
      if (n === 0) lost.push(`${key}: acknowledged ${r.status}, no event`);
      if (n > 1) duplicated.push(`${key}: ${n} events`);
    } else if (isUncertain(r.status)) {
      uncertain++;
      if (n > 1) duplicated.push(`${key}: ${n} events (unanswered)`);
    } else if (n > 0) {
      unexpected.push(`${key}: refused ${r.status}, yet ${n} event(s)`);
    }
    if (r.kind === 'create' && is2xx(r.status) && !deleteTried.has(r.code) && !state.mappings.has(r.code!)) {
      lost.push(`mapping ${r.code}: acknowledged, not in the database`);
    }
    if (r.kind === 'delete' && is2xx(r.status) && state.mappings.has(r.code!)) {
      unexpected.push(`mapping ${r.code}: deleted (${r.status}), still in the database`);
    }
    if (r.kind === 'execute' && is2xx(r.status) && r.executionId) {
      const finals = counts.get(`final ${r.executionId}`) ?? 0;
      const status = state.executions.get(r.executionId);
      if (finals > 1) duplicated.push(`execution ${r.executionId}: finished ${finals} times`);
      if (finals === 0 || !status || !FINAL_STATUSES.has(status)) {
        stuck.push(`execution ${r.executionId}: ${status ?? 'missing'}, ${finals} final event(s)`);
      }
    }
  }
  return { acknowledged, uncertain, lost, duplicated, unexpected, stuck };
}

/** Whether nothing is missing yet (lost or stuck); duplicates and surprises are judged at the end. */
export function complete(verdict: Verdict): boolean {
  return verdict.lost.length === 0 && verdict.stuck.length === 0;
}

const FOLLOWED = ['url.created', 'url.updated', 'url.deleted', 'execution.requested', ...FINAL];

/**
 * Clicks acknowledged (302) against clicks stored, per mapping never deleted. `lost`: acknowledged
 * and not stored. `phantom`: stored beyond the 302s and the redirects that got no answer (which
 * may have been counted), that is a click counted twice or never made. With `killedAt` (a
 * `kill -9`), `tooOld` lists the mappings missing a click acknowledged more than `writtenWithinMs`
 * before it, and `oldestLostAgeMs` says how old the oldest lost click must be.
 */
export function clickAccount(
  records: readonly OpRecord[],
  stored: ReadonlyMap<string, number>,
  { killedAt = Number.POSITIVE_INFINITY, writtenWithinMs = 0 }: { killedAt?: number; writtenWithinMs?: number } = {},
) {
  const deleted = new Set(records.filter((r) => r.kind === 'delete').map((r) => r.code));
  const perCode = new Map<
    string,
    { tried: number; acked: number; unanswered: number; ackedEarly: number; lastAck: number[] }
  >();
  for (const r of records) {
    if (r.kind !== 'redirect' || deleted.has(r.code)) continue;
    const entry = perCode.get(r.code!) ?? { tried: 0, acked: 0, unanswered: 0, ackedEarly: 0, lastAck: [] };
    entry.tried++;
    if (r.status === null) entry.unanswered++;
    if (r.status === 302) {
      entry.acked++;
      entry.lastAck.push(r.endedAt);
      if (r.endedAt < killedAt - writtenWithinMs) entry.ackedEarly++;
    }
    perCode.set(r.code!, entry);
  }
  let acked = 0;
  let lost = 0;
  let oldestLostAgeMs = 0;
  const tooOld: string[] = [];
  const phantom: string[] = [];
  for (const [code, e] of perCode) {
    const n = stored.get(code) ?? 0;
    acked += e.acked;
    const missing = e.acked - n;
    if (missing > 0) {
      lost += missing;
      // The clicks lost are at best the latest ones: the age of the oldest that must be among them.
      const latest = e.lastAck.sort((x, y) => x - y).slice(-missing);
      if (Number.isFinite(killedAt)) oldestLostAgeMs = Math.max(oldestLostAgeMs, killedAt - latest[0]!);
    }
    if (n < e.ackedEarly)
      tooOld.push(`${code}: ${e.ackedEarly} clicks acknowledged before the last interval, ${n} stored`);
    if (n > e.acked + e.unanswered) {
      phantom.push(
        `${code}: ${e.acked} redirects answered 302 and ${e.unanswered} unanswered (of ${e.tried}), ${n} clicks stored`,
      );
    }
  }
  return { acked, lost, oldestLostAgeMs, tooOld, phantom };
}

/** Each mapping's stored clicks on PostgreSQL: the folded count plus the deltas not folded yet. */
export async function postgresClicks(url: string): Promise<Map<string, number>> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ code: string; clicks: string }>(
      `SELECT m.code, m.click_count + COALESCE(d.delta, 0) AS clicks
         FROM url_mappings m LEFT JOIN url_click_deltas d ON d.url_id = m.id`,
    );
    return new Map(rows.map((r) => [r.code, Number(r.clicks)]));
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** What the worker's event store and the tables hold, on PostgreSQL. */
export async function postgresState(url: string): Promise<StoredState> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const events = await client.query<{ event_type: string; payload: string }>(
      'SELECT event_type, payload FROM event_store WHERE event_type = ANY($1)',
      [FOLLOWED],
    );
    const mappings = await client.query<{ code: string }>('SELECT code FROM url_mappings');
    const executions = await client.query<{ id: string; status: string }>('SELECT id, status FROM executions');
    return {
      events: events.rows.map((r) => ({ event_type: r.event_type, payload: JSON.parse(r.payload) as never })),
      mappings: new Set(mappings.rows.map((r) => r.code)),
      executions: new Map(executions.rows.map((r) => [r.id, r.status])),
    };
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Where the events of a PostgreSQL deployment are, for a report: rows waiting in the outbox, events stored, dead letters. */
export async function postgresEventCounts(url: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const counts: Record<string, number> = {};
    const outbox = await client.query<{ n: string }>('SELECT count(*) AS n FROM event_outbox');
    counts.outbox = Number(outbox.rows[0]!.n);
    const letters = await client.query<{ n: string }>('SELECT count(*) AS n FROM dead_letters');
    counts.dead_letters = Number(letters.rows[0]!.n);
    const stored = await client.query<{ event_type: string; n: string }>(
      'SELECT event_type, count(*) AS n FROM event_store GROUP BY event_type',
    );
    for (const row of stored.rows) counts[`stored ${row.event_type}`] = Number(row.n);
    return counts;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The same from a SQLite file; `source` is the event store or the embedded log itself. */
export function sqliteState(file: string, source: 'event_store' | 'event_log'): StoredState {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const rows =
      source === 'event_store'
        ? (db.prepare('SELECT event_type, payload FROM event_store').all() as { event_type: string; payload: string }[])
        : (db.prepare('SELECT envelope FROM event_log').all() as { envelope: string }[]).map((r) => {
            const envelope = JSON.parse(r.envelope) as { event_type: string; payload: unknown };
            return { event_type: envelope.event_type, payload: JSON.stringify(envelope.payload) };
          });
    const mappings = db.prepare('SELECT code FROM url_mappings').all() as { code: string }[];
    const executions = db.prepare('SELECT id, status FROM executions').all() as { id: string; status: string }[];
    return {
      events: rows
        .filter((r) => FOLLOWED.includes(r.event_type))
        .map((r) => ({ event_type: r.event_type, payload: JSON.parse(r.payload) as never })),
      mappings: new Set(mappings.map((r) => r.code)),
      executions: new Map(executions.map((r) => [r.id, r.status])),
    };
  } finally {
    db.close();
  }
}

/**
 * Waits until nothing acknowledged is missing (or `timeoutMs` passes), then a little longer so
 * that late duplicates show, and returns the final verdict and how long the wait took.
 */
export async function settle(
  records: readonly OpRecord[],
  read: () => Promise<StoredState>,
  { timeoutMs = 30_000, quietMs = 1500 } = {},
): Promise<{ verdict: Verdict; caughtUpMs: number | null }> {
  const started = Date.now();
  let caughtUpMs: number | null = null;
  while (Date.now() - started < timeoutMs) {
    const verdict = check(
      records,
      await read().catch(() => ({ events: [], mappings: new Set<string>(), executions: new Map() })),
    );
    if (complete(verdict)) {
      caughtUpMs = Date.now() - started;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (caughtUpMs !== null) await new Promise((resolve) => setTimeout(resolve, quietMs));
  return { verdict: check(records, await read()), caughtUpMs };
}
