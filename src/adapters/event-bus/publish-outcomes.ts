import type { PublishedPosition, PublishOutcome } from '../../ports/event-bus.js';

/** A message the bus can never take (too large, not encodable): `permanent`, as PublishOutcome has it. */
export class MessageRefused extends Error {
  readonly permanent = true;

  constructor(reason: string, cause?: unknown) {
    super(reason, cause === undefined ? undefined : { cause });
    this.name = 'MessageRefused';
  }
}

/** Whether `error` says that the bus can never take the message. */
export const isPermanent = (error: unknown): boolean =>
  typeof error === 'object' && error !== null && (error as { permanent?: unknown }).permanent === true;

/** The outcome of a publication that failed with `reason`. */
export function failure(reason: unknown): PublishOutcome {
  const error = reason instanceof Error ? reason : new Error(String(reason));
  return { error, permanent: isPermanent(error) };
}

/** Each publication's outcome, in order, once all have settled. */
export async function outcomesOf(publications: readonly Promise<PublishedPosition>[]): Promise<PublishOutcome[]> {
  const settled = await Promise.allSettled(publications);
  return settled.map((s) => (s.status === 'fulfilled' ? { position: s.value } : failure(s.reason)));
}
