/** A small HTTP client for tests against started server processes (real sockets, real cookies). */
import { expect } from 'vitest';

export interface Answer {
  readonly status: number;
  readonly text: string;
  readonly ms: number;
  readonly headers: Headers;
  json<T>(): T;
}

/** Whether an error answer's body is the service's `{detail}`, a non-empty string. */
export function isDetailBody(text: string): boolean {
  try {
    const body = JSON.parse(text) as { detail?: unknown };
    return typeof body.detail === 'string' && body.detail !== '';
  } catch {
    return false;
  }
}

/**
 * What breaks the service's rules for its answers, or undefined: never a 5xx (nor no answer at
 * all), and from 400 on a JSON `{detail}` without a stack trace in it (unless `bodyless`: an
 * answer to HEAD).
 */
export function answerFault(
  answer: { readonly status: number; readonly contentType: string | undefined; readonly body: string },
  { bodyless = false } = {},
): string | undefined {
  const { status, contentType, body } = answer;
  if (status < 100 || status >= 500) return `${status}: ${body.slice(0, 300)}`;
  if (status < 400 || bodyless) return undefined;
  if (!(contentType ?? '').startsWith('application/json')) return `${status} as ${contentType}: ${body.slice(0, 200)}`;
  if (!isDetailBody(body)) return `${status} without a {detail}: ${body.slice(0, 200)}`;
  const { detail } = JSON.parse(body) as { detail: string };
  if (/\n\s+at /.test(detail)) return `${status} with a stack: ${detail.slice(0, 200)}`;
  return undefined;
}

/** A signed-in browser: its cookies and its CSRF token. */
export interface BrowserSession {
  readonly cookie: string;
  readonly csrf: string;
}

export async function send(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; session?: BrowserSession; csrf?: boolean } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.session) {
    headers.cookie = options.session.cookie;
    // What a browser's client sends: the CSRF token on every change, unless told otherwise.
    if (options.csrf ?? method !== 'GET') headers['x-csrf-token'] = options.session.csrf;
  }
  const start = performance.now();
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    redirect: 'manual',
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  const ms = performance.now() - start;
  return { status: response.status, text, ms, headers: response.headers, json: <T>() => JSON.parse(text) as T };
}

/** The session cookies a successful login set; undefined when the login did not answer 200. */
export function sessionOf(answer: Answer): BrowserSession | undefined {
  if (answer.status !== 200) return undefined;
  const cookies = new Map(
    answer.headers.getSetCookie().map((line) => {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      return [pair!.slice(0, at), pair!.slice(at + 1)] as const;
    }),
  );
  const access = cookies.get('access_token');
  const csrf = cookies.get('csrf_token');
  if (!access || !csrf) return undefined;
  return { cookie: `access_token=${access}; csrf_token=${csrf}`, csrf };
}

let users = 0;

export function newAccount(prefix: string) {
  const n = `${process.pid}${++users}`;
  return { username: `${prefix}${n}`, email: `${prefix}${n}@example.com`, password: 'correct horse battery' };
}

/** Logs `username` in at `base`; fails the test unless it gets a session. */
export async function logIn(base: string, username: string, password: string): Promise<BrowserSession> {
  const answer = await send(base, 'POST', '/api/v1/auth/login', { body: { username, password } });
  const session = sessionOf(answer);
  expect(session, answer.text).toBeDefined();
  return session!;
}

/**
 * A new account (named from `prefix`, see `newAccount`) registered at `registerAt` and logged in
 * at `logInAt` (the same process unless given): the account and its session.
 */
export async function newSignedInAccount(registerAt: string, prefix: string, logInAt = registerAt) {
  const account = newAccount(prefix);
  const registered = await send(registerAt, 'POST', '/api/v1/auth/register', { body: account });
  expect(registered.status, registered.text).toBe(201);
  return { account, session: await logIn(logInAt, account.username, account.password) };
}

/**
 * Sends a change until it is acknowledged (an answer `done` accepts: by default any 2xx), again
 * 100 ms after each 503 (the database away); any other answer fails the test. How many 503s it met.
 */
export async function untilAcknowledged(
  change: () => Promise<{ status: number; text: string }>,
  done: (status: number) => boolean = (status) => status >= 200 && status < 300,
): Promise<number> {
  for (let refused = 0; ; refused++) {
    const answer = await change();
    if (done(answer.status)) return refused;
    expect(answer.status, answer.text).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
