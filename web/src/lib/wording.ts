import type { DeadLetterStatus, ExecutionStatus } from './api';
import { linkStatsCode } from './routes';

/** What people read for an execution's status (the API's names stay in `data-status`). */
const EXECUTION_STATUS: Record<ExecutionStatus, string> = {
  queued: 'Waiting to run',
  running: 'Running',
  completed: 'Finished',
  failed: 'Failed',
  timed_out: 'Ran out of time',
};

export const executionStatusLabel = (status: ExecutionStatus): string => EXECUTION_STATUS[status] ?? status;

/** What people read for a dead letter's status. */
const DEAD_LETTER_STATUS: Record<DeadLetterStatus, string> = {
  retrying: 'Being retried',
  retried: 'Sent again',
  parked: 'Waiting for a decision',
  discarded: 'Discarded',
};

export const deadLetterStatusLabel = (status: DeadLetterStatus): string => DEAD_LETTER_STATUS[status] ?? status;

/** The output panel's text: what the script printed, or why there is nothing. */
export function outputText(output: string | null | undefined, finished: boolean): string {
  if (output) return output;
  return finished ? 'The script printed nothing.' : 'Nothing printed yet.';
}

/** The pages a visitor may be sent back to after logging in, as a sentence names them. */
const PAGE_NAMES: Record<string, string> = {
  '/app/links': 'your links',
  '/app/executions': 'your executions',
  '/app/channels': 'your notification channels',
  '/app/admin/settings': 'the settings',
  '/app/admin/dead-letters': 'the dead letters',
};

/** "your links" for `/app/links?after=3`; "the page you asked for" for anything else. */
export function pageNameOf(address: string): string {
  const path = address.split(/[?#]/, 1)[0]!.replace(/\/$/, '');
  const code = linkStatsCode(path);
  if (code !== null) return `the statistics of ${code}`;
  return PAGE_NAMES[path] ?? 'the page you asked for';
}

/**
 * A channel that could not be added, said for people: the server's validation texts name the
 * request's parts (`body: 'url' …`); the destination guard's name network ranges.
 */
export function channelErrorText(detail: string): string {
  const forbidden = /Destination not allowed: (\S+) is a/.exec(detail);
  if (forbidden) {
    return `Notifications cannot be sent to ${forbidden[1]}: it is a private or local network address. Use an address that is reachable from the internet.`;
  }
  const unresolvable = /host (\S+) cannot be resolved/.exec(detail);
  if (unresolvable) return `No server called ${unresolvable[1]} could be found. Check the URL.`;
  const field = /^body:\s*'?(\w+)'?\s+(.*)$/s.exec(detail);
  if (field) {
    const [, name, rest] = field as unknown as [string, string, string];
    const label =
      name === 'url' ? 'The URL' : name === 'name' ? 'The name' : name === 'type' ? 'The type' : `The ${name}`;
    return `${label} ${rest.replace(/\.?$/, '.')}`;
  }
  return detail;
}
