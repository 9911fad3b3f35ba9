/**
 * A consumer whose database cannot be reached (RetryPolicy.transient, as the service composes it:
 * `isDatabaseUnavailable`) retries for as long as that lasts instead of dead-lettering the message
 * after its attempts: an outage longer than the backoff must not park events that a consumer would
 * have handled (the distributed fault test's PostgreSQL restart did, once in a while, to the event
 * store's url.updated). Any other failure still counts. The runner's logic is the bus's and the
 * database's business only through the predicate: the embedded bus on SQLite is enough here.
 */
import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/adapters/storage/connection-errors.js';
import { TOPICS } from '../../src/domain/events.js';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { useTestConsumer } from '../helpers/consumers.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, newMapping } from '../helpers/http.js';

const ATTEMPTS = 2;
/** Failures before the handler succeeds: more than ATTEMPTS, so counting them would dead-letter. */
const OUTAGE_FAILURES = 6;

/** What node-postgres throws on a connection pg_terminate_backend (or a restart) ends. */
const adminShutdown = () =>
  Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });

describe('a consumer while its database is away', () => {
  const t = useTestApp(sqlite, { EVENT_POLL_MS: '50' });
  const nextCode = codeMaker('tran');
  /** Per code: how the handler fails its deliveries, and how many it saw. */
  const plans = new Map<string, { failures: number; error: () => Error; seen: number; handled: boolean }>();
  const dead: string[] = [];
  useTestConsumer(
    t,
    { attempts: ATTEMPTS, backoffMs: 5, maxBackoffMs: 20, transient: isDatabaseUnavailable },
    {
      group: 'transient-failures-test',
      topics: [TOPICS.url, TOPICS.deadLetter],
      startAt: 'latest',
      handle: async (message) => {
        if (message.topic === TOPICS.deadLetter) {
          dead.push((message.envelope.payload as { original: { payload: { code?: string } } }).original.payload.code!);
          return;
        }
        const code = (message.envelope.payload as { code?: string }).code;
        const plan = code === undefined ? undefined : plans.get(code);
        if (message.envelope.event_type !== 'url.created' || plan === undefined) return;
        plan.seen++;
        if (plan.seen <= plan.failures) throw plan.error();
        plan.handled = true;
      },
    },
  );

  it('retries past its attempts while the failure is the database being unreachable, and handles the event', async () => {
    const body = newMapping(nextCode);
    const plan = { failures: OUTAGE_FAILURES, error: adminShutdown, seen: 0, handled: false };
    plans.set(body.code, plan);
    await createMapping(t.app, body);
    await eventually(() => expect(plan.handled).toBe(true));
    expect(plan.seen).toBe(OUTAGE_FAILURES + 1);
    expect(dead).not.toContain(body.code);
  });

  it('still dead-letters after its attempts when the failure is anything else', async () => {
    const body = newMapping(nextCode);
    const plan = { failures: OUTAGE_FAILURES, error: () => new Error('a bug'), seen: 0, handled: false };
    plans.set(body.code, plan);
    await createMapping(t.app, body);
    await eventually(() => expect(dead).toContain(body.code));
    expect(plan.seen).toBe(ATTEMPTS);
    expect(plan.handled).toBe(false);
  });
});
