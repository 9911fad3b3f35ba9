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
/** Result and error are kept up to the same size as the output, so rows and events stay small. */
export const RESULT_MAX_BYTES = OUTPUT_MAX_BYTES;

/** What marks a text that was cut at its limit (the marker counts towards the limit). */
export const CUT_MARKERS = {
  output: '\n[output truncated]\n',
  result: '\n[result truncated]',
  error: '\n[error truncated]',
} as const;

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
  /** Whether output, result or error was cut at its limit (each then ends with its marker). */
  readonly truncated: boolean;
  readonly duration_ms: number | null;
  /** Times a worker has started it: more than 1 when a worker died and another took it over. */
  readonly attempt: number;
  /** While running: until when its worker's claim holds unless renewed (ms since the epoch). Internal. */
  readonly claimed_until: number | null;
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
  readonly truncated: boolean;
  readonly duration_ms: number;
}

/**
 * `text` cut to at most `limitBytes` bytes of UTF-8, whole characters only, ending with `marker`
 * when it was cut; a text within the limit (also one cut before) comes back unchanged.
 */
export function capText(text: string, limitBytes: number, marker: string): { text: string; cut: boolean } {
  // Up to 3 bytes per UTF-16 unit: a short text is within the limit without encoding it.
  if (text.length * 3 <= limitBytes) return { text, cut: false };
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= limitBytes) return { text, cut: false };
  let end = Math.max(0, limitBytes - Buffer.byteLength(marker, 'utf8'));
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // not inside a character
  return { text: bytes.subarray(0, end).toString('utf8') + marker, cut: true };
}

/**
 * A result whose JSON is over `limitBytes` becomes a string: the start of that JSON text (a
 * string result's begins with its quote), ending with the result marker.
 */
export function capResult(value: unknown, limitBytes: number): { value: unknown; cut: boolean } {
  // Cut before (by the sandbox): kept as it is.
  if (typeof value === 'string' && value.endsWith(CUT_MARKERS.result) && capText(value, limitBytes, '').cut === false) {
    return { value, cut: true };
  }
  const json = JSON.stringify(value ?? null);
  if (json.length * 3 <= limitBytes || Buffer.byteLength(json, 'utf8') <= limitBytes) return { value, cut: false };
  return { value: capText(json, limitBytes, CUT_MARKERS.result).text, cut: true };
}

/** The outcome with output, result and error each within `limitBytes` (see capText, capResult). */
export function capOutcome(outcome: ExecutionOutcome, limitBytes: number): ExecutionOutcome {
  const output = capText(outcome.output, limitBytes, CUT_MARKERS.output);
  const result = capResult(outcome.result, limitBytes);
  const error = outcome.error === null ? undefined : capText(outcome.error, limitBytes, CUT_MARKERS.error);
  return {
    ...outcome,
    output: output.text,
    result: result.value,
    error: error?.text ?? null,
    truncated: outcome.truncated || output.cut || result.cut || (error?.cut ?? false),
  };
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
    started: (executionId: string, userId: number, attempt: number) =>
      make(EVENT_TYPES.executionStarted, { execution_id: executionId, user_id: userId, attempt }, executionId),
    finished: (executionId: string, userId: number, outcome: ExecutionOutcome) =>
      make(OUTCOME_EVENTS[outcome.status], { execution_id: executionId, user_id: userId, ...outcome }, executionId),
  };
}
export type ExecutionEventFactory = ReturnType<typeof executionEvents>;
