import type { components, operations } from './api-types';
import { ApiError, errorDetail } from './auth-store';
import { fileNameFrom } from './download';
import { EXPORT_TYPES, type ExportFormat, type ImportReport } from './link-import';
import { auth } from './session';
import type { StatsInterval } from './stats';

export { isMissingRoute, messageOf } from './failures';

type Schemas = components['schemas'];
export type UrlMapping = Schemas['UrlMappingRead'];
export type UrlMappingCreate = Schemas['UrlMappingCreate'];
export type UrlMappingUpdate = Schemas['UrlMappingUpdate'];
type JsonBody<T> = T extends { content: { 'application/json': infer B } } ? B : never;
export type RegisterBody = JsonBody<operations['register']['requestBody']>;
/** The runtime settings named in the API document, and any others the server adds (integers, or words). */
export type Settings = JsonBody<operations['get_settings']['responses'][200]> & Record<string, number | string>;
/** `POST /api/v1/links`: the URL, a code unless the server is to generate one, and the optional limits. */
export type LinkCreate = Schemas['LinkCreate'];
/** How `GET /urls` orders: a field, `-` first for descending. */
export type LinkSort = 'created_at' | '-created_at' | 'click_count' | '-click_count';
/** What `GET /urls` finds: only the caller's own (`owner: 'me'`), a substring, an order. */
export interface LinkFilter {
  owner?: 'me';
  q?: string;
  sort?: LinkSort;
}

type Ok<O extends keyof operations, S extends number = 200> = JsonBody<
  operations[O]['responses'] extends Record<S, infer R> ? R : never
>;
export type Execution = Ok<'get_execution'>;
export type ExecutionStatus = Execution['status'];
/** A channel as listed; `secret` only in the answer to its creation. */
export type Channel = Ok<'list_channels'>[number] & { secret?: string };
export type DeadLetter = Ok<'get_dead_letter'>;
export type DeadLetterStatus = DeadLetter['status'];

/** An API key as listed; `key` only in the answer to its creation (shown once). */
export type ApiKey = Ok<'list_api_keys'>[number] & { key?: string };
export type AdminUser = Ok<'list_users'>[number];
export type AdminUserChange = JsonBody<operations['update_user']['requestBody']>;

/** `GET /api/v1/links/{code}/stats`: totals, one series entry per interval (zeros included), the top N of each kind. */
export type LinkStats = Schemas['LinkStats'];

/** A file the server sent, and the name it gave it (or the one the caller chose). */
export interface Download {
  readonly blob: Blob;
  readonly name: string;
}

export const FINAL_STATUSES: ReadonlySet<ExecutionStatus> = new Set(['completed', 'failed', 'timed_out']);

/** One page of a list and the query of the next one (from the `Link: <…>; rel="next"` header). */
export interface Page<T> {
  readonly items: T[];
  readonly next: URLSearchParams | null;
}

export function nextFromLink(link: string | null): URLSearchParams | null {
  const target = link && /<([^>]+)>\s*;\s*rel="?next"?/.exec(link)?.[1];
  return target ? new URL(target, 'http://x').searchParams : null;
}

async function page<T>(path: string): Promise<Page<T>> {
  const response = await auth.request('GET', path);
  if (!response.ok) throw new ApiError(response.status, await errorDetail(response));
  return { items: (await response.json()) as T[], next: nextFromLink(response.headers.get('link')) };
}

const query = (params: Record<string, string | number | undefined>) => {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params))
    if (value !== undefined && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
};

const { requestJson } = auth;

async function download(path: string, accept: string, fallbackName: string): Promise<Download> {
  const response = await auth.request('GET', path, { accept });
  if (!response.ok) throw new ApiError(response.status, await errorDetail(response));
  return { blob: await response.blob(), name: fileNameFrom(response.headers.get('content-disposition'), fallbackName) };
}

const linkPath = (code: string) => `/api/v1/links/${encodeURIComponent(code)}`;

