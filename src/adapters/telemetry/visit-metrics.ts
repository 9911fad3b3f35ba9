import type { Registry } from 'prom-client';
import type { JournalBacklog } from '../../ports/visit-journal.js';
import { scrapeGauges } from './scrape-gauges.js';

/**
 * `visit_journal_visits` and `visit_journal_oldest_age_seconds`, measured at each scrape by
 * `backlog`: visits flushed but not merged yet are durable, but not in statistics or the visits
 * API; a backlog that grows says the merges fall behind (or fail: the log says why).
 */
export function journalGauges(registry: Registry, backlog: () => Promise<JournalBacklog>): void {
  scrapeGauges(registry, backlog, [
    {
      name: 'visit_journal_visits',
      help: 'Visits flushed to the visit journal and not merged yet (durable, not yet in statistics or the visits API).',
      value: (figures) => figures.visits,
    },
    {
      name: 'visit_journal_oldest_age_seconds',
      help: 'How long ago the oldest visit journal row waiting to be merged was written (0 when none waits; merged every 5 s).',
      value: (figures) => figures.oldestAgeSeconds,
    },
  ]);
}
