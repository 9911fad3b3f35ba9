import type { Execution, ExecutionOutcome, ExecutionRequestedPayload } from '../domain/execution.js';
import type { EventsFor } from '../domain/events.js';

/** A worker's hold on an execution it runs; it lapses unless renewed (a dead worker's lapses). */
export interface ExecutionClaim {
  /** Which worker holds it (for the record). */
  readonly claimant: string;
  /** The claimant's clock now, in ms since the epoch: a claim that lapsed before it may be taken. */
  readonly now: number;
  /** Until when the claim holds unless renewed, in ms since the epoch. */
  readonly until: number;
}

/**
 * Executions: the read model of `POST /execute`, written by the API and the executor.
 *
 * @example
 *   const claimed = await executions.claim(id, { claimant, now, until: now + 5000 }, events);
 *   if (claimed) await executions.finish(id, claimed.attempt, outcome, events);
 */
export interface ExecutionRepository {
  /**
   * Records a queued execution and its `execution.requested` event in one transaction, unless
   * the user already has `maxPending` queued or running: then nothing (undefined). Exact also
   * when one user's requests arrive at once on several instances.
   */
  create(
    request: ExecutionRequestedPayload,
    maxPending: number,
    events: EventsFor<Execution>,
  ): Promise<Execution | undefined>;
  get(id: string): Promise<Execution | undefined>;
  /**
   * A user's executions, newest first; `before` is the id the previous page ended with. Script,
   * output, result and error are cut to `previewChars` characters each (marked, `truncated` set).
   */
  listByUser(userId: number, options: { limit: number; before?: string; previewChars: number }): Promise<Execution[]>;
  /**
   * Marks it running under a new attempt, if it is queued, or running under a claim that lapsed
   * (its worker died); the events are recorded with the change. Undefined when it is final or
   * another worker's claim still holds.
   */
  claim(id: string, claim: ExecutionClaim, events: EventsFor<Execution>): Promise<Execution | undefined>;
  /** Renews the claim of `attempt` until `until`; false when that attempt no longer holds it. */
  renew(id: string, attempt: number, until: number): Promise<boolean>;
  /** running → a final status, only while `attempt` holds it; false otherwise (nothing recorded). */
  finish(id: string, attempt: number, outcome: ExecutionOutcome, events: EventsFor<Execution>): Promise<boolean>;
}