export const api = {
  register: (body: RegisterBody) => requestJson<unknown>('POST', '/api/v1/auth/register', { json: body }),

  listUrls: (limit: number, after?: string, filter: LinkFilter = {}) =>
    page<UrlMapping>(`/urls${query({ limit, after, ...filter })}`),
  shorten: (body: UrlMappingCreate) => requestJson<UrlMapping>('POST', '/shorten', { json: body }),
  createLink: (body: LinkCreate) => requestJson<UrlMapping>('POST', '/api/v1/links', { json: body }),
  updateUrl: (code: string, body: UrlMappingUpdate) =>
    requestJson<UrlMapping>('PATCH', `/${encodeURIComponent(code)}`, { json: body }),
  deleteUrl: (code: string) => requestJson<void>('DELETE', `/${encodeURIComponent(code)}`),

  linkStats: (code: string, range: { from: Date; to: Date; interval: StatsInterval }, signal?: AbortSignal) =>
    requestJson<LinkStats>(
      'GET',
      `${linkPath(code)}/stats${query({ from: range.from.toISOString(), to: range.to.toISOString(), interval: range.interval })}`,
      signal ? { signal } : {},
    ),
  /** Every visit of the range as CSV (all pages: no limit given). */
  visitsCsv: (code: string, range: { from: Date; to: Date }, fallbackName: string) =>
    download(
      `${linkPath(code)}/visits${query({ from: range.from.toISOString(), to: range.to.toISOString() })}`,
      'text/csv',
      fallbackName,
    ),
  exportLinks: (format: ExportFormat, fallbackName: string) =>
    download(`/api/v1/links/export${query({ format })}`, EXPORT_TYPES[format], fallbackName),
  importLinks: (file: Blob, type: string, dryRun: boolean) =>
    requestJson<ImportReport>('POST', `/api/v1/links/import${query({ dry_run: String(dryRun) })}`, {
      body: { content: file, type },
    }),

  apiKeys: () => requestJson<ApiKey[]>('GET', '/api/v1/auth/api-keys'),
  createApiKey: (body: { name: string; expires_at?: string }) =>
    requestJson<ApiKey & { key: string }>('POST', '/api/v1/auth/api-keys', { json: body }),
  revokeApiKey: (id: ApiKey['id']) =>
    requestJson<void>('DELETE', `/api/v1/auth/api-keys/${encodeURIComponent(String(id))}`),

  users: (q: string, limit: number, after?: string) =>
    page<AdminUser>(`/api/v1/admin/users${query({ q, limit, after })}`),
  updateUser: (id: AdminUser['id'], change: AdminUserChange) =>
    requestJson<AdminUser>('PATCH', `/api/v1/admin/users/${encodeURIComponent(String(id))}`, { json: change }),
  unlockUser: (id: AdminUser['id']) =>
    requestJson<AdminUser>('POST', `/api/v1/admin/users/${encodeURIComponent(String(id))}/unlock`),

  settings: () => requestJson<Settings>('GET', '/api/v1/admin/settings'),
  updateSettings: (changes: Partial<Settings>) =>
    requestJson<Settings>('PATCH', '/api/v1/admin/settings', { json: changes }),

  execute: (script: string, timeoutMs?: number) =>
    requestJson<{ execution_id: string; status: 'queued' }>('POST', '/execute', {
      json: { language: 'javascript', script, ...(timeoutMs ? { timeout_ms: timeoutMs } : {}) },
    }),
  execution: (id: string) => requestJson<Execution>('GET', `/api/v1/executions/${encodeURIComponent(id)}`),
  executions: (limit: number, before?: string) => page<Execution>(`/api/v1/executions${query({ limit, before })}`),

  channels: () => requestJson<Channel[]>('GET', '/api/v1/notifications/channels'),
  createChannel: (body: { type: Channel['type']; name: string; url: string }) =>
    requestJson<Channel>('POST', '/api/v1/notifications/channels', { json: body }),
  deleteChannel: (id: Channel['id']) =>
    requestJson<void>('DELETE', `/api/v1/notifications/channels/${encodeURIComponent(String(id))}`),

  deadLetters: (status: DeadLetterStatus | '', limit: number, after?: string) =>
    page<DeadLetter>(`/api/v1/admin/dlq${query({ status, limit, after })}`),
  deadLetter: (id: DeadLetter['id']) =>
    requestJson<DeadLetter>('GET', `/api/v1/admin/dlq/${encodeURIComponent(String(id))}`),
  retryDeadLetter: (id: DeadLetter['id']) =>
    requestJson<unknown>('POST', `/api/v1/admin/dlq/${encodeURIComponent(String(id))}/retry`),
  discardDeadLetter: (id: DeadLetter['id']) =>
    requestJson<unknown>('POST', `/api/v1/admin/dlq/${encodeURIComponent(String(id))}/discard`),
};
