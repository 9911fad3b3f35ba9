/**
 * A link's lifecycle as the links page shows and edits it: an optional end time (`expires_at`) and
 * an optional number of visits (`max_visits`); past either the link answers 410 Gone.
 */

export interface Lifecycle {
  readonly expires_at?: string | null;
  readonly max_visits?: number | null;
  readonly click_count: number;
}

export type LinkState =
  | { readonly kind: 'active'; readonly expiresAt: Date | null; readonly visitsLeft: number | null }
  | { readonly kind: 'expired'; readonly at: Date }
  | { readonly kind: 'limit-reached'; readonly maxVisits: number };

/** Whether the link still redirects at `now`, and if not, why. */
export function linkState(link: Lifecycle, now: Date): LinkState {
  const expiresAt = link.expires_at ? new Date(link.expires_at) : null;
  if (expiresAt && expiresAt <= now) return { kind: 'expired', at: expiresAt };
  const max = link.max_visits ?? null;
  if (max !== null && link.click_count >= max) return { kind: 'limit-reached', maxVisits: max };
  return { kind: 'active', expiresAt, visitsLeft: max === null ? null : max - link.click_count };
}

const pad = (n: number) => String(n).padStart(2, '0');

/** An RFC 3339 time as a `datetime-local` input shows it (the reader's time, to the minute); '' for none. */
export function toLocalInput(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A `datetime-local` value (the reader's time) as the RFC 3339 time the API takes; null for an empty field. */
export function fromLocalInput(value: string): string | null {
  if (!value.trim()) return null;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) throw new Error('Enter the expiry as a date and a time.');
  return d.toISOString();
}

/** The "Max visits" field: null when empty, else a whole number of at least 1. */
export function parseMaxVisits(value: string | number | null | undefined): number | null {
  if (value === null || value === undefined || String(value).trim() === '') return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error('Max visits must be a whole number of at least 1.');
  return n;
}

/** The lifecycle fields of a create request: only those the user filled in. */
export function lifecycleForCreate(expires: string, maxVisits: string | number | null) {
  const expiresAt = fromLocalInput(expires);
  const max = parseMaxVisits(maxVisits);
  return { ...(expiresAt ? { expires_at: expiresAt } : {}), ...(max !== null ? { max_visits: max } : {}) };
}

/** The lifecycle fields of an edit: only those changed, null where a field was emptied (which clears it). */
export function lifecycleChanges(
  from: Pick<Lifecycle, 'expires_at' | 'max_visits'>,
  expires: string,
  maxVisits: string | number | null,
): { expires_at?: string | null; max_visits?: number | null } {
  const changes: { expires_at?: string | null; max_visits?: number | null } = {};
  if (expires !== toLocalInput(from.expires_at)) changes.expires_at = fromLocalInput(expires);
  const max = parseMaxVisits(maxVisits);
  if (max !== (from.max_visits ?? null)) changes.max_visits = max;
  return changes;
}

/** What a link card says of the lifecycle: a badge once the link has stopped, and the limits it has. */
export function linkStateText(state: LinkState, locale?: string, timeZone?: string): { badge?: string; note: string } {
  const when = (date: Date) =>
    new Intl.DateTimeFormat(locale, {
      dateStyle: 'medium',
      timeStyle: 'short',
      ...(timeZone ? { timeZone } : {}),
    }).format(date);
  switch (state.kind) {
    case 'expired':
      return { badge: 'Expired', note: `Expired ${when(state.at)}` };
    case 'limit-reached':
      return {
        badge: 'Limit reached',
        note: `Reached its limit of ${state.maxVisits} ${state.maxVisits === 1 ? 'visit' : 'visits'}`,
      };
    default: {
      const parts: string[] = [];
      if (state.expiresAt) parts.push(`Expires ${when(state.expiresAt)}`);
      if (state.visitsLeft !== null)
        parts.push(`${state.visitsLeft} ${state.visitsLeft === 1 ? 'visit' : 'visits'} left`);
      return { note: parts.join(' · ') };
    }
  }
}
