import { createEvent, EVENT_TYPES, type OutgoingEvent, TOPICS } from './events.js';

export const EXECUTION_LANGUAGES = ['javascript'] as const;
export type ExecutionLanguage = (typeof EXECUTION_LANGUAGES)[number];

export const EXECUTION_STATUSES = ['queued', 'running', 'completed', 'failed', 'timed_out'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
export const FINAL_STATUSES: ReadonlySet<ExecutionStatus> = new Set(['completed', 'failed', 'timed_out']);

/** Design "Executions": script at most 64 KiB, deadline at most 10 s, output kept up to 64 KiB. */
export const SCRIPT_MAX_BYTES = 64 * 1024;
export const TIMEOUT_MAX_MS = 10_000;
export const TIMEOUT_DEFAULT_MS = 5_000;
export const OUTPUT_MAX_BYTES = 64 * 1024;

export interface Execution {
  readonly id: string;
  readonly user_id: number;
  readonly language: ExecutionLanguage;
  readonly script: string;
  readonly timeout_ms: number;
  readonly status: ExecutionStatus;
  readonly output: string;
  /** The script's completion value, as JSON (null when none or not finished). */
  readonly result: unknown;
  readonly error: string | null;
  readonly duration_ms: number | null;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
}

export interface ExecutionRequest {
  readonly language: ExecutionLanguage;
  readonly script: string;
  readonly timeout_ms?: number;
}

/** The payload of `execution.requested`: everything a worker needs, nothing it must look up. */
export interface ExecutionRequestedPayload {
  readonly execution_id: string;
  readonly user_id: number;
  readonly language: ExecutionLanguage;
  readonly script: string;
  readonly timeout_ms: number;
}

/** What the executor reports when a run ends. */
export interface ExecutionOutcome {
  readonly status: 'completed' | 'failed' | 'timed_out';
  readonly output: string;
  readonly result: unknown;
  readonly error: string | null;
  readonly duration_ms: number;
}

const OUTCOME_EVENTS = {
  completed: EVENT_TYPES.executionCompleted,
  failed: EVENT_TYPES.executionFailed,
  timed_out: EVENT_TYPES.executionTimedOut,
} as const;

/** The events of an execution's life, on `execution_events`, keyed by execution id so they stay in order. */
export function executionEvents(service: string) {
  const make = <P>(type: string, payload: P, executionId: string): OutgoingEvent<P> =>
    createEvent(type, payload, { service, topic: TOPICS.execution, key: executionId });
  return {
    requested: (payload: ExecutionRequestedPayload) =>
      make(EVENT_TYPES.executionRequested, payload, payload.execution_id),
    started: (executionId: string, userId: number) =>
      make(EVENT_TYPES.executionStarted, { execution_id: executionId, user_id: userId }, executionId),
    finished: (executionId: string, userId: number, outcome: ExecutionOutcome) =>
      make(OUTCOME_EVENTS[outcome.status], { execution_id: executionId, user_id: userId, ...outcome }, executionId),
  };
}
export type ExecutionEventFactory = ReturnType<typeof executionEvents>;
