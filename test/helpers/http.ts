import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';

/**
 * Settings every HTTP test app runs with: rate limiting off (design: `RATE_LIMIT_ENABLED=false`),
 * so that the many requests of a test file are judged on their own merits, never answered 429.
 */
/** What the helpers need of an app: a started `TestApp` handle or a Fastify instance. */
export type Injector = Pick<FastifyInstance, 'inject'>;

export const HTTP_TEST_ENV: Readonly<Record<string, string>> = { RATE_LIMIT_ENABLED: 'false' };

/** A `UrlMappingCreate` body. */
export interface CreateBody {
  code: string;
  url: string;
  created_at: string;
  click_count: number;
}

/** The `UrlMappingRead` view. */
export interface ReadBody extends CreateBody {
  id: number;
}

/**
 * Unique, valid short codes: `prefix` (letters, at most 4) then a zero-padded counter, 8 to 10
 * characters in all. Each test file uses its own prefix so files never share codes.
 */
export function codeMaker(prefix: string): () => string {
  if (!/^[a-zA-Z]{1,4}$/.test(prefix)) throw new Error('codeMaker prefix: 1 to 4 letters');
  let n = 0;
  return () => `${prefix}${String(++n).padStart(10 - prefix.length, '0')}`;
}

/** A valid create body with a fresh code, overridable field by field. */
export function newMapping(nextCode: () => string, overrides: Partial<CreateBody> = {}): CreateBody {
  return {
    code: nextCode(),
    url: 'https://example.com/target',
    created_at: '2024-01-01T00:00:00Z',
    click_count: 0,
    ...overrides,
  };
}

/** `POST /shorten` with a JSON body (and, say, a session's cookie). */
export function postShorten(
  app: Injector,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/shorten',
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
}

/**
 * `postShorten` over a real socket, to a started server at `baseUrl`: `mapping`'s code and URL, and
 * `newMapping`'s other fields unless `mapping` has them.
 */
export function fetchShorten(
  baseUrl: string,
  mapping: Pick<CreateBody, 'code' | 'url'> & Partial<CreateBody>,
): Promise<Response> {
  return fetch(`${baseUrl}/shorten`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(newMapping(() => mapping.code, mapping)),
  });
}

/** Creates a mapping and returns its read view; fails the test unless the answer is 201. */
export async function createMapping(app: Injector, body: CreateBody): Promise<ReadBody> {
  const response = await postShorten(app, body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<ReadBody>();
}

/** `PATCH /{code}` with a JSON body. */
export function patchMapping(app: Injector, code: string, body: unknown): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'PATCH',
    url: `/${code}`,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
}

/** Every mapping, through `GET /urls`. */
export async function listAll(app: Injector): Promise<ReadBody[]> {
  const response = await app.inject({ method: 'GET', url: '/urls' });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<ReadBody[]>();
}

/** The mapping with `code`, as `GET /urls` shows it, or undefined. */
export async function findListed(app: Injector, code: string): Promise<ReadBody | undefined> {
  return (await listAll(app)).find((m) => m.code === code);
}

/** Whether the response declares a JSON body (`application/json`, any parameters). */
export function expectJsonContentType(response: LightMyRequestResponse): void {
  expect(String(response.headers['content-type'])).toMatch(/^application\/json(;|$)/);
}

/**
 * The response is an error of `status` with exactly the body `{detail}`: a JSON object whose only
 * key is a non-empty string `detail`, equal to `detail` when a string is given or matching it when
 * a RegExp is given. Never a list, never a stack trace.
 */
export function expectError(response: LightMyRequestResponse, status: number, detail?: string | RegExp): string {
  expect(response.statusCode, response.body).toBe(status);
  expectJsonContentType(response);
  const body = response.json<unknown>();
  expect(body).toEqual({ detail: expect.any(String) });
  const text = (body as { detail: string }).detail;
  expect(text.length).toBeGreaterThan(0);
  expect(text).not.toMatch(/\n\s+at /); // no stack trace
  if (typeof detail === 'string') expect(text).toBe(detail);
  else if (detail) expect(text).toMatch(detail);
  return text;
}

/** A 422 whose detail names `field` (as a word: `'click_count'`, `code`, …). */
export function expectValidationError(response: LightMyRequestResponse, field: string): string {
  return expectError(response, 422, new RegExp(`\\b${field}\\b`));
}

/** A 302 to exactly `location`, with no body. */
export function expectRedirect(response: LightMyRequestResponse, location: string): void {
  expect(response.statusCode, response.body).toBe(302);
  expect(response.headers.location).toBe(location);
  expect(response.body).toBe('');
}

/** The target of a `Link: <…>; rel="next"` header, or undefined when there is none. */
export function nextLink(response: LightMyRequestResponse): string | undefined {
  const link = response.headers.link;
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
  expect(match, `Link header ${String(link)}`).not.toBeNull();
  return match![1];
}
