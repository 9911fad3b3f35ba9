import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { Clock } from '../../src/ports/clock.js';
import type { Injector } from './http.js';

/**
 * Test settings for the account suites: `NODE_ENV=test` unlocks `BCRYPT_ROUNDS` below 10 (the
 * documented escape hatch), so hashing costs microseconds instead of a quarter second. These
 * suites send far more logins than the auth rate limit admits; rate limiting has its own tests.
 */
export const AUTH_TEST_ENV: Readonly<Record<string, string>> = {
  NODE_ENV: 'test',
  BCRYPT_ROUNDS: '4',
  RATE_LIMIT_ENABLED: 'false',
};

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(private time = Date.now()) {}
  now(): number {
    return this.time;
  }
  advance(ms: number): void {
    this.time += ms;
  }
}

let userNumber = 0;

/** A fresh, valid registration body; `prefix` keeps files apart. */
export function newUser(
  prefix: string,
  overrides: Partial<{ username: string; email: string; password: string }> = {},
) {
  const n = `${process.pid}${++userNumber}`;
  return {
    username: `${prefix}${n}`,
    email: `${prefix}${n}@example.com`,
    password: 'correct horse battery',
    ...overrides,
  };
}

export function jsonPost(app: Injector, url: string, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
}

export async function registerUser(app: Injector, body: { username: string; email: string; password: string }) {
  const response = await jsonPost(app, '/api/v1/auth/register', body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ id: number; username: string; email: string; role: string; created_at: string }>();
}

export function loginRequest(app: Injector, username: string, password: string) {
  return jsonPost(app, '/api/v1/auth/login', { username, password });
}

/** The two session cookies a login set, and what a browser would send back. */
export interface Session {
  readonly accessToken: string;
  readonly csrfToken: string;
  /** `Cookie` header carrying both. */
  readonly cookie: string;
  /** `Cookie` plus `X-CSRF-Token`: what a well-behaved client sends on a non-GET request. */
  readonly headers: Record<string, string>;
}

export function sessionFrom(response: LightMyRequestResponse): Session {
  const value = (name: string) => response.cookies.find((c) => c.name === name)?.value;
  const accessToken = value('access_token');
  const csrfToken = value('csrf_token');
  expect(accessToken, response.body).toBeTruthy();
  expect(csrfToken, response.body).toBeTruthy();
  const cookie = `access_token=${accessToken}; csrf_token=${csrfToken}`;
  return { accessToken: accessToken!, csrfToken: csrfToken!, cookie, headers: { cookie, 'x-csrf-token': csrfToken! } };
}

export async function login(app: Injector, username: string, password: string): Promise<Session> {
  const response = await loginRequest(app, username, password);
  expect(response.statusCode, response.body).toBe(200);
  return sessionFrom(response);
}

/** Registers a user and logs in. */
export async function signUp(app: Injector, prefix: string) {
  const body = newUser(prefix);
  const user = await registerUser(app, body);
  return { user, password: body.password, session: await login(app, body.username, body.password) };
}

export function me(app: Injector, cookie: string) {
  return app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { cookie } });
}

/** The value of a counter (with optional labels) in the app's Prometheus text. */
export async function metricValue(app: Injector, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelText = /\{([^}]*)\}/.exec(line)?.[1] ?? '';
    if (wanted.every((w) => labelText.split(',').includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}
