/**
 * The load driver: concurrent writers sending a mix of changes round-robin to the API processes,
 * each writer working on links of its own (so no writer's change refuses another's), every
 * request and its outcome recorded for the checker.
 */
import { seededRandom } from '../../bench/lib/codes.js';
import { HttpClient } from './http-client.js';

/** Changes (`create` … `execute`) and reads: `redirect` (`GET /{code}`, counts a click), `session` (`GET /api/v1/auth/me`). */
export type OpKind = 'create' | 'update' | 'delete' | 'execute' | 'redirect' | 'session';

export interface OpRecord {
  readonly kind: OpKind;
  /** Which API process it went to (index into the targets). */
  readonly target: number;
  readonly startedAt: number;
  readonly endedAt: number;
  /** The status, or null when no answer came. */
  readonly status: number | null;
  /** Why no answer came, or the body of an error answer. */
  readonly error?: string;
  readonly code?: string;
  /** update: the target URL it set (unique, so its event can be told apart). */
  readonly url?: string;
  /** execute: the id the 202 named. */
  readonly executionId?: string;
}

export interface LoadOptions {
  /** API base URLs; requests go round-robin. */
  readonly targets: readonly string[];
  readonly concurrency: number;
  /** Relative weights of the operations. */
  readonly mix: Partial<Record<OpKind, number>>;
  /** One or two letters starting every code of this load (codes are unique within it). */
  readonly codePrefix: string;
  /** Session cookies for `POST /execute`, used round-robin by the writers. */
  readonly sessions?: readonly string[];
  /** The script each execution runs. */
  readonly script?: string;
  /** Deadline of one request; a request without an answer by then counts as unanswered. */
  readonly requestTimeoutMs?: number;
  /** Pause after each request of a writer. */
  readonly thinkMs?: number;
  /**
   * Besides the writers, one client submitting an execution, waiting for the answer, then this
   * long, round-robin like the rest: a steady stream the worker can keep up with (executions in
   * the mix would come as fast as the writes, far faster than a sandbox runs them).
   */
  readonly executeEveryMs?: number;
}

const is2xx = (status: number | null) => status !== null && status >= 200 && status < 300;

export class Load {
  readonly records: OpRecord[] = [];
  private readonly client: HttpClient;
  private stopping = false;
  private issued = 0;
  private round = 0;
  private updates = 0;
  private running: Promise<void> | undefined;
  private limit = Number.POSITIVE_INFINITY;
  private writersDone = false;

  constructor(private readonly options: LoadOptions) {
    this.client = new HttpClient(options.concurrency);
  }

  /** Starts the writers; they stop after `total` requests in all, or when `stop()` is called. */
  start(total = Number.POSITIVE_INFINITY): this {
    this.limit = total;
    const writers = Promise.all(Array.from({ length: this.options.concurrency }, (_, i) => this.writer(i)));
    const executions = this.options.executeEveryMs === undefined ? undefined : this.executions();
    this.running = writers.then(async () => {
      this.writersDone = true;
      await executions;
    });
    return this;
  }

  /** Resolves once every writer has finished (after `total`, or after `stop()`). */
  async done(): Promise<void> {
    await this.running;
    this.client.close();
  }

