import { createEvent, EVENT_TYPES, type OutgoingEvent, TOPICS } from './events.js';
import type { UrlMapping } from './url-mapping.js';

/** The events of the URL mapping operations, on `url_events`, keyed by mapping id so each mapping's stay in order. */
export interface UrlEventFactory {
  created(mapping: UrlMapping): OutgoingEvent;
  updated(before: string, mapping: UrlMapping): OutgoingEvent;
  deleted(id: number, code: string): OutgoingEvent;
  clicked(clicks: ReadonlyArray<readonly [id: number, count: number]>): OutgoingEvent;
}

export function urlEvents(service: string): UrlEventFactory {
  const make = <P>(type: string, payload: P, key: string) =>
    createEvent(type, payload, { service, topic: TOPICS.url, key });
  return {
    created: (m) => make(EVENT_TYPES.urlCreated, { ...m }, String(m.id)),
    updated: (previousCode, m) => make(EVENT_TYPES.urlUpdated, { ...m, previous_code: previousCode }, String(m.id)),
    deleted: (id, code) => make(EVENT_TYPES.urlDeleted, { id, code }, String(id)),
    clicked: (clicks) =>
      make(EVENT_TYPES.urlClicked, { clicks: clicks.map(([id, count]) => ({ id, count })) }, 'clicks'),
  };
}
