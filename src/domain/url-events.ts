import { createEvent, EVENT_TYPES, type OutgoingEvent, TOPICS } from './events.js';
import type { ExpiryReason, UrlMapping } from './url-mapping.js';

/**
 * The events of the URL mapping operations, on `url_events`, keyed by mapping id so each mapping's
 * stay in order. `owner` is the owning user's id, null for a mapping created anonymously.
 */
export interface UrlEventFactory {
  created(mapping: UrlMapping): OutgoingEvent;
  updated(before: string, mapping: UrlMapping): OutgoingEvent;
  deleted(id: number, code: string, owner: number | null): OutgoingEvent;
  clicked(clicks: ReadonlyArray<readonly [id: number, count: number]>): OutgoingEvent;
  /** Once per link when it stops answering (README "Expiry and visit limits"). */
  expired(mapping: UrlMapping, reason: ExpiryReason): OutgoingEvent;
}

/** A mapping's payload: every field, `owner`, `expires_at` and `max_visits` null when unset. */
const mappingPayload = (m: UrlMapping) => ({
  ...m,
  owner: m.owner ?? null,
  expires_at: m.expires_at ?? null,
  max_visits: m.max_visits ?? null,
});

export function urlEvents(service: string): UrlEventFactory {
  const make = <P>(type: string, payload: P, key: string) =>
    createEvent(type, payload, { service, topic: TOPICS.url, key });
  return {
    created: (m) => make(EVENT_TYPES.urlCreated, mappingPayload(m), String(m.id)),
    updated: (previousCode, m) =>
      make(EVENT_TYPES.urlUpdated, { ...mappingPayload(m), previous_code: previousCode }, String(m.id)),
    deleted: (id, code, owner) => make(EVENT_TYPES.urlDeleted, { id, code, owner }, String(id)),
    clicked: (clicks) =>
      make(EVENT_TYPES.urlClicked, { clicks: clicks.map(([id, count]) => ({ id, count })) }, 'clicks'),
    expired: (m, reason) => make(EVENT_TYPES.urlExpired, { ...mappingPayload(m), reason }, String(m.id)),
  };
}
