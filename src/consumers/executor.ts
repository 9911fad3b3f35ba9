import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Span } from '@opentelemetry/api';
import { EVENT_TYPES, TOPICS } from '../domain/events.js';
import {
  capOutcome,
  type Execution,
  type ExecutionEventFactory,
  type ExecutionRequestedPayload,
  FINAL_STATUSES,
} from '../domain/execution.js';
import type { ExecutionRepository } from '../ports/execution-repository.js';
import type { Sandbox, SandboxResult } from '../ports/sandbox.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';
import { FairSlots } from './fair-slots.js';

export interface ExecutorOptions {
  readonly memoryBytes: number;
  /** Limit of output, result and error each. */
  readonly outputBytes: number;
  /** Sandbox threads one user's executions may hold at once in this worker. */
  readonly maxThreadsPerUser: number;
  /** Requests this worker holds at once, running or waiting for a thread (the rest wait on the bus). */
  readonly window: number;
  /**
   * How long this worker may go silent before its requests and claims pass to another: the bus's
   * ack wait for the group, and the lease of a claim. Heartbeats go every third of it.
   */
  readonly ackWaitMs: number;
  /** This worker's name on its claims; host, process and a random part by default. */
  readonly claimant?: string;
  readonly clock?: () => number;
}

/**
 * Runs each requested script in the sandbox's pool of threads: the threads go to users in turn,
 * none holding more than `maxThreadsPerUser`, and a request waits, `queued`, until it has one.
 * Then the execution is claimed in the database under a new attempt (`running`,
 * `execution.started`), run, and ended (`execution.completed`, `…failed` or `…timed_out`) only
 * while that claim holds. The request is held on the bus meanwhile, with heartbeats; a worker
 * that dies stops them, and both its requests and its claims pass to another worker within
 * `ackWaitMs`. A request for an execution that has ended is acknowledged without running; one
 * whose claim another live worker holds waits for it to end (or lapse).
 */
export function executorConsumer(
  executions: ExecutionRepository,
  sandbox: Sandbox,
  events: ExecutionEventFactory,
  options: ExecutorOptions,
): ConsumerDefinition {
  const executor = new Executor(executions, sandbox, events, options);
  return {
    group: 'executor',
    topics: [TOPICS.execution],
    concurrency: options.window,
    ackWaitMs: options.ackWaitMs,
    stop: () => executor.stop(),
    handle: async (message, span) => {
      if (message.envelope.event_type !== EVENT_TYPES.executionRequested) return;
      const request = message.envelope.payload as ExecutionRequestedPayload;
      span.setAttributes({
        'execution.id': request.execution_id,
        'execution.language': request.language,
        'execution.script.length': request.script.length,
      });
      const heartbeat = setInterval(() => message.inProgress(), executor.heartbeatMs);
      try {
        await executor.execute(request, span);
      } finally {
        clearInterval(heartbeat);
      }
    },
  };
}

class Executor {
  readonly heartbeatMs: number;
  private readonly slots: FairSlots<number>;
  private readonly stopping = new AbortController();
  private readonly clock: () => number;
  private readonly claimant: string;

  constructor(
    private readonly executions: ExecutionRepository,
    private readonly sandbox: Sandbox,
    private readonly events: ExecutionEventFactory,
    private readonly options: ExecutorOptions,
  ) {
    this.slots = new FairSlots(sandbox.concurrency, Math.min(options.maxThreadsPerUser, sandbox.concurrency));
    this.heartbeatMs = Math.max(50, Math.floor(options.ackWaitMs / 3));
    this.clock = options.clock ?? Date.now;
    this.claimant = options.claimant ?? `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
  }

  /** What waits for a thread goes back to the bus (for another worker); what runs finishes. */
  stop(): void {
    this.stopping.abort();
    this.slots.close();
  }

  /** Runs the request once a thread is free, unless it ended or another worker runs it. */
  async execute(request: ExecutionRequestedPayload, span: Span): Promise<void> {
    const id = request.execution_id;
    for (;;) {
      const current = await this.executions.get(id);
      if (!current || FINAL_STATUSES.has(current.status)) return;
      if (current.status === 'running' && (current.claimed_until ?? 0) > this.clock()) {
        // Another worker runs it (or this one, on a redelivery): wait for its end or its claim to lapse.
        await sleep(this.heartbeatMs, undefined, { signal: this.stopping.signal });
        continue;
      }
      const release = await this.slots.acquire(request.user_id);
      try {
        const now = this.clock();
        const claim = { claimant: this.claimant, now, until: now + this.options.ackWaitMs };
        const claimed = await this.executions.claim(id, claim, (e) => [
          this.events.started(id, request.user_id, e.attempt),
        ]);
        if (!claimed) continue; // another worker was quicker: see how it goes
        span.setAttribute('execution.attempt', claimed.attempt);
        await this.run(request, claimed, span);
        return;
      } finally {
        release();
      }
    }
  }

  /** Runs the claimed attempt, renewing its claim, and records how it ended (if it still holds). */
  private async run(request: ExecutionRequestedPayload, claimed: Execution, span: Span): Promise<void> {
    const id = request.execution_id;
    const { memoryBytes, outputBytes, ackWaitMs } = this.options;
    const renewal = setInterval(() => {
      this.executions.renew(id, claimed.attempt, this.clock() + ackWaitMs).then(
        (held) => held || span.addEvent('claim lost', { 'execution.attempt': claimed.attempt }),
        () => undefined, // the database is away: the next heartbeat tries again
      );
    }, this.heartbeatMs);
    let run: SandboxResult;
    try {
      run = await this.sandbox.run(request.script, { timeoutMs: request.timeout_ms, memoryBytes, outputBytes });
    } finally {
      clearInterval(renewal);
    }
    const { durationMs: duration_ms, ...result } = run;
    const outcome = capOutcome({ ...result, duration_ms }, outputBytes);
    span.setAttribute('execution.status', outcome.status);
    const recorded = await this.executions.finish(id, claimed.attempt, outcome, () => [
      this.events.finished(id, request.user_id, outcome),
    ]);
    // Not recorded: this worker was taken for dead and another took the execution over.
    if (!recorded) span.setAttribute('execution.superseded', true);
  }
}
