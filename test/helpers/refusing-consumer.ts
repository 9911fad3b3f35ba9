import { TOPICS } from '../../src/domain/events.js';
import type { BusMessage } from '../../src/ports/event-bus.js';
import type { SuiteTestApp } from './app.js';
import { useTestConsumer } from './consumers.js';

/**
 * A consumer group of the url events in the suite's app that refuses the `url.created` of every
 * code in `failing` (so that its message ends in the dead letters after `attempts` tries, 20-40 ms
 * apart), and keeps every message it was handed, in `deliveries`.
 */
export function useRefusingConsumer(
  t: SuiteTestApp,
  group: string,
  { attempts, startAt }: { attempts: number; startAt: 'earliest' | 'latest' },
): { readonly failing: Set<string>; readonly deliveries: BusMessage[] } {
  const failing = new Set<string>();
  const deliveries: BusMessage[] = [];
  useTestConsumer(
    t,
    { attempts, backoffMs: 20, maxBackoffMs: 40 },
    {
      group,
      topics: [TOPICS.url],
      startAt,
      handle: async (message) => {
        deliveries.push(message);
        const code = (message.envelope.payload as { code?: string }).code;
        if (message.envelope.event_type === 'url.created' && code && failing.has(code)) {
          throw new Error(`refusing ${code}`);
        }
      },
    },
  );
  return { failing, deliveries };
}
