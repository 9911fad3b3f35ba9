import { randomBytes } from 'node:crypto';
import { connect, type JetStreamManager } from 'nats';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { NATS_URL } from './services.js';

/** A NATS stream prefix no other test run uses, led by `suite` (a few letters). */
export function uniqueNatsPrefix(suite: string): string {
  return `${suite}${randomBytes(4).toString('hex')}_`;
}

/** Runs `use` with a JetStream manager on a connection of its own (to the shared server unless told). */
async function withJetStream<T>(url: string, use: (jsm: JetStreamManager) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: url.replace(/^nats:\/\//, '') });
  try {
    return await use(await nc.jetstreamManager());
  } finally {
    await nc.close();
  }
}

/** The names of the JetStream streams that start with `prefix`. */
async function streamsUnder(jsm: JetStreamManager, prefix: string): Promise<string[]> {
  const names: string[] = [];
  for await (const info of jsm.streams.list()) if (info.config.name.startsWith(prefix)) names.push(info.config.name);
  return names;
}

/** Deletes the JetStream streams whose names start with `prefix` (on the shared server unless told). */
export async function deleteNatsStreams(prefix: string, url = NATS_URL): Promise<void> {
  await withJetStream(url, async (jsm) => {
    for (const name of await streamsUnder(jsm, prefix)) await jsm.streams.delete(name);
  });
}

/** Deletes every consumer of the streams whose names start with `prefix`, as `nats consumer rm` does; how many. */
export async function deleteNatsConsumers(prefix: string, url = NATS_URL): Promise<number> {
  return withJetStream(url, async (jsm) => {
    let deleted = 0;
    for (const stream of await streamsUnder(jsm, prefix)) {
      const names: string[] = [];
      for await (const consumer of jsm.consumers.list(stream)) names.push(consumer.name);
      for (const name of names) {
        await jsm.consumers.delete(stream, name);
        deleted++;
      }
    }
    return deleted;
  });
}

/**
 * A NATS bus of the test's own under `prefix`, as another process would connect it: four
 * partitions and quick redelivery (`ackWaitMs`, 50 ms between retries).
 */
export function connectTestNatsBus(url: string, prefix: string, ackWaitMs = 1000): Promise<NatsEventBus> {
  return NatsEventBus.connect({
    url,
    partitions: 4,
    ackWaitMs,
    retryDelayMs: 50,
    prefix,
    retentionMs: 3_600_000,
    duplicateWindowMs: 120_000,
  });
}
