import type { components, operations } from './api-types';
import { ApiError, errorDetail } from './auth-store';
import { auth } from './session';

export { isMissingRoute, messageOf } from './failures';

type Schemas = components['schemas'];
export type UrlMapping = Schemas['UrlMappingRead'];
export type UrlMappingCreate = Schemas['UrlMappingCreate'];
export type UrlMappingUpdate = Schemas['UrlMappingUpdate'];
type JsonBody<T> = T extends { content: { 'application/json': infer B } } ? B : never;
export type RegisterBody = JsonBody<operations['register']['requestBody']>;
/** The runtime settings named in the API document, and any others the server adds (integers, or words). */
export type Settings = JsonBody<operations['get_settings']['responses'][200]> & Record<string, number | string>;
/** `POST /api/v1/links`: the URL, and a code unless the server is to generate one. */
export interface LinkCreate {
  url: string;
  code?: string;
}
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

export const api = {
  register: (body: RegisterBody) => requestJson<unknown>('POST', '/api/v1/auth/register', { json: body }),

  listUrls: (limit: number, after?: string, filter: LinkFilter = {}) =>
    page<UrlMapping>(`/urls${query({ limit, after, ...filter })}`),
  shorten: (body: UrlMappingCreate) => requestJson<UrlMapping>('POST', '/shorten', { json: body }),
  createLink: (body: LinkCreate) => requestJson<UrlMapping>('POST', '/api/v1/links', { json: body }),
  updateUrl: (code: string, body: UrlMappingUpdate) =>
    requestJson<UrlMapping>('PATCH', `/${encodeURIComponent(code)}`, { json: body }),
  deleteUrl: (code: string) => requestJson<void>('DELETE', `/${encodeURIComponent(code)}`),

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
