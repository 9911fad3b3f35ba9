/**
 * Each scenario's outcome, one line in the test output and one entry in
 * `test-results/faults-summary.json` (the lead quotes it): load, fault, what was acknowledged,
 * lost, duplicated, and how long recovery took.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Verdict } from './checker.js';
import { type OpRecord, statusCounts } from './load.js';

export const SUMMARY_FILE = join(import.meta.dirname, '..', '..', 'test-results', 'faults-summary.json');

export interface ScenarioReport {
  readonly scenario: string;
  readonly load: string;
  readonly fault: string;
  readonly acknowledged: Verdict['acknowledged'];
  readonly uncertain: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly unexpected: number;
  readonly stuck: number;
  /** From the end of the fault until every API process acknowledged a write again (ms). */
  readonly recoveryMs: number | null;
  /** From the end of the load until every acknowledged change's event was stored (ms). */
  readonly eventsCaughtUpMs: number | null;
  /** Answers by operation and status (`none`: no answer). */
  readonly answers: Record<string, Record<string, number>>;
  /** Up to five examples of each problem. */
  readonly examples: Record<string, readonly string[]>;
  /** Anything else the scenario measured. */
  readonly notes?: Record<string, unknown>;
  readonly at: string;
}

export function report(
  base: { scenario: string; load: string; fault: string },
  records: readonly OpRecord[],
  verdict: Verdict,
  timing: { recoveryMs: number | null; eventsCaughtUpMs: number | null },
  notes?: Record<string, unknown>,
): ScenarioReport {
  const examples: Record<string, readonly string[]> = {};
  for (const name of ['lost', 'duplicated', 'unexpected', 'stuck'] as const) {
    if (verdict[name].length > 0) examples[name] = verdict[name].slice(0, 5);
  }
  const entry: ScenarioReport = {
    ...base,
    acknowledged: verdict.acknowledged,
    uncertain: verdict.uncertain,
    lost: verdict.lost.length,
    duplicated: verdict.duplicated.length,
    unexpected: verdict.unexpected.length,
    stuck: verdict.stuck.length,
    ...timing,
    answers: statusCounts(records),
    examples,
    ...(notes ? { notes } : {}),
    at: new Date().toISOString(),
  };
  record(entry);
  return entry;
}

/** Prints the one-line summary and merges the entry into the summary file. */
export function record(entry: ScenarioReport): void {
  const a = entry.acknowledged;
  console.log(
    `[faults] ${entry.scenario}: load ${entry.load}; fault ${entry.fault}; acknowledged ${a.total} ` +
      `(create ${a.create}, update ${a.update}, delete ${a.delete}, execute ${a.execute}; reads: redirect ${a.redirect}, session ${a.session}); ` +
      `uncertain ${entry.uncertain}; lost ${entry.lost}; duplicated ${entry.duplicated}; unexpected ${entry.unexpected}; ` +
      `stuck ${entry.stuck}; recovery ${entry.recoveryMs ?? 'none'} ms; events caught up ${entry.eventsCaughtUpMs ?? 'never'} ms` +
      (entry.notes ? `; ${JSON.stringify(entry.notes)}` : ''),
  );
  let all: Record<string, ScenarioReport> = {};
  try {
    all = JSON.parse(readFileSync(SUMMARY_FILE, 'utf8')) as Record<string, ScenarioReport>;
  } catch {
    // first entry
  }
  all[entry.scenario] = entry;
  mkdirSync(join(SUMMARY_FILE, '..'), { recursive: true });
  writeFileSync(SUMMARY_FILE, `${JSON.stringify(all, null, 2)}\n`);
}

/**
 * Recovery: from `clearedAt` (the fault over) until every target acknowledged a write sent after
 * it; null when one never did.
 */
export function recoveryMs(records: readonly OpRecord[], clearedAt: number, targets: number): number | null {
  let latest = clearedAt;
  for (let t = 0; t < targets; t++) {
    const first = records
      .filter((r) => r.target === t && r.kind !== 'redirect' && r.kind !== 'session' && r.startedAt >= clearedAt)
      .filter((r) => r.status !== null && r.status >= 200 && r.status < 300)
      .reduce<number | undefined>((min, r) => (min === undefined || r.endedAt < min ? r.endedAt : min), undefined);
    if (first === undefined) return null;
    latest = Math.max(latest, first);
  }
  return latest - clearedAt;
}
