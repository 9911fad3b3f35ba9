import type pg from 'pg';
import { withDeadline } from '../../support/deadline.js';

/**
 * A statement sent on a PostgreSQL connection that has been cut without either side hearing of it
 * (a NAT or firewall that dropped the connection's state, a network split, the server's host gone)
 * is never answered, and node's socket gives up only when the kernel's retransmissions do: about
 * 15 minutes on Linux. Meanwhile the request that sent it hangs. A statement can also be slow (a
 * large import's batch, a lock wait): the server is running it, and nothing comes back until it is
 * done either. The two look the same from the socket.
 *
 * This tells them apart by asking the server. A statement unanswered for `checkMs` has its session
 * looked up in `pg_stat_activity` on a new connection (one for every connection due at once):
 * - the server cannot be reached on a new connection either (no connection within
 *   `connectTimeoutMs`, or no answer within as long again, or the socket failed): the connection
 *   is given up; a server that refuses the look-up (too many
 *   connections, starting up) was reached, and nothing is known: left alone;
 * - its session is gone (ended by the server's timeouts, an administrator): given up;
 * - its session is not running a statement, and has not been for half of `checkMs`: the statement
 *   never arrived, or its answer was lost on the way: given up, and the session ended on the
 *   server at once (`pg_terminate_backend`), with its transaction's locks;
 * - its session is running one (`active`, a lock wait too), or its state is not shown: left alone,
 *   and looked up again `checkMs` later.
 * A connection given up is closed (`client.end()`: its socket destroyed), its statements fail with
 * `Connection terminated` (503 `Database unavailable`) and the pool replaces it. What a statement
 * did is unknown, as with any connection lost while waiting: it was never acknowledged.
 *
 * A session that could not be ended (the server unreachable) would keep its locks until the server
 * hears of the cut (`DB_IDLE_IN_TRANSACTION_TIMEOUT_MS` inside a transaction, its TCP keepalive,
 * two hours by default, otherwise): it is ended at the first look-up that reaches the server, tried
 * again every `checkMs`, so that the instance's own writes do not wait for its lost locks once the
 * path is back.
 */
export class UnansweredStatements {
  private readonly connections = new Set<Watched>();
  /** Sessions of connections given up that are still to be ended on the server. */
  private orphans: SessionKey[] = [];
  private orphansDue = 0;
  private readonly timer: NodeJS.Timeout;
  private looking = false;

  constructor(private readonly options: UnansweredStatementsOptions) {
    this.timer = setInterval(() => this.check(), Math.min(1000, Math.max(50, options.checkMs / 4)));
    this.timer.unref();
  }

  /**
   * Watches `client`'s statements from now until it ends: call when the pool opens it. `session`:
   * its session as the connection itself reports it (`SESSION_QUERY`'s row). When that is not the
   * process the server named at login (a pooler such as PgBouncer in between, whose sessions are
   * not the server's), the session cannot be looked up, and only an unreachable server gives the
   * connection up.
   */
  watch(client: pg.PoolClient, session: Promise<SessionKey | undefined>): void {
    const watched: Watched = { client, outstanding: 0, since: 0, due: 0, answers: 0, pooled: false };
    this.connections.add(watched);
    void session.then((own) => {
      if (own === undefined) return;
      if (own.pid === (client as LoggedIn).processID) watched.started = own.started;
      else watched.pooled = true;
    });
    client.once('end', () => this.connections.delete(watched));
    const { checkMs } = this.options;
    const sent = () => {
      watched.since = Date.now();
      watched.due = watched.since + checkMs;
    };
    const answered = () => {
      watched.answers++;
      if (--watched.outstanding > 0) sent(); // the next one queued behind it goes now
    };
    const query = client.query as (...args: unknown[]) => unknown;
    // Every statement of the pool's callers goes through `query` (Kysely's): a promise when no callback is given.
    client.query = function (this: pg.PoolClient, ...args: unknown[]) {
      const result = query.apply(this, args);
      if (result instanceof Promise) {
        if (watched.outstanding++ === 0) sent();
        result.then(answered, answered);
      }
      return result;
    } as typeof client.query;
  }

  /** Stops watching (the pool is closing). */
  stop(): void {
    clearInterval(this.timer);
    this.connections.clear();
    this.orphans = [];
  }

  private check(): void {
    if (this.looking) return;
    const now = Date.now();
    const due = [...this.connections].filter((c) => c.outstanding > 0 && now >= c.due);
    if (due.length === 0 && (this.orphans.length === 0 || now < this.orphansDue)) return;
    this.looking = true;
    this.lookUp(due)
      .catch(() => undefined)
      .finally(() => (this.looking = false));
  }

  private async lookUp(due: Watched[]): Promise<void> {
    const { Client, connectionString, connectTimeoutMs, checkMs } = this.options;
    const probe = new Client({ connectionString, connectionTimeoutMillis: connectTimeoutMs });
    probe.on('error', () => undefined);
    try {
      const asked = due.map((watched) => ({ watched, answers: watched.answers, pid: pidOf(watched) }));
      // Each step within the connection deadline: connecting (pg's own timeout), then asking.
      const sessions = await probe
        .connect()
        .then(() =>
          withDeadline(
            sessionsOf(
              probe,
              asked.flatMap((a) => a.pid ?? []),
            ),
            connectTimeoutMs,
          ),
        )
        .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
      // Answers that reached this process before the look-up's, read first (its reply can be
      // handled ahead of theirs in one turn of the event loop, after the loop was held up).
      await new Promise((resolve) => setImmediate(resolve));
      const toEnd: SessionKey[] = sessions instanceof Error ? [] : this.orphans;
      this.orphans = sessions instanceof Error ? this.orphans : [];
      for (const { watched, answers, pid } of asked) {
        // Answered meanwhile: nothing was lost.
        if (watched.answers !== answers || watched.outstanding === 0 || !this.connections.has(watched)) continue;
        const verdict = judge(sessions, pid, checkMs);
        if (verdict === undefined) {
          watched.due = Date.now() + checkMs; // running, or just done: looked up again later
          continue;
        }
        if (verdict.end) toEnd.push(verdict.end);
        else if (sessions instanceof Error && pid !== undefined && watched.started !== undefined) {
          this.orphans = [...this.orphans, { pid, started: watched.started }].slice(-MAX_ORPHANS);
        }
        this.giveUp(watched, `${verdict.why}${verdict.end ? '; its session is ended on the server' : ''}`);
      }
      this.orphansDue = Date.now() + checkMs;
      if (toEnd.length === 0) return;
      await withDeadline(endSessions(probe, toEnd), connectTimeoutMs).catch(() => {
        this.orphans = [...this.orphans, ...toEnd].slice(-MAX_ORPHANS); // tried again next time
      });
    } finally {
      probe.end().catch(() => undefined);
    }
  }

