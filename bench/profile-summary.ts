/**
 * `node --import tsx bench/profile-summary.ts FILE.cpuprofile REQUESTS [TOP]`: the main thread's
 * self time per request of a `node --cpu-prof` profile (bench/ab.ts AB_PROFILE), by function,
 * counted from the first request on (start-up left out), idle time and stops left out, so that the
 * profiles of two processes under the same load compare request for request (see PROFILE.md).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/**
 * A gap between two samples longer than this (µs) is a process stopped (SIGSTOP: bench/ab.ts
 * stops each target between its runs), not work: V8 samples every millisecond or so while the
 * process runs, whatever its thread does. Counted, it lands on whatever function was sampled last
 * before the stop, as seconds of "self time".
 */
const STOPPED_US = 100_000;

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|bench)\//, '$1/');
  return `${functionName || '(anonymous)'} ${where}:${lineNumber}`;
}

function main(): void {
  const [file, requestsText, topText = '30'] = process.argv.slice(2);
  const requests = Number(requestsText);
  if (file === undefined || !(requests > 0))
    throw new Error('usage: profile-summary.ts FILE.cpuprofile REQUESTS [TOP]');
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const underRequest = (node: ProfileNode | undefined): boolean => {
    for (let n = node; n !== undefined; n = byId.get(parentOf.get(n.id) ?? -1)) {
      if (n.callFrame.functionName === 'parserOnIncoming') return true;
    }
    return false;
  };

  const self = new Map<string, number>();
  let busy = 0;
  let started = false;
  const stopped = { samples: 0, us: 0 };
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)!;
    started ||= underRequest(node);
    if (!started || node.callFrame.functionName === '(idle)') return;
    // A sample's time is the delta to the next one.
    const time = profile.timeDeltas[i + 1] ?? 0;
    if (time > STOPPED_US) {
      stopped.samples++;
      stopped.us += time;
      return;
    }
    busy += time;
    self.set(label(node), (self.get(label(node)) ?? 0) + time);
  });
  process.stdout.write(`busy ${(busy / 1e3).toFixed(0)} ms = ${(busy / requests).toFixed(2)} us/request\n`);
  if (stopped.samples > 0) {
    process.stdout.write(
      `(left out: ${stopped.samples} gaps between samples over ${STOPPED_US / 1e3} ms, ${(stopped.us / 1e3).toFixed(0)} ms in all: the process was stopped)\n`,
    );
  }
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(topText));
  for (const [name, time] of top) {
    const share = ((time / busy) * 100).toFixed(1);
    process.stdout.write(`${(time / requests).toFixed(2).padStart(6)} us ${share.padStart(5)}%  ${name}\n`);
  }
}

main();
