import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, partitionFor } from '../../src/domain/events.js';
import type { BusMessage, EventBus } from '../../src/ports/event-bus.js';
import { BUS_KINDS, type BusFamily } from '../helpers/event-buses.js';
import { eventually } from '../helpers/eventually.js';

const available = Object.fromEntries(await Promise.all(BUS_KINDS.map(async (k) => [k.name, await k.available()])));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A consumer process (test/fixtures/crashing-consumer.ts) that takes a message and hangs; resolves once it has one. */
async function crashingConsumer(
  family: BusFamily,
  kind: string,
  group: string,
  t: string,
  id: string,
  ackWait?: number,
) {
  const args = ['--import', 'tsx', 'test/fixtures/crashing-consumer.ts', kind, group, t];
  const child = spawn(process.execPath, ackWait === undefined ? args : [...args, String(ackWait)], {
    env: { ...process.env, ...family.env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await eventually(() => expect(output).toContain(`got ${id}`), { timeoutMs: 20_000 });
  return child;
}

const HEADERS = { event_type: 'test.event', service: 'urlshortener', traceparent: '', tracestate: '' };
const event = (key: string, n: number) =>
  createEvent('test.event', { n }, { service: 'urlshortener', topic: 'contract', key });

/** Collects what a subscription receives. */
function collector(onMessage?: (m: BusMessage) => Promise<void>) {
  const received: BusMessage[] = [];
  return {
    received,
    ids: () => received.map((m) => m.envelope.event_id),
    handler: async (m: BusMessage) => {
      await onMessage?.(m);
      received.push(m);
    },
  };
}

/**
 * One contract, every event bus adapter. The adapters run at once, each with its own database or
 * streams (their tests mostly wait: ack waits, redeliveries, lease rounds); within one, the tests
 * run one after another (`sequential`): they share its bus.
 */
describe.concurrent.each(BUS_KINDS)('EventBus on $name', (kind) => {
  const ok = available[kind.name] as boolean;
  let family: BusFamily;
  let bus: EventBus;
  let topicNo = 0;
  const topic = () => `contract${++topicNo}`;

  beforeAll(async () => {
    if (!ok) return;
    family = await kind.family();
    bus = await family.connect();
  });
  afterAll(async () => {
    await family?.destroy();
  });

  const publish = async (t: string, key: string, n: number) => {
    const e = event(key, n);
    const position = await bus.publish(t, key, { ...HEADERS, event_type: e.envelope.event_type }, e.envelope);
    return { ...position, id: e.envelope.event_id, envelope: e.envelope };
  };

  it.skipIf(!ok).sequential('delivers every message of a partition in order, with headers and position', async () => {
    const t = topic();
    const sent = [];
    for (let n = 0; n < 20; n++) sent.push(await publish(t, 'same-key', n));
    expect(new Set(sent.map((s) => s.partition)).size).toBe(1);
    const c = collector();
    const sub = await bus.subscribe({ group: 'order', topic: t, handler: c.handler });
    await eventually(() => expect(c.received).toHaveLength(20));
    await sub.close();
    expect(c.ids()).toEqual(sent.map((s) => s.id));
    expect(c.received.map((m) => m.offset)).toEqual(sent.map((s) => s.offset));
    expect(c.received[0]!.partition).toBe(partitionFor('same-key', bus.partitions));
    expect(c.received[0]!.headers).toMatchObject({ event_type: 'test.event', service: 'urlshortener' });
    expect(c.received[0]!.envelope).toEqual(sent[0]!.envelope);
  });

  it.skipIf(!ok).sequential("names its messaging system as telemetry's messaging.system", () => {
    expect(bus.system).toBe(kind.name === 'nats' ? 'nats' : 'urlshortener.embedded_log');
  });

  it.skipIf(!ok).sequential(
    'delivers again after a handler failure, before anything later in the partition',
    async () => {
      const t = topic();
      const first = await publish(t, 'k', 1);
      const second = await publish(t, 'k', 2);
      let failures = 0;
      const c = collector(async (m) => {
        if (m.envelope.event_id === first.id && failures++ === 0) throw new Error('handler failed once');
      });
      const sub = await bus.subscribe({ group: 'retry', topic: t, handler: c.handler });
      await eventually(() => expect(c.received).toHaveLength(2));
      await sub.close();
      expect(c.ids()).toEqual([first.id, second.id]);
      expect(c.received[0]!.deliveryCount).toBe(2);
      expect(c.received[1]!.deliveryCount).toBe(1);
    },
  );

  it.skipIf(!ok).sequential('gives every group every message, and a group each message once', async () => {
    const t = topic();
    const sent = [];
    for (let n = 0; n < 12; n++) sent.push(await publish(t, `key${n}`, n));
    const a = collector();
    const b = collector();
    const subs = [
      await bus.subscribe({ group: 'group-a', topic: t, handler: a.handler }),
      await bus.subscribe({ group: 'group-b', topic: t, handler: b.handler }),
    ];
    await eventually(() => expect(a.received.length + b.received.length).toBe(24));
    await Promise.all(subs.map((s) => s.close()));
    expect(new Set(a.ids())).toEqual(new Set(sent.map((s) => s.id)));
    expect(new Set(b.ids())).toEqual(new Set(sent.map((s) => s.id)));
  });

  it.skipIf(!ok).sequential("shares a group's work among its members, each message to one of them", async () => {
    const t = topic();
    const other = await family.connect(); // a second process
    const slow = async () => new Promise<void>((resolve) => setTimeout(resolve, 20));
    const a = collector(slow);
    const b = collector(slow);
    const subs = [
      await bus.subscribe({ group: 'shared', topic: t, handler: a.handler }),
      await other.subscribe({ group: 'shared', topic: t, handler: b.handler }),
    ];
    // Let the members settle on their shares of the partitions before the work arrives.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const sent = [];
    for (let n = 0; n < 40; n++) sent.push(await publish(t, `key${n}`, n));
    await eventually(() => expect(a.received.length + b.received.length).toBe(40));
    await new Promise((resolve) => setTimeout(resolve, 300)); // nothing more may arrive
    await Promise.all(subs.map((s) => s.close()));
    const all = [...a.ids(), ...b.ids()];
    expect(all).toHaveLength(40);
    expect(new Set(all)).toEqual(new Set(sent.map((s) => s.id)));
    expect(a.received.length).toBeGreaterThan(0);
    expect(b.received.length).toBeGreaterThan(0);
  });

  it.skipIf(!ok).sequential('redelivers what a consumer that crashed had not acknowledged', async () => {
    const t = topic();
    const sent = await publish(t, 'crash', 1);
    const child = await crashingConsumer(family, kind.name, 'crashy', t, sent.id);
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    const c = collector();
    const sub = await bus.subscribe({ group: 'crashy', topic: t, handler: c.handler });
    await eventually(() => expect(c.ids()).toContain(sent.id), { timeoutMs: 15_000 });
    await sub.close();
  });

  it.skipIf(!ok).sequential('replays a group from an offset', async () => {
    const t = topic();
    const sent = [];
    for (let n = 0; n < 5; n++) sent.push(await publish(t, 'replay', n));
    const c = collector();
    let sub = await bus.subscribe({ group: 'replayer', topic: t, handler: c.handler });
    await eventually(() => expect(c.received).toHaveLength(5));
    await sub.close();
    await bus.seek('replayer', t, sent[2]!.partition, sent[2]!.offset);
    sub = await bus.subscribe({ group: 'replayer', topic: t, handler: c.handler });
    await eventually(() => expect(c.received).toHaveLength(8));
    await sub.close();
    expect(c.ids().slice(5)).toEqual(sent.slice(2).map((s) => s.id));
  });

  it.skipIf(!ok).sequential('stores an event published twice (same event id) once', async () => {
    const t = topic();
    const e = event('dup', 1);
    const first = await bus.publish(t, 'dup', HEADERS, e.envelope);
    const again = await bus.publish(t, 'dup', HEADERS, e.envelope);
    expect(again.offset).toBe(first.offset);
    const c = collector();
    const sub = await bus.subscribe({ group: 'dedupe', topic: t, handler: c.handler });
    await eventually(() => expect(c.received).toHaveLength(1));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await sub.close();
    expect(c.received).toHaveLength(1);
  });

  it.skipIf(!ok).sequential(
    'publishAll answers for each message: one it can never take is refused, the rest stored',
    async () => {
      const t = topic();
      const message = (key: string, n: number) => {
        const e = event(key, n);
        return { topic: t, key, headers: HEADERS, envelope: e.envelope };
      };
      const batch = [message('all', 1), message('all', 2), message('all', 3), message('all', 4)];
      // Not encodable as JSON: no broker can ever take it.
      const poison = { ...batch[1]!, envelope: { ...batch[1]!.envelope, payload: { n: 10n } } };
      const outcomes = await bus.publishAll([batch[0]!, poison, batch[2]!, batch[3]!]);
      expect(outcomes.map((o) => (o.error ? `refused, permanent: ${o.permanent}` : 'stored'))).toEqual([
        'stored',
        'refused, permanent: true',
        'stored',
        'stored',
      ]);
      const c = collector();
      const sub = await bus.subscribe({ group: 'batch', topic: t, handler: c.handler });
      await eventually(() => expect(c.received).toHaveLength(3));
      await sub.close();
      expect(c.ids()).toEqual([batch[0]!, batch[2]!, batch[3]!].map((m) => m.envelope.event_id));
      expect(c.received.map((m) => m.offset)).toEqual([0, 2, 3].map((i) => outcomes[i]!.position!.offset));
      // Published again (the relay after a crash): each answers with the position it already has.
      const again = await bus.publishAll([batch[0]!, batch[2]!]);
      expect(again.map((o) => o.position)).toEqual([outcomes[0]!.position, outcomes[2]!.position]);
    },
  );

  it.skipIf(!ok).sequential('starts a new group at the end when asked for the latest only', async () => {
    const t = topic();
    await publish(t, 'late', 1);
    const c = collector();
    const sub = await bus.subscribe({ group: 'latecomer', topic: t, handler: c.handler, startAt: 'latest' });
    const fresh = await publish(t, 'late', 2);
    await eventually(() => expect(c.received).toHaveLength(1));
    await sub.close();
    expect(c.ids()).toEqual([fresh.id]);
  });

  it.skipIf(!ok).sequential('keeps partition order when several processes publish to it in turn', async () => {
    const t = topic();
    const other = await family.connect(); // a second process, writing between this one's messages
    const c = collector();
    const sub = await bus.subscribe({ group: 'interleaved', topic: t, handler: c.handler });
    const sent = [];
    for (let n = 0; n < 30; n++) {
      const through = n % 3 === 2 ? other : bus;
      const e = event('shared', n);
      const position = await through.publish(t, 'shared', HEADERS, e.envelope);
      sent.push({ ...position, id: e.envelope.event_id });
    }
    await eventually(() => expect(c.received).toHaveLength(30));
    await sub.close();
    expect(c.ids()).toEqual(sent.map((s) => s.id));
    expect(c.received.map((m) => m.offset)).toEqual(sent.map((s) => s.offset));
  });

  it.skipIf(!ok).sequential(
    'hands an unordered group a batch at once, and delivers a failed message again',
    async () => {
      const t = topic();
      const sent: { partition: number; offset: number; id: string }[] = [];
      for (let n = 0; n < 50; n++) sent.push(await publish(t, 'one-partition', n));
      let inFlight = 0;
      let mostInFlight = 0;
      let failed = false;
      const c = collector(async (m) => {
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight--;
        if (m.envelope.event_id === sent[9]!.id && !failed) {
          failed = true;
          throw new Error('handler failed once');
        }
      });
      const sub = await bus.subscribe({ group: 'unordered', topic: t, ordered: false, handler: c.handler });
      await eventually(() => expect(new Set(c.ids())).toEqual(new Set(sent.map((s) => s.id))));
      await sub.close();
      expect(mostInFlight).toBeGreaterThan(1);
      const again = c.received.filter((m) => m.envelope.event_id === sent[9]!.id);
      expect(again.map((m) => m.deliveryCount)).toContain(2);
    },
  );

  it.skipIf(!ok).sequential(
    'keeps a message whose handler reports progress past the ack wait: delivered once',
    async () => {
      const t = topic();
      const other = await family.connect(); // a second member, to which an expired message would go
      const deliveries: string[] = [];
      const handler = (member: string) => async (m: BusMessage) => {
        deliveries.push(member);
        for (const end = Date.now() + 3500; Date.now() < end;) {
          m.inProgress();
          await sleep(250);
        }
      };
      const options = { group: 'progress', topic: t, ackWaitMs: 1000, concurrency: 2 };
      const subs = [
        await bus.subscribe({ ...options, handler: handler('a') }),
        await other.subscribe({ ...options, handler: handler('b') }),
      ];
      await sleep(1500); // the members settle on their partitions (embedded) before the message comes
      await publish(t, 'progress', 1);
      await eventually(() => expect(deliveries).toHaveLength(1));
      await sleep(3500 + 1500); // the handler's run and more than an ack wait after it
      await Promise.all(subs.map((s) => s.close()));
      expect(deliveries).toHaveLength(1);
    },
  );

  it.skipIf(!ok).sequential(
    'a member joining while messages are in the handler takes none of them again, and its share after',
    async () => {
      const t = topic();
      // A key for every partition: whichever a joining member would take, one of its messages is in the handler.
      const keys = Array.from({ length: bus.partitions }, (_, p) => {
        for (let n = 0; ; n++) if (partitionFor(`join${n}`, bus.partitions) === p) return `join${n}`;
      });
      const deliveries = new Map<string, string[]>();
      let holding = true;
      const handler = (member: string) => async (m: BusMessage) => {
        deliveries.set(m.envelope.event_id, [...(deliveries.get(m.envelope.event_id) ?? []), member]);
        while (holding) {
          m.inProgress();
          await sleep(100);
        }
      };
      const options = { group: 'joining', topic: t };
      const subs = [await bus.subscribe({ ...options, handler: handler('a') })];
      const held = [];
      for (const [n, key] of keys.entries()) held.push(await publish(t, key, n));
      await eventually(() => expect(deliveries.size).toBe(held.length));
      const other = await family.connect();
      subs.push(await other.subscribe({ ...options, handler: handler('b') }));
      await sleep(2_500); // rounds of the members' leases (FAST_BUS: a second) while the handlers hold
      holding = false;
      const later = [];
      for (const [n, key] of [...keys, ...keys].entries()) later.push(await publish(t, key, 100 + n));
      await eventually(() => expect(deliveries.size).toBe(held.length + later.length), { timeoutMs: 10_000 });
      await sleep(500);
      await Promise.all(subs.map((s) => s.close()));
      for (const { id } of [...held, ...later]) expect(deliveries.get(id), id).toHaveLength(1);
      for (const { id } of held) expect(deliveries.get(id)).toEqual(['a']);
      if (kind.name !== 'nats') {
        // On the embedded log the partitions are shared out by leases: the one that joined has its share.
        expect(later.some(({ id }) => deliveries.get(id)?.[0] === 'b')).toBe(true);
      }
    },
  );

  it.skipIf(!ok).sequential(
    'with a concurrency, hands over later messages while an earlier one is still in the handler, at most that many at once',
    async () => {
      const t = topic();
      const sent: { id: string }[] = [];
      for (let n = 0; n < 10; n++) sent.push(await publish(t, 'one-partition', n)); // one partition, in order
      const first = sent[0]!.id;
      let inFlight = 0;
      let mostInFlight = 0;
      let failedOnce = false;
      let releaseFirst = () => undefined as void;
      const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
      const done: string[] = [];
      const handler = async (m: BusMessage) => {
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        try {
          if (m.envelope.event_id === first) await firstHeld;
          else await sleep(20);
          if (m.envelope.event_id === sent[5]!.id && !failedOnce) {
            failedOnce = true;
            throw new Error('handler failed once');
          }
          done.push(m.envelope.event_id);
        } finally {
          inFlight--;
        }
      };
      // More than the partitions: a NATS member's pullers each hold a place while they wait for one.
      const concurrency = bus.partitions + 2;
      const options = { group: 'window', topic: t, concurrency, handler };
      let sub = await bus.subscribe(options);
      // Every later one, the failed one again too, while the first is still held.
      await eventually(() => expect(new Set(done)).toEqual(new Set(sent.slice(1).map((s) => s.id))), {
        timeoutMs: 15_000,
      });
      expect(done).not.toContain(first);
      releaseFirst();
      await eventually(() => expect(done).toContain(first));
      await sub.close();
      expect(done).toHaveLength(10); // each handled once
      expect(mostInFlight).toBeGreaterThan(1);
      expect(mostInFlight).toBeLessThanOrEqual(concurrency);
      // All acknowledged: the group, subscribed again, gets nothing more.
      sub = await bus.subscribe(options);
      await sleep(1500);
      await sub.close();
      expect(done).toHaveLength(10);
    },
  );

  it.skipIf(!ok).sequential(
    "moves a crashed member's held message to another within the group's ack wait",
    async () => {
      const t = topic();
      const ackWaitMs = 1500;
      const sent = await publish(t, 'crash', 1);
      const child = await crashingConsumer(family, kind.name, 'crashy-fast', t, sent.id, ackWaitMs);
      const c = collector();
      // Joins while the other member holds the message, so that only its crash hands it over.
      const sub = await bus.subscribe({
        group: 'crashy-fast',
        topic: t,
        ackWaitMs,
        concurrency: 4,
        handler: c.handler,
      });
      await sleep(ackWaitMs * 2);
      expect(c.ids()).not.toContain(sent.id); // held, with heartbeats: not handed over while it lives
      const killed = Date.now();
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
      // An ack wait, plus a rebalance tick and a fetch (embedded) or a pull (NATS).
      await eventually(() => expect(c.ids()).toContain(sent.id), { timeoutMs: ackWaitMs + 3000, intervalMs: 50 });
      console.log(`${kind.name}: held message handed over ${Date.now() - killed} ms after the kill`);
      await sub.close();
    },
  );
});