  private giveUp(watched: Watched, why: string): void {
    this.connections.delete(watched);
    const waited = Date.now() - watched.since;
    this.options.onGivenUp(
      new Error(`a statement went unanswered for ${waited} ms and ${why}; the connection is closed`),
    );
    watched.client.end().catch(() => undefined);
  }
}

/** Sessions kept to be ended later, at most (the oldest are left to the server's own timeouts). */
const MAX_ORPHANS = 1000;

/** What the set-up query of a watched connection selects: its session, as `watch` wants it. */
export const SESSION_QUERY =
  'SELECT pid, backend_start::text AS started FROM pg_stat_activity WHERE pid = pg_backend_pid()';

/** Why a connection is given up, and the session to end on the server; undefined: it is not. */
function judge(
  sessions: Map<number, Session> | Error,
  pid: number | undefined,
  checkMs: number,
): { why: string; end?: Session } | undefined {
  if (sessions instanceof Error) {
    // It answered, with a refusal (too many connections, starting up): reachable, so nothing is known.
    if (answeredByServer(sessions)) return undefined;
    return { why: `the server did not answer a new connection either (${sessions.message})` };
  }
  if (pid === undefined) return undefined;
  const session = sessions.get(pid);
  if (session === undefined) return { why: `its session (${pid}) is gone from the server` };
  if (session.state === null || session.state === 'active' || session.idleMs < checkMs / 2) return undefined;
  const idle = `${Math.round(session.idleMs)} ms (${session.state})`;
  return {
    why: `its session (${pid}) has not been running it for ${idle}: it never arrived, or its answer was lost`,
    end: session,
  };
}

/** Whether `error` is the server's own (an ErrorResponse, with its SQLSTATE), not a silence or a socket's failure. */
function answeredByServer(error: Error): boolean {
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof severity === 'string' && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

function pidOf(watched: Watched): number | undefined {
  return watched.pooled ? undefined : ((watched.client as LoggedIn).processID ?? undefined);
}

/** The sessions of `pids` as the server shows them. */
async function sessionsOf(probe: pg.Client, pids: number[]): Promise<Map<number, Session>> {
  const { rows } = await probe.query<{ pid: number; state: string | null; idle_ms: number | null; started: string }>(
    `SELECT pid, state, extract(epoch FROM clock_timestamp() - state_change)::float8 * 1000 AS idle_ms,
            backend_start::text AS started
       FROM pg_stat_activity WHERE pid = ANY($1::int[])`,
    [pids],
  );
  return new Map(rows.map((row) => [row.pid, { ...row, idleMs: row.idle_ms ?? 0 }]));
}

/** Ends `sessions` on the server, each only if it is still the one seen (not a later one on its process id). */
async function endSessions(probe: pg.Client, sessions: readonly SessionKey[]): Promise<void> {
  await probe.query(
    `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
       JOIN unnest($1::int[], $2::text[]) AS s(pid, started) ON a.pid = s.pid AND a.backend_start::text = s.started`,
    [sessions.map((s) => s.pid), sessions.map((s) => s.started)],
  );
}

export interface UnansweredStatementsOptions {
  /** node-postgres's `Client`, for the look-ups' own connections. */
  readonly Client: typeof pg.Client;
  readonly connectionString: string;
  /** How long a statement goes unanswered before its session is looked up (and between look-ups). */
  readonly checkMs: number;
  /** How long a look-up may take to connect, and then to be answered, before the server counts as unreachable. */
  readonly connectTimeoutMs: number;
  /** Told why, for each connection given up. */
  readonly onGivenUp: (error: Error) => void;
}

interface Watched {
  readonly client: pg.PoolClient;
  /** Statements sent (or queued) and not yet answered. */
  outstanding: number;
  /** When the oldest of them was sent, as far as this can tell (the last answer's time, when queued). */
  since: number;
  /** When it is looked up, unanswered: `checkMs` after it was sent or last looked up. */
  due: number;
  /** Answers so far: a look-up's verdict holds only if none came while it asked. */
  answers: number;
  /** Known to be a pooler's connection, whose session the server does not show (see `watch`). */
  pooled: boolean;
  /** Its session's `backend_start`, once the connection reported it (see `watch`). */
  started?: string;
}

/** node-postgres keeps the server's process from login (BackendKeyData) on the client, untyped. */
type LoggedIn = pg.PoolClient & { readonly processID?: number | null };

/** A session on the server: its process id and `backend_start` as the server prints it (which tells it from a later one on the same process id). */
export interface SessionKey {
  readonly pid: number;
  readonly started: string;
}

interface Session extends SessionKey {
  readonly state: string | null;
  readonly idleMs: number;
}
