import type { Execution, ExecutionOutcome, ExecutionRequestedPayload } from '../domain/execution.js';
import type { EventsFor } from '../domain/events.js';

/** Executions: the read model of `POST /execute`, written by the API and the executor. */
export interface ExecutionRepository {
  /** Records a queued execution and its `execution.requested` event in one transaction. */
  create(request: ExecutionRequestedPayload, events: EventsFor<Execution>): Promise<Execution>;
  get(id: string): Promise<Execution | undefined>;
  /** A user's executions, newest first; `before` is the id the previous page ended with. */
  listByUser(userId: number, options: { limit: number; before?: string }): Promise<Execution[]>;
  /** queued → running; false when the execution is not queued (a redelivered request). */
  markRunning(id: string, events: EventsFor<Execution>): Promise<boolean>;
  /** running (or queued) → a final status; false when it already ended. */
  finish(id: string, outcome: ExecutionOutcome, events: EventsFor<Execution>): Promise<boolean>;
}