  /** Stops issuing requests and waits for the ones in flight. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.done();
  }

  private pick(next: () => number): OpKind {
    const entries = Object.entries(this.options.mix) as [OpKind, number][];
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let r = next() * total;
    for (const [kind, weight] of entries) {
      r -= weight;
      if (r < 0) return kind;
    }
    return entries[0]![0];
  }

  private async writer(index: number): Promise<void> {
    const next = seededRandom(index * 7919 + 17);
    const live: string[] = [];
    let created = 0;
    while (!this.stopping && this.issued < this.limit) {
      this.issued++;
      let kind = this.pick(next);
      if (kind !== 'create' && kind !== 'execute' && kind !== 'session' && live.length === 0) kind = 'create';
      const target = this.round++ % this.options.targets.length;
      const record = await this.step(kind, index, target, live, next, () => ++created);
      // No answer (a process down, say): wait a little, as a client would, rather than spin.
      const pause = record.status === null ? 100 : (this.options.thinkMs ?? 0);
      if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  /** One request of writer `index`; `live` is its links, updated as they are created and deleted. */
  private async step(
    kind: OpKind,
    index: number,
    target: number,
    live: string[],
    next: () => number,
    nextNumber: () => number,
  ): Promise<OpRecord> {
    const base = this.options.targets[target]!;
    if (kind === 'create') {
      const code = `${this.options.codePrefix}${index.toString(36).padStart(2, '0')}${String(nextNumber()).padStart(5, '0')}`;
      const body = { code, url: `https://example.com/${code}`, created_at: '2024-01-01T00:00:00Z', click_count: 0 };
      const record = await this.send(kind, target, base, 'POST', '/shorten', { body }, { code });
      if (is2xx(record.status)) live.push(code);
      return record;
    }
    if (kind === 'update') {
      const code = live[Math.floor(next() * live.length)]!;
      const url = `https://example.com/${code}/u${++this.updates}`;
      return this.send(kind, target, base, 'PATCH', `/${code}`, { body: { url } }, { code, url });
    }
    if (kind === 'delete') {
      // Gone from the writer's links whatever the answer: a later change to it would only be refused.
      const code = live.splice(Math.floor(next() * live.length), 1)[0]!;
      return this.send(kind, target, base, 'DELETE', `/${code}`, {}, { code });
    }
    if (kind === 'redirect') {
      const code = live[Math.floor(next() * live.length)]!;
      return this.send(kind, target, base, 'GET', `/${code}`, {}, { code });
    }
    if (kind === 'session') {
      return this.send(kind, target, base, 'GET', '/api/v1/auth/me', { headers: { cookie: this.session(index) } });
    }
    return this.execute(index, target, base);
  }

  private async executions(): Promise<void> {
    for (let n = 0; !this.stopping && !this.writersDone; n++) {
      const target = this.round++ % this.options.targets.length;
      await this.execute(n, target, this.options.targets[target]!);
      await new Promise((resolve) => setTimeout(resolve, this.options.executeEveryMs));
    }
  }

  private session(index: number): string {
    const sessions = this.options.sessions ?? [];
    if (sessions.length === 0) throw new Error('execute and session need sessions');
    return sessions[index % sessions.length]!;
  }

  private execute(index: number, target: number, base: string): Promise<OpRecord> {
    const cookie = this.session(index);
    const script = this.options.script ?? 'let s = 0; for (let i = 0; i < 1000; i++) s += i; s';
    return this.send(
      'execute',
      target,
      base,
      'POST',
      '/execute',
      { body: { language: 'javascript', script }, headers: { cookie } },
      {},
      (status, body) =>
        status === 202 ? { executionId: (JSON.parse(body) as { execution_id: string }).execution_id } : {},
    );
  }

  private async send(
    kind: OpKind,
    target: number,
    base: string,
    method: string,
    path: string,
    request: { body?: unknown; headers?: Record<string, string> },
    fields: Partial<OpRecord> = {},
    fromBody: (status: number, body: string) => Partial<OpRecord> = () => ({}),
  ): Promise<OpRecord> {
    const startedAt = Date.now();
    const answer = await this.client.request(base, method, path, {
      ...request,
      timeoutMs: this.options.requestTimeoutMs ?? 30_000,
    });
    const failed = answer.status === null || answer.status >= 400;
    const record: OpRecord = {
      kind,
      target,
      startedAt,
      endedAt: Date.now(),
      status: answer.status,
      // Why it failed: no answer, or the error answer's body.
      ...(failed ? { error: answer.error ?? answer.body.slice(0, 300) } : {}),
      ...fields,
      ...(answer.status === null ? {} : fromBody(answer.status, answer.body)),
    };
    this.records.push(record);
    return record;
  }
}

/** Counts of the records by operation and status (`none` for no answer). */
export function statusCounts(records: readonly OpRecord[]): Record<string, Record<string, number>> {
  const counts: Record<string, Record<string, number>> = {};
  for (const r of records) {
    const byStatus = (counts[r.kind] ??= {});
    const key = r.status === null ? 'none' : String(r.status);
    byStatus[key] = (byStatus[key] ?? 0) + 1;
  }
  return counts;
}
