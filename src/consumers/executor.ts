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
import type { Sandbox } from '../ports/sandbox.js';
import type { ConsumerDefinition } from '../services/consumer-runner.js';
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
  const slots = new FairSlots<number>(sandbox.concurrency, Math.min(options.maxThreadsPerUser, sandbox.concurrency));
  const stopping = new AbortController();
  const heartbeatMs = Math.max(50, Math.floor(options.ackWaitMs / 3));
  const clock = options.clock ?? Date.now;
  const claimant = options.claimant ?? `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;

  /** Runs the claimed attempt, renewing its claim, and records how it ended (if it still holds). */
  const run = async (request: ExecutionRequestedPayload, claimed: Execution, span: Span) => {
    const id = request.execution_id;
    const renewal = setInterval(() => {
      executions.renew(id, claimed.attempt, clock() + options.ackWaitMs).then(
        (held) => held || span.addEvent('claim lost', { 'execution.attempt': claimed.attempt }),
        () => undefined, // the database is away: the next heartbeat tries again
      );
    }, heartbeatMs);
    let result;
    try {
      const { memoryBytes, outputBytes } = options;
      result = await sandbox.run(request.script, { timeoutMs: request.timeout_ms, memoryBytes, outputBytes });
    } finally {
      clearInterval(renewal);
    }
    const outcome = capOutcome(
      {
        status: result.status,
        output: result.output,
        result: result.result,
        error: result.error,
        truncated: result.truncated,
        duration_ms: result.durationMs,
      },
      options.outputBytes,
    );
    span.setAttribute('execution.status', outcome.status);
    const recorded = await executions.finish(id, claimed.attempt, outcome, () => [
      events.finished(id, request.user_id, outcome),
    ]);
    // Not recorded: this worker was taken for dead and another took the execution over.
    if (!recorded) span.setAttribute('execution.superseded', true);
  };

  const execute = async (request: ExecutionRequestedPayload, span: Span) => {
    const id = request.execution_id;
    for (;;) {
      const current = await executions.get(id);
      if (!current || FINAL_STATUSES.has(current.status)) return;
      if (current.status === 'running' && (current.claimed_until ?? 0) > clock()) {
        // Another worker runs it (or this one, on a redelivery): wait for its end or its claim to lapse.
        await sleep(heartbeatMs, undefined, { signal: stopping.signal });
        continue;
      }
      const release = await slots.acquire(request.user_id);
      try {
        const now = clock();
        const claimed = await executions.claim(id, { claimant, now, until: now + options.ackWaitMs }, (e) => [
          events.started(id, request.user_id, e.attempt),
        ]);
        if (!claimed) continue; // another worker was quicker: see how it goes
        span.setAttribute('execution.attempt', claimed.attempt);
        await run(request, claimed, span);
        return;
      } finally {
        release();
      }
    }
  };

  return {
    group: 'executor',
    topics: [TOPICS.execution],
    concurrency: options.window,
    ackWaitMs: options.ackWaitMs,
    // What waits for a thread goes back to the bus (for another worker); what runs finishes.
    stop: () => {
      stopping.abort();
      slots.close();
    },
    handle: async (message, span) => {
      if (message.envelope.event_type !== EVENT_TYPES.executionRequested) return;
      const request = message.envelope.payload as ExecutionRequestedPayload;
      span.setAttributes({
        'execution.id': request.execution_id,
        'execution.language': request.language,
        'execution.script.length': request.script.length,
      });
      const heartbeat = setInterval(() => message.inProgress(), heartbeatMs);
      try {
        await execute(request, span);
      } finally {
        clearInterval(heartbeat);
      }
    },
  };
}
