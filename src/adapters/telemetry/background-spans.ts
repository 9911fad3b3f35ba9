import { type Attributes, type Link, type Span, SpanKind, trace } from '@opentelemetry/api';
import { ATTR_MESSAGING_BATCH_MESSAGE_COUNT } from '@opentelemetry/semantic-conventions/incubating';
import type { EventStore } from '../../ports/event-store.js';
import type { UrlMappingRepository } from '../../ports/url-mapping-repository.js';
import type { VisitJournal } from '../../ports/visit-journal.js';
import type { VisitRepository } from '../../ports/visit-repository.js';
import { incomingContext, tracing } from './context-propagation.js';
import { settle } from './message-tracing.js';

const tracer = trace.getTracer('urlshortener.background');

/** Names of the spans of background work (no request or message starts them). */
export const BACKGROUND_SPANS = {
  eventStoreAppend: 'event_store.append',
  eventStorePrune: 'event_store.prune',
  eventLogPrune: 'event_log.prune',
  clickFlush: 'clicks.flush',
  clickCompaction: 'clicks.compact',
  visitFlush: 'visits.flush',
  visitMerge: 'visits.merge',
  visitFold: 'visits.fold',
  visitPrune: 'visits.prune',
  linkExpiry: 'links.expire',
} as const;

/** Attributes of background spans that no convention names. */
export const BACKGROUND_SPAN_ATTRIBUTES = {
  /** Mappings whose clicks a flush writes. */
  clickMappings: 'urlshortener.clicks.mappings',
  /** Visits a flush writes to the journal, or a merge step into segments. */
  visitCount: 'urlshortener.visits.count',
} as const;

/**
 * Runs background work (a batch write, a flush, a clean-up) in a span of its own that starts a
 * trace, so that its database statements, which need a recording parent, are traced too (spec
 * §6.2 rule 1: spans for database calls). The trace is sampled like any new one. `links` point at
 * what the work stems from (the messages of a batch). Nothing is made with tracing off.
 */
export function inBackgroundSpan<T>(
  name: string,
  attributes: Attributes,
  work: () => Promise<T>,
  links?: Link[],
): Promise<T> {
  if (!tracing()) return work();
  return tracer.startActiveSpan(
    name,
    { kind: SpanKind.INTERNAL, root: true, attributes, ...(links ? { links } : {}) },
    (span: Span) => settle(span, work),
  );
}

/** The links of a batch of messages: to each one's trace context, when it carries one. */
function messageLinks(messages: readonly { readonly headers: Readonly<Record<string, string>> }[]): Link[] {
  const links: Link[] = [];
  for (const { headers } of messages) {
    const context = trace.getSpanContext(incomingContext(headers));
    if (context !== undefined) links.push({ context });
  }
  return links;
}

/** The event store with a span per batch write (linked to the batch's messages) and per clean-up. */
export function tracedEventStore(store: EventStore): EventStore {
  return {
    append: (messages, storedAt) =>
      inBackgroundSpan(
        BACKGROUND_SPANS.eventStoreAppend,
        { [ATTR_MESSAGING_BATCH_MESSAGE_COUNT]: messages.length },
        () => store.append(messages, storedAt),
        messageLinks(messages),
      ),
    get: (eventId) => store.get(eventId),
    prune: (olderThan) => inBackgroundSpan(BACKGROUND_SPANS.eventStorePrune, {}, () => store.prune(olderThan)),
  };
}

type ClickWrites = Pick<UrlMappingRepository, 'addClicks' | 'compactClicks' | 'forgetClickWriters'>;

/** The click buffer's writes with a span each: the flush of buffered clicks, and each compaction chunk. */
export function tracedClickWrites(repository: ClickWrites): ClickWrites {
  return {
    addClicks: (deltas, events, chunk) =>
      inBackgroundSpan(BACKGROUND_SPANS.clickFlush, { [BACKGROUND_SPAN_ATTRIBUTES.clickMappings]: deltas.length }, () =>
        repository.addClicks(deltas, events, chunk),
      ),
    compactClicks: (options) =>
      inBackgroundSpan(BACKGROUND_SPANS.clickCompaction, {}, () => repository.compactClicks(options)),
    forgetClickWriters: (before) => repository.forgetClickWriters(before),
  };
}

type VisitWrites = Pick<VisitRepository, 'daySalt' | 'foldMark' | 'fold' | 'prune'> &
  Pick<VisitJournal, 'write' | 'mark' | 'pending' | 'merge'>;

/**
 * The visit buffer's, the merge's, the fold's and retention's writes with a span each: every
 * journal row a flush writes, merge step, fold step and retention chunk.
 */
export function tracedVisitWrites(writes: VisitWrites): VisitWrites {
  const visits = (count: number) => ({ [BACKGROUND_SPAN_ATTRIBUTES.visitCount]: count });
  return {
    write: (entry) => inBackgroundSpan(BACKGROUND_SPANS.visitFlush, visits(entry.visits), () => writes.write(entry)),
    mark: () => writes.mark(),
    pending: (count, upTo) => writes.pending(count, upTo),
    merge: (step) =>
      inBackgroundSpan(
        BACKGROUND_SPANS.visitMerge,
        visits(step.segments.reduce((sum, segment) => sum + segment.visits, 0)),
        () => writes.merge(step),
      ),
    daySalt: (day) => writes.daySalt(day),
    foldMark: () => writes.foldMark(),
    fold: (segments, upTo, after) =>
      inBackgroundSpan(BACKGROUND_SPANS.visitFold, {}, () => writes.fold(segments, upTo, after)),
    prune: (options) => inBackgroundSpan(BACKGROUND_SPANS.visitPrune, {}, () => writes.prune(options)),
  };
}
