/** What every fault scenario does at its end: let events settle, check, record, assert. */
import { expect } from 'vitest';
import { isDetailBody } from '../helpers/http-client.js';
import { type Verdict, postgresEventCounts, postgresState, settle } from './checker.js';
import type { FaultCluster } from './cluster.js';
import type { Load, OpRecord } from './load.js';
import { recoveryMs, report, type ScenarioReport } from './summary.js';

export interface Conclusion {
  readonly entry: ScenarioReport;
  readonly verdict: Verdict;
}

/** Waits for the acknowledged changes' events (up to `settleTimeoutMs`), checks, and records the report. */
export async function conclude(options: {
  cluster: FaultCluster;
  load: Load;
  scenario: string;
  loadText: string;
  fault: string;
  /** When the fault ended; recovery is measured from here until every API process acknowledges writes again. */
  clearedAt?: number;
  /** Instead: recovery is measured from here until every acknowledged change's events are stored (a hand-over). */
  caughtUpFrom?: number;
  settleTimeoutMs?: number;
  notes?: Record<string, unknown>;
}): Promise<Conclusion> {
  const { cluster, load } = options;
  // The load has stopped; from here on the events catch up.
  await load.stop();
  const settleStarted = Date.now();
  const { verdict, caughtUpMs } = await settle(load.records, () => postgresState(cluster.databaseUrl), {
    timeoutMs: options.settleTimeoutMs ?? 30_000,
  });
  const recovery = () => {
    if (options.caughtUpFrom !== undefined) {
      return caughtUpMs === null ? null : settleStarted + caughtUpMs - options.caughtUpFrom;
    }
    if (options.clearedAt === undefined) return 0;
    return recoveryMs(load.records, options.clearedAt, cluster.apis.length);
  };
  const events = await postgresEventCounts(cluster.databaseUrl).catch((error: unknown) => ({ error: String(error) }));
  const entry = report(
    { scenario: options.scenario, load: options.loadText, fault: options.fault },
    load.records,
    verdict,
    { recoveryMs: recovery(), eventsCaughtUpMs: caughtUpMs },
    { ...options.notes, loadMs: loadDuration(load.records), events },
  );
  return { entry, verdict };
}

function loadDuration(records: readonly OpRecord[]): number {
  if (records.length === 0) return 0;
  const end = records.reduce((max, r) => Math.max(max, r.endedAt), 0);
  return end - records.reduce((min, r) => Math.min(min, r.startedAt), Number.POSITIVE_INFINITY);
}

/**
 * Nothing lost, doubled or stuck; no process died; the service recovered. Soft assertions: a
 * failing scenario names every way it failed, not only the first.
 */
export function expectSound(cluster: FaultCluster, { entry, verdict }: Conclusion): void {
  expect.soft(cluster.exited(), 'processes that exited').toEqual([]);
  expect.soft(verdict.lost, 'acknowledged changes lost').toEqual([]);
  expect.soft(verdict.stuck, 'acknowledged executions without one final state').toEqual([]);
  expect.soft(verdict.duplicated, 'changes recorded twice').toEqual([]);
  expect.soft(verdict.unexpected, 'refused changes that happened anyway').toEqual([]);
  expect
    .soft(entry.recoveryMs, 'recovered after the fault (writes acknowledged again, or executions handed over)')
    .not.toBeNull();
  expect.soft(entry.eventsCaughtUpMs, 'every acknowledged change reached the event store').not.toBeNull();
}

/** Answers that are neither a success nor one of `allowed` (status → which operations may get it). */
export function unexpectedAnswers(
  records: readonly OpRecord[],
  allowed: Readonly<Record<number, readonly string[]>> = {},
): string[] {
  return records
    .filter((r) => r.status === null || r.status >= 400)
    .filter((r) => !(r.status !== null && allowed[r.status]?.includes(r.kind)))
    .map((r) => `${r.kind} ${r.code ?? ''} → ${r.status ?? 'no answer'}: ${r.error ?? ''}`);
}

/** Error answers must be `{detail}` with a non-empty string. */
export function malformedErrors(records: readonly OpRecord[]): string[] {
  return records
    .filter((r) => r.status !== null && r.status >= 400 && !isDetailBody(r.error ?? ''))
    .map((r) => `${r.kind} → ${r.status}: ${r.error}`);
}
