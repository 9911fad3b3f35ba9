import { randomUUID } from 'node:crypto';
import { EVENT_TYPES, TOPICS } from '../domain/events.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';

export interface InvalidatableCache {
  invalidate(code: string): void;
}

/** Created too: this instance may hold the code as "unknown"; expired: it may hold visits as left. */
const INVALIDATING: ReadonlySet<string> = new Set([
  EVENT_TYPES.urlCreated,
  EVENT_TYPES.urlUpdated,
  EVENT_TYPES.urlDeleted,
  EVENT_TYPES.urlExpired,
]);

/**
 * Drops this instance's cached redirects when any instance creates, changes or deletes a mapping,
 * so every instance follows at once instead of when the cache entry expires.
 * Each instance is its own group and follows only what comes next.
 */
export function cacheInvalidationConsumer(cache: InvalidatableCache): ConsumerDefinition {
  return {
    group: `cache-${randomUUID()}`,
    topics: [TOPICS.url],
    startAt: 'latest',
    deadLetter: false,
    handle: async (message) => {
      const { event_type: type, payload } = message.envelope;
      if (!INVALIDATING.has(type)) return;
      const { code, previous_code: previous } = payload as { code?: unknown; previous_code?: unknown };
      if (typeof code === 'string') cache.invalidate(code);
      if (typeof previous === 'string') cache.invalidate(previous);
    },
  };
}
