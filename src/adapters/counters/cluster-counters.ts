import type { Counters, CounterState } from '../../ports/counters.js';

/** The slice of a cluster worker's (or primary's) IPC channel these counters use. */
export interface CounterChannel {
  send(message: unknown): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

type Method = Exclude<keyof Counters, 'close'>;
const METHODS: ReadonlySet<string> = new Set<Method>([
  'increment',
  'get',
  'delete',
  'setFlag',
  'hasFlag',
  'bump',
  'version',
]);

interface Call {
  readonly type: 'urlshortener:counters';
  readonly id: number;
  readonly method: Method;
  readonly args: unknown[];
}

interface Reply {
  readonly type: 'urlshortener:counters-reply';
  readonly id: number;
  readonly result?: unknown;
  readonly error?: string;
}

const isCall = (m: unknown): m is Call =>
  (m as Partial<Call> | null)?.type === 'urlshortener:counters' && METHODS.has(String((m as Call).method));
const isReply = (m: unknown): m is Reply => (m as Partial<Reply> | null)?.type === 'urlshortener:counters-reply';

/**
 * Counters kept by the primary of `serve --workers N` (without Redis), reached over the cluster's
 * IPC channel: every serving process sees the others' changes, as instances do through Redis (a
 * settings change announced by one reaches all). A call the primary does not answer within
 * `timeoutMs` fails, as a Redis call past its deadline does.
 */
export class ClusterCounters implements Counters {
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
  >();
  private readonly listener = (message: unknown) => {
    if (!isReply(message)) return;
    const call = this.pending.get(message.id);
    if (!call) return;
    this.pending.delete(message.id);
    clearTimeout(call.timer);
    if (message.error !== undefined) call.reject(new Error(message.error));
    else call.resolve(message.result);
  };

  constructor(
    private readonly channel: CounterChannel,
    private readonly timeoutMs = 1_000,
  ) {
    channel.on('message', this.listener);
  }

  private call<T>(method: Method, ...args: unknown[]): Promise<T> {
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the cluster's primary did not answer counters.${method} within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      try {
        this.channel.send({ type: 'urlshortener:counters', id, method, args } satisfies Call);
      } catch (error) {
        this.pending.delete(id);
        clearTimeout(timer);
        reject(error as Error);
      }
    });
  }

  increment(key: string, ttlMs: number): Promise<number> {
    return this.call('increment', key, ttlMs);
  }
  async get(key: string): Promise<CounterState | undefined> {
    return (await this.call<CounterState | null>('get', key)) ?? undefined;
  }
  delete(key: string): Promise<void> {
    return this.call('delete', key);
  }
  setFlag(key: string, ttlMs: number): Promise<void> {
    return this.call('setFlag', key, ttlMs);
  }
  hasFlag(key: string): Promise<boolean> {
    return this.call('hasFlag', key);
  }
  bump(key: string): Promise<number> {
    return this.call('bump', key);
  }
  version(key: string): Promise<number> {
    return this.call('version', key);
  }

  async close(): Promise<void> {
    this.channel.off('message', this.listener);
    for (const [id, call] of this.pending) {
      clearTimeout(call.timer);
      call.reject(new Error('counters closed'));
      this.pending.delete(id);
    }
  }
}

/** In the primary: answers one worker's counter calls from `counters` (the store all workers share). */
export function serveCounters(counters: Counters, channel: CounterChannel): () => void {
  const listener = (message: unknown) => {
    if (!isCall(message)) return;
    const { id, method, args } = message;
    (counters[method] as (...a: unknown[]) => Promise<unknown>).apply(counters, args).then(
      (result) => channel.send({ type: 'urlshortener:counters-reply', id, result: result ?? null } satisfies Reply),
      (error: unknown) =>
        channel.send({ type: 'urlshortener:counters-reply', id, error: String(error) } satisfies Reply),
    );
  };
  channel.on('message', listener);
  return () => channel.off('message', listener);
}
