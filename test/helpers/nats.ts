import { randomBytes } from 'node:crypto';
import { connect } from 'nats';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { NATS_URL } from './services.js';

/** A NATS stream prefix no other test run uses, led by `suite` (a few letters). */
export function uniqueNatsPrefix(suite: string): string {
  return `${suite}${randomBytes(4).toString('hex')}_`;
}

/** Deletes the JetStream streams whose names start with `prefix` (on the shared server unless told). */
export async function deleteNatsStreams(prefix: string, url = NATS_URL): Promise<void> {
  const nc = await connect({ servers: url.replace(/^nats:\/\//, '') });
  try {
    const jsm = await nc.jetstreamManager();
    const names: string[] = [];
    for await (const info of jsm.streams.list()) if (info.config.name.startsWith(prefix)) names.push(info.config.name);
    for (const name of names) await jsm.streams.delete(name);
  } finally {
    await nc.close();
  }
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
